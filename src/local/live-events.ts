/**
 * Kubernetes Events as the live view keeps them: converted to plain data, ordered by when they
 * last happened across the whole cluster, and digested into a bounded set (the newest N, plus the
 * latest scheduling reason of each pod). Pure: the watch that feeds it lives in event-feed.ts.
 */

export interface LiveEvent {
  /** metadata.uid, else namespace/name: one Event object, however often it is updated. */
  key: string;
  /** metadata.resourceVersion: the apiserver's write order, the tiebreak within one second. */
  resourceVersion: string;
  /** When it last happened (see eventTimeOf); epoch 0 when the Event carries no time at all. */
  time: Date;
  type: string;
  reason: string;
  message: string;
  /** How often it happened (count, or series.count for aggregated events), at least 1. */
  count: number;
  object: { kind: string; namespace: string; name: string; uid: string | undefined };
}

/** Scheduling outcomes that say why a pod is still Pending (kube-scheduler's and vgpu-warden's). */
export const PENDING_REASONS: ReadonlySet<string> = new Set([
  'FailedScheduling',
  'FilteringFailed',
  'NodeLockWait',
  'BindingFailed',
]);

interface RawEvent {
  metadata?: { uid?: string; name?: string; namespace?: string; resourceVersion?: string; creationTimestamp?: unknown };
  involvedObject?: { kind?: string; namespace?: string; name?: string; uid?: string };
  reason?: string;
  message?: string;
  type?: string;
  count?: number;
  eventTime?: unknown;
  lastTimestamp?: unknown;
  firstTimestamp?: unknown;
  series?: { count?: number; lastObservedTime?: unknown };
}

/** Typed LISTs hand out Date objects, watch streams the raw JSON strings: both are read. */
function dateOf(value: unknown): Date | undefined {
  const date = value instanceof Date ? value : typeof value === 'string' && value !== '' ? new Date(value) : undefined;
  return date === undefined || Number.isNaN(date.getTime()) ? undefined : date;
}

/**
 * When an Event last happened: an aggregated series' last observation, else lastTimestamp (core/v1
 * writers), else eventTime (events.k8s.io writers such as kube-scheduler, which leave lastTimestamp
 * empty), else firstTimestamp, else when the object was created.
 */
export function eventTimeOf(event: RawEvent): Date {
  return (
    dateOf(event.series?.lastObservedTime) ??
    dateOf(event.lastTimestamp) ??
    dateOf(event.eventTime) ??
    dateOf(event.firstTimestamp) ??
    dateOf(event.metadata?.creationTimestamp) ??
    new Date(0)
  );
}

export function liveEventOf(raw: unknown): LiveEvent {
  const event = (raw ?? {}) as RawEvent;
  const metadata = event.metadata ?? {};
  const involved = event.involvedObject ?? {};
  return {
    key: metadata.uid ?? `${metadata.namespace ?? ''}/${metadata.name ?? ''}`,
    resourceVersion: metadata.resourceVersion ?? '',
    time: eventTimeOf(event),
    type: event.type ?? '',
    reason: event.reason ?? '',
    message: event.message ?? '',
    count: Math.max(1, event.series?.count ?? event.count ?? 1),
    object: {
      kind: involved.kind ?? '',
      namespace: involved.namespace ?? metadata.namespace ?? '',
      name: involved.name ?? '',
      uid: involved.uid,
    },
  };
}

/** resourceVersions are etcd revisions (decimal integers): compared as numbers, other strings as text. */
function compareVersions(a: string, b: string): number {
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Older first. lastTimestamp and firstTimestamp have whole seconds only, eventTime microseconds, so
 * two Events of one second cannot be ordered by their times: within a second the apiserver's write
 * order (resourceVersion) decides, and only then the sub-second part, then the key (stable).
 */
export function compareEvents(a: LiveEvent, b: LiveEvent): number {
  const [secondA, secondB] = [Math.floor(a.time.getTime() / 1000), Math.floor(b.time.getTime() / 1000)];
  if (secondA !== secondB) return secondA - secondB;
  return (
    compareVersions(a.resourceVersion, b.resourceVersion) ||
    a.time.getTime() - b.time.getTime() ||
    (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)
  );
}

export interface EventDigestLimits {
  /** Newest Events kept for "recent events". */
  recent: number;
  /** Pods whose latest pending reason is kept (the least recently updated is forgotten first). */
  pods: number;
}

const podKey = (object: LiveEvent['object']): string => `${object.namespace}/${object.name}`;

/**
 * The newest `limits.recent` Events of the cluster and, per pod, the latest Event with a pending
 * reason, however old (a pod can be Pending for an hour behind a flood of newer Events). Fed by a
 * LIST (replace) and then a watch (upsert/remove); memory stays bounded whatever the cluster holds.
 */
export class EventDigest {
  /** Older first. */
  private recentEvents: LiveEvent[] = [];
  private readonly reasons = new Map<string, LiveEvent>();

  constructor(private readonly limits: EventDigestLimits) {}

  replace(events: Iterable<LiveEvent>): void {
    this.recentEvents = [];
    this.reasons.clear();
    for (const event of events) this.upsert(event);
  }

  upsert(event: LiveEvent): void {
    this.dropRecent(event.key);
    const oldest = this.recentEvents[0];
    if (this.recentEvents.length < this.limits.recent || (oldest !== undefined && compareEvents(event, oldest) > 0)) {
      // Binary search: a watch delivers mostly the newest, so this is usually the end.
      let low = 0;
      let high = this.recentEvents.length;
      while (low < high) {
        const middle = (low + high) >> 1;
        if (compareEvents(this.recentEvents[middle] as LiveEvent, event) <= 0) low = middle + 1;
        else high = middle;
      }
      this.recentEvents.splice(low, 0, event);
      if (this.recentEvents.length > this.limits.recent) this.recentEvents.shift();
    }
    this.noteReason(event);
  }

  remove(event: LiveEvent): void {
    this.dropRecent(event.key);
    const key = podKey(event.object);
    if (this.reasons.get(key)?.key === event.key) this.reasons.delete(key);
  }

  /** The newest Events, older first. */
  recent(): readonly LiveEvent[] {
    return this.recentEvents;
  }

  /** The latest pending reason of this pod; an Event about another incarnation (other UID) does not count. */
  reasonFor(namespace: string, name: string, uid?: string): LiveEvent | undefined {
    const event = this.reasons.get(`${namespace}/${name}`);
    if (event === undefined) return undefined;
    return uid !== undefined && event.object.uid !== undefined && event.object.uid !== uid ? undefined : event;
  }

  /** Everything kept (recent and reasons, once each): what a LIST needs to hand on. */
  members(): LiveEvent[] {
    const all = new Map<string, LiveEvent>();
    for (const event of this.recentEvents) all.set(event.key, event);
    for (const event of this.reasons.values()) all.set(event.key, event);
    return [...all.values()];
  }

  private dropRecent(key: string): void {
    const index = this.recentEvents.findIndex((kept) => kept.key === key);
    if (index >= 0) this.recentEvents.splice(index, 1);
  }

  private noteReason(event: LiveEvent): void {
    if (event.object.kind !== 'Pod' || !PENDING_REASONS.has(event.reason)) return;
    const key = podKey(event.object);
    const known = this.reasons.get(key);
    if (known !== undefined && known.key !== event.key && compareEvents(event, known) < 0) return;
    // Re-inserted so the Map's order is least recently updated first: that one goes when full.
    this.reasons.delete(key);
    this.reasons.set(key, event);
    if (this.reasons.size > this.limits.pods) {
      const first = this.reasons.keys().next();
      if (first.done !== true) this.reasons.delete(first.value);
    }
  }
}
