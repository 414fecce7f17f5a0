import type { CoreV1Api, CoreV1Event, KubeConfig } from '@kubernetes/client-node';
import { Reflector, type ListWatchSource } from '../cluster/reflector.js';
import { WardenError } from '../base/errors.js';
import { withSignal } from '../kube/call-options.js';
import { kubeListWatchSource } from '../cluster/kube-list-watch.js';
import { DEFAULT_PAGE_SIZE, pageQuery, readPages, type PageReader } from '../cluster/paged-list.js';
import { EventDigest, liveEventOf, type EventDigestLimits, type LiveEvent } from './live-events.js';

/** What the feed needs of the API: one page of Events across all namespaces. */
export type EventPageReader = PageReader<CoreV1Event>;

export function kubeEventPages(core: CoreV1Api): EventPageReader {
  return (page, signal) => core.listEventForAllNamespaces(pageQuery(page), withSignal(signal));
}

/**
 * A LIST of every Event, page by page (the apiserver serves all pages from one snapshot), folded
 * into a digest as it goes: only what the digest keeps survives a page, so memory stays bounded by
 * the digest however many Events the cluster holds. A LIST with `limit` alone would return the
 * first Events by key (namespace/name), not the newest.
 */
export async function listEventDigest(
  read: EventPageReader,
  limits: EventDigestLimits,
  signal: AbortSignal,
  pageSize = DEFAULT_PAGE_SIZE,
): Promise<{ items: LiveEvent[]; resourceVersion: string }> {
  const digest = new EventDigest(limits);
  const resourceVersion = await readPages(
    read,
    (event) => {
      digest.upsert(liveEventOf(event));
    },
    signal,
    pageSize,
  );
  if (resourceVersion === undefined || resourceVersion === '')
    throw new WardenError('the Event list answered without a resourceVersion');
  return { items: digest.members(), resourceVersion };
}

/** Events as a list-watch source: the paged, digested LIST above, then a watch of /api/v1/events. */
export function liveEventSource(
  kubeConfig: KubeConfig,
  read: EventPageReader,
  limits: EventDigestLimits,
): ListWatchSource<LiveEvent> {
  // Only its watch is used; the LIST is the paged one.
  const raw = kubeListWatchSource<unknown>(kubeConfig, '/api/v1/events', () =>
    Promise.reject(new WardenError('unused: events are listed page by page')),
  );
  return {
    list: (signal) => listEventDigest(read, limits, signal),
    watch: (resourceVersion, handlers, signal) =>
      raw.watch(
        resourceVersion,
        {
          onEvent: (type, object) => {
            handlers.onEvent(type, liveEventOf(object));
          },
          onBookmark: (version) => {
            handlers.onBookmark(version);
          },
        },
        signal,
      ),
  };
}

/**
 * The cluster's Events kept current for the live view: a reflector (list, then watch, relist after a
 * 410) applying every change to one bounded digest.
 */
export class EventFeed {
  readonly digest: EventDigest;
  private readonly reflector: Reflector<LiveEvent>;

  constructor(deps: {
    source: ListWatchSource<LiveEvent>;
    limits: EventDigestLimits;
    log?: (level: 'info' | 'warn', message: string) => void;
  }) {
    const digest = new EventDigest(deps.limits);
    this.digest = digest;
    this.reflector = new Reflector<LiveEvent>({
      what: 'events',
      source: deps.source,
      ...(deps.log === undefined ? {} : { log: deps.log }),
      sink: {
        replace: (items) => {
          digest.replace(items);
        },
        apply: (type, event) => {
          if (type === 'DELETED') digest.remove(event);
          else digest.upsert(event);
        },
      },
    });
  }

  start(): void {
    this.reflector.start();
  }

  async stop(): Promise<void> {
    await this.reflector.stop();
  }
}
