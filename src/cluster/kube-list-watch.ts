import { type KubeConfig, type V1Node, type V1Pod, type V1ResourceQuota, Watch } from '@kubernetes/client-node';
import { ResourceExpiredError, type ListWatchSource, type WatchHandlers } from './reflector.js';
import { WardenError } from '../base/errors.js';
import type { ClusterCacheDeps } from './cluster-cache.js';
import { readPages, type PageReader } from './paged-list.js';
import { readRawListPage } from '../kube/raw-list.js';
import { slimNode, slimPod } from './slim-objects.js';

/** A watch ended with an ERROR event or an HTTP error other than 410, or never connected. */
export class WatchFailedError extends WardenError {}

/** A LIST answered without a resourceVersion, so there is nothing to watch from. */
export class ListWithoutVersionError extends WardenError {}

/** What the adapter needs of client-node's `Watch` (injectable for tests). */
export type Watcher = Pick<Watch, 'watch'>;

export interface KubeListWatchOptions<T> {
  /** Fixed server-side watch timeout; by default a fresh random value in [300, 600) s per watch, like client-go. */
  timeoutSeconds?: number;
  /** Items per LIST page (default 500, as client-go). */
  pageSize?: number;
  /**
   * Applied to every listed item as its page arrives and to every watched object, before the
   * caller sees it: the state store's slim copies (slim-objects.ts), so the full objects of a
   * large LIST are never all alive at once.
   */
  transform?: (item: T) => T;
  random?: () => number;
  watcher?: Watcher;
}

interface StatusObject {
  code?: unknown;
  reason?: unknown;
  message?: unknown;
}

/** client-go's minWatchTimeout: watch timeouts are spread over [5, 10) minutes so watchers do not
 *  all reconnect at once. */
const MIN_WATCH_TIMEOUT_SECONDS = 300;

function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new WardenError('watch aborted', { cause: reason });
}

/** The error an ERROR watch event stands for; its object is a metav1.Status. */
function statusError(path: string, object: unknown): Error {
  const status = (object ?? {}) as StatusObject;
  const message = typeof status.message === 'string' ? status.message : JSON.stringify(object);
  if (status.code === 410 || status.reason === 'Expired' || status.reason === 'Gone') {
    return new ResourceExpiredError(`watch ${path}: ${message}`, { cause: object });
  }
  return new WatchFailedError(`watch ${path}: ${message}`, { cause: object });
}

/** The error a failed watch request stands for; client-node puts the HTTP status in `statusCode`. */
function requestError(path: string, error: unknown): Error {
  const statusCode = (error as { statusCode?: unknown } | null)?.statusCode;
  if (statusCode === 410) return new ResourceExpiredError(`watch ${path}: HTTP 410 Gone`, { cause: error });
  const detail =
    typeof statusCode === 'number' ? `HTTP ${statusCode}` : error instanceof Error ? error.message : String(error);
  return new WatchFailedError(`watch ${path} failed: ${detail}`, { cause: error });
}

const isTimeout = (error: unknown): boolean => (error as { name?: unknown } | null)?.name === 'TimeoutError';

/**
 * A ListWatchSource on @kubernetes/client-node 2.x: `readPage` is the caller's typed LIST call for
 * one page (paged-list.ts), watches go
 * through client-node's `Watch` with bookmarks on. `Watch` asks the KubeConfig for its dispatcher
 * through `applySecurityAuthentication`, so with a PooledKubeConfig watches use the pooled keep-alive
 * agent like every other call (each open watch holds one of its connections for its lifetime).
 */
export function kubeListWatchSource<T>(
  kubeConfig: KubeConfig,
  path: string,
  readPage: PageReader<T>,
  options: KubeListWatchOptions<T> = {},
): ListWatchSource<T> {
  const watcher = options.watcher ?? new Watch(kubeConfig);
  const random = options.random ?? Math.random;
  const timeoutSeconds = () => options.timeoutSeconds ?? Math.floor(MIN_WATCH_TIMEOUT_SECONDS * (1 + random()));
  const transform = options.transform ?? ((item: T) => item);

  return {
    async list(signal) {
      const items: T[] = [];
      const resourceVersion = await readPages(
        readPage,
        (item) => {
          items.push(transform(item));
        },
        signal,
        options.pageSize,
      );
      if (resourceVersion === undefined || resourceVersion === '')
        throw new ListWithoutVersionError(`list ${path} returned no resourceVersion`);
      return { items, resourceVersion };
    },

    watch(resourceVersion: string, handlers: WatchHandlers<T>, signal: AbortSignal): Promise<void> {
      return new Promise<void>((resolve, reject) => {
        if (signal.aborted) {
          reject(abortError(signal));
          return;
        }
        let settled = false;
        // Watch hands out its AbortController only once the response headers are in.
        let controller: AbortController | undefined;
        let connected = false;
        const finish = (error?: Error) => {
          if (settled) return;
          settled = true;
          signal.removeEventListener('abort', onAbort);
          controller?.abort();
          if (error === undefined) resolve();
          else reject(error);
        };
        const onAbort = () => {
          finish(abortError(signal));
        };
        signal.addEventListener('abort', onAbort, { once: true });

        const onObject = (type: string, object: unknown) => {
          if (settled) return;
          switch (type) {
            case 'ADDED':
            case 'MODIFIED':
            case 'DELETED':
              handlers.onEvent(type, transform(object as T));
              return;
            case 'BOOKMARK': {
              const bookmarkVersion = (object as { metadata?: { resourceVersion?: unknown } } | null)?.metadata
                ?.resourceVersion;
              if (typeof bookmarkVersion === 'string' && bookmarkVersion !== '') handlers.onBookmark(bookmarkVersion);
              return;
            }
            case 'ERROR':
              finish(statusError(path, object));
              return;
            default:
              // Event types this client does not know carry nothing it could apply.
              return;
          }
        };
        const onDone = (error: unknown) => {
          if (error === null || error === undefined) finish();
          // Watch also aborts a connected stream after 30 s without data; the apiserver sends
          // bookmarks only about once a minute, so on a quiet collection that is an ordinary end and
          // the reflector resumes from its last resourceVersion. Before the connection is up the same
          // timeout is a real failure.
          else if (connected && isTimeout(error)) finish();
          else finish(requestError(path, error));
        };

        const query = { allowWatchBookmarks: true, resourceVersion, timeoutSeconds: timeoutSeconds() };
        let started: Promise<AbortController>;
        try {
          started = watcher.watch(path, query, onObject, onDone);
        } catch (error) {
          finish(requestError(path, error));
          return;
        }
        // On a failed request Watch calls `onDone` before this promise resolves, so `connected`
        // only turns true for a stream that is really open.
        started.then(
          (watchController) => {
            controller = watchController;
            connected = true;
            if (settled) watchController.abort();
          },
          (error: unknown) => {
            finish(requestError(path, error));
          },
        );
      });
    },
  };
}

/**
 * The real list-watch sources for nodes, pods and ResourceQuotas, slimmed as they arrive. Their
 * LISTs are read as plain JSON (kube/raw-list.ts), the form the watch delivers too.
 */
export function kubeSources(kubeConfig: KubeConfig): ClusterCacheDeps['sources'] {
  const rawReader =
    <T>(path: string): PageReader<T> =>
    (page, signal) =>
      readRawListPage<T>(kubeConfig, path, page, signal);
  return {
    nodes: kubeListWatchSource<V1Node>(kubeConfig, '/api/v1/nodes', rawReader('/api/v1/nodes'), {
      transform: slimNode,
    }),
    pods: kubeListWatchSource<V1Pod>(kubeConfig, '/api/v1/pods', rawReader('/api/v1/pods'), { transform: slimPod }),
    quotas: kubeListWatchSource<V1ResourceQuota>(
      kubeConfig,
      '/api/v1/resourcequotas',
      rawReader('/api/v1/resourcequotas'),
    ),
  };
}
