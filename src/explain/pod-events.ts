import { clip, LABEL_CHARS } from '../base/user-text.js';
import { MESSAGE_CHARS, type EventLine, type EventReport } from './explanation.js';

/** A core/v1 Event as the client returns it (Dates) or as JSON (strings); only what is read here. */
export interface EventLike {
  metadata?: { creationTimestamp?: unknown };
  involvedObject?: { uid?: string };
  type?: string;
  reason?: string;
  message?: string;
  count?: number;
  eventTime?: unknown;
  firstTimestamp?: unknown;
  lastTimestamp?: unknown;
  series?: { count?: number; lastObservedTime?: unknown };
  source?: { component?: string };
  reportingComponent?: string;
}

function timeOf(value: unknown): Date | undefined {
  const time = value instanceof Date ? value : typeof value === 'string' && value !== '' ? new Date(value) : undefined;
  return time === undefined || Number.isNaN(time.getTime()) ? undefined : time;
}

/**
 * When the event last happened: an aggregated event's last observation, else its last timestamp,
 * else when it was first recorded (events.k8s.io writers set only eventTime).
 */
export function eventTime(event: EventLike): Date | undefined {
  return (
    timeOf(event.series?.lastObservedTime) ??
    timeOf(event.lastTimestamp) ??
    timeOf(event.eventTime) ??
    timeOf(event.firstTimestamp) ??
    timeOf(event.metadata?.creationTimestamp)
  );
}

/**
 * Events about this incarnation of the pod (ones naming another UID are an earlier pod's of that name), oldest first.
 */
export function podEvents<T extends EventLike>(events: readonly T[], podUid: string | undefined): T[] {
  const mine = events.filter(
    (event) =>
      podUid === undefined ||
      event.involvedObject?.uid === undefined ||
      event.involvedObject.uid === '' ||
      event.involvedObject.uid === podUid,
  );
  // Undated events sort first, as the oldest; ties keep the API's order.
  return mine
    .map((event, index) => ({ event, index, at: eventTime(event)?.getTime() ?? -Infinity }))
    .sort((a, b) => a.at - b.at || a.index - b.index)
    .map(({ event }) => event);
}

/** The `limit` most recent of `sorted` (oldest first), clipped for display. */
export function eventReport(sorted: readonly EventLike[], now: Date, limit: number): EventReport {
  const recent = sorted.slice(Math.max(0, sorted.length - limit));
  const items: EventLine[] = recent.map((event) => {
    const at = eventTime(event);
    return {
      time: at?.toISOString() ?? null,
      ageSeconds: at === undefined ? null : Math.max(0, Math.floor((now.getTime() - at.getTime()) / 1000)),
      type: clip(event.type ?? '', LABEL_CHARS),
      reason: clip(event.reason ?? '', LABEL_CHARS),
      message: clip((event.message ?? '').replace(/\s+/g, ' ').trim(), MESSAGE_CHARS),
      count: event.series?.count ?? event.count ?? 1,
      source: clip(event.reportingComponent || event.source?.component || '', LABEL_CHARS),
    };
  });
  return { items, omitted: sorted.length - recent.length };
}

/** Reasons a bind writes about its progress: the latest of them says where the bind stands. */
// BindingSucceed is HAMi's reason, which our binder writes before kube-scheduler's Scheduled.
const BIND_REASONS = new Set(['NodeLockWait', 'BindingFailed', 'BindingSucceed', 'Scheduled']);

/** The most recent bind-related event, if any. */
export function lastBindEvent<T extends EventLike>(sorted: readonly T[]): T | undefined {
  return sorted.findLast((event) => BIND_REASONS.has(event.reason ?? ''));
}

const LOCK_WAIT = /^waiting for the lock on node (\S+?):/;
/** What the binder says when the lock is free but the node's kubelet has not acknowledged an earlier pod. */
const KUBELET_WAIT = /kubelet has not acknowledged the allocation of (\S+?)( and \d+ more)? \(/;

/** The pod a NodeLockWait event says the node's kubelet has not acknowledged yet, if it says so. */
export function unacknowledgedIn(event: { reason: string; message: string } | undefined): string | undefined {
  if (event?.reason !== 'NodeLockWait') return undefined;
  return KUBELET_WAIT.exec(event.message)?.[1];
}

/** The node a NodeLockWait event names (our binder writes "waiting for the lock on node <node>: ..."). */
export function lockWaitNode(event: EventLike | undefined): string | undefined {
  if (event?.reason !== 'NodeLockWait') return undefined;
  return LOCK_WAIT.exec(event.message ?? '')?.[1];
}
