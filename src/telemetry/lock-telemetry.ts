import { RELEASE_REASON_TEXT, type ReleaseReason } from '../lock/lock-rules.js';
import { parseLockValue, podKey, quoteForMessage, type LockValue, type PodRef } from '../lock/lock-value.js';
import type { LockEvent, LockObserver, ReleasePath } from '../lock/node-locks.js';
import { clip } from '../user-text.js';
import type { EventRecorder, EventTarget } from './events.js';
import { formatAge } from './human-age.js';
import type { Logger } from './logger.js';
import type { WardenMetrics } from './metrics.js';

/** What LockTelemetry needs of an EventRecorder (the class, or an in-memory stand-in in tests). */
export type EventSink = Pick<EventRecorder, 'record'>;

export interface LockTelemetryDeps {
  metrics: WardenMetrics;
  events?: EventSink;
  log?: Logger;
  /**
   * A stalled lock is reported by every sweep (every 30 s by default) until the device plugin
   * acts; its Events are recorded at most once per node and lock value in this interval.
   */
  stalledEventIntervalMs?: number;
  /** Milliseconds now; injected so tests can step over the interval. */
  now?: () => number;
  /**
   * The holder pod's uid when known (e.g. from the informer cache). `kubectl describe pod` selects
   * events by uid, so without it the pod's NodeLockStalled shows only in `kubectl get events`.
   */
  podUid?: (pod: PodRef) => string | undefined;
}

export const DEFAULT_STALLED_EVENT_INTERVAL_MS = 5 * 60_000;

const PATH_TEXT: Record<ReleasePath, string> = {
  owner: 'its owner',
  'bind-failure': 'the failed bind that took it',
  webhook: 'the admission webhook on pod DELETE',
  watch: 'the pod watch',
  sweeper: 'the lock sweeper',
  takeover: 'the next bind, which took the node over',
};

/** "ns/name" for an owned lock; null when the value names no pod (legacy or malformed). */
function holderOf(value: LockValue): string | null {
  return value.kind === 'owned' ? podKey(value.owner) : null;
}

function describeHolder(value: LockValue): string {
  if (value.kind === 'owned') return `pod ${podKey(value.owner)}`;
  if (value.kind === 'legacy') return `a legacy lock without owner (${quoteForMessage(value.raw)})`;
  return `an unreadable lock value (${quoteForMessage(value.raw)})`;
}

/** Values on nodes can be megabytes long (anyone who can patch a node writes them): logs get a prefix. */
const logValue = (raw: string): string => clip(raw, 512);

function describeReason(reason: ReleaseReason | 'owner-request'): string {
  return reason === 'owner-request' ? 'owner-request (released on its holder\'s behalf)' : `${reason} (${RELEASE_REASON_TEXT[reason]})`;
}

function seconds(ms: number | undefined): number | undefined {
  return ms === undefined ? undefined : Math.round(ms / 100) / 10;
}

/**
 * The lock service's telemetry: every LockEvent becomes metrics and exactly one JSON log line,
 * releases and stalls also Kubernetes Events on the Node (and, for a stall, on the holder pod).
 * NodeLocks calls this synchronously and ignores its failures, so nothing here waits or throws
 * on purpose; Events are written fire-and-forget by the EventRecorder.
 */
export class LockTelemetry implements LockObserver {
  private readonly stalledIntervalMs: number;
  private readonly now: () => number;
  /** node + lock value → when its stall Events were last recorded. */
  private readonly stalledReported = new Map<string, number>();

  constructor(private readonly deps: LockTelemetryDeps) {
    this.stalledIntervalMs = deps.stalledEventIntervalMs ?? DEFAULT_STALLED_EVENT_INTERVAL_MS;
    this.now = deps.now ?? Date.now;
  }

  onLockEvent(event: LockEvent): void {
    switch (event.type) {
      case 'acquired':
        this.onAcquired(event);
        return;
      case 'reentrant':
        this.deps.metrics.recordAcquisition('reentrant');
        this.deps.log?.info({ component: 'lock', event: 'reentrant', node: event.node, pod: podKey(event.pod), value: event.value },
          `lock on node ${event.node} already held by ${podKey(event.pod)} (re-entrant)`);
        return;
      case 'released':
        this.onReleased(event);
        return;
      case 'contention':
        this.deps.metrics.recordContention();
        this.deps.log?.info({
          component: 'lock', event: 'contention', node: event.node, pod: podKey(event.pod), holder: holderOf(parseLockValue(event.holder)),
          value: logValue(event.holder), state: event.classification.state, reason: event.classification.reason, ageSeconds: seconds(event.classification.ageMs),
        }, `lock on node ${event.node} refused to ${podKey(event.pod)}: ${event.classification.state} by ${describeHolder(parseLockValue(event.holder))}`);
        return;
      case 'stalled':
        this.onStalled(event);
        return;
    }
  }

  /**
   * A lock vanished without a release of ours (the device plugin deleting it after Allocate, or a
   * person): counted under path device-plugin and logged. No Event: that is the normal end of
   * every successful allocation, and HAMi's plugin already reports it.
   */
  recordExternalRelease(node: string, value?: string): void {
    this.deps.metrics.recordExternalRelease(node);
    const holder = value === undefined ? null : holderOf(parseLockValue(value));
    this.deps.log?.info({ component: 'lock', event: 'released', node, holder, value: value === undefined ? undefined : logValue(value), reason: 'external', path: 'device-plugin' },
      `lock on node ${node} released outside vgpu-warden${holder === null ? '' : ` (held by ${holder})`}`);
  }

  private onAcquired(event: Extract<LockEvent, { type: 'acquired' }>): void {
    const outcome = event.replaced ? 'taken-over' : 'acquired';
    this.deps.metrics.recordAcquisition(outcome);
    const replaced = event.replaced
      ? { previousHolder: holderOf(parseLockValue(event.replaced.value)), previousValue: logValue(event.replaced.value), reason: event.replaced.reason }
      : {};
    this.deps.log?.info({ component: 'lock', event: 'acquired', node: event.node, pod: podKey(event.pod), value: event.value, outcome, attempts: event.attempts, ...replaced },
      `lock on node ${event.node} ${outcome === 'taken-over' ? 'taken over' : 'acquired'} by ${podKey(event.pod)}`);
  }

  private onReleased(event: Extract<LockEvent, { type: 'released' }>): void {
    this.deps.metrics.recordRelease(event.reason, event.path);
    const value = parseLockValue(event.value);
    const holder = holderOf(value);
    this.deps.log?.info({
      component: 'lock', event: 'released', node: event.node, holder, value: logValue(event.value), reason: event.reason, path: event.path, ageSeconds: seconds(event.ageMs),
    }, `lock on node ${event.node} released by ${event.path}: ${event.reason}`);
    const age = event.ageMs === undefined ? '' : ` after ${formatAge(event.ageMs / 1000)}`;
    this.deps.events?.record(nodeTarget(event.node), 'Normal', 'NodeLockReleased',
      `Released the node lock of ${describeHolder(value)}${age}: ${describeReason(event.reason)}; released by ${PATH_TEXT[event.path]}`);
  }

  private onStalled(event: Extract<LockEvent, { type: 'stalled' }>): void {
    this.deps.metrics.recordStalledReport();
    const value = parseLockValue(event.holder);
    const holder = holderOf(value);
    this.deps.log?.warn({
      component: 'lock', event: 'stalled', node: event.node, holder, value: logValue(event.holder), reason: 'awaiting-allocation-past-expiry', ageSeconds: seconds(event.ageMs),
    }, `lock on node ${event.node} held by ${holder ?? quoteForMessage(event.holder)} is stalled`);
    if (this.deps.events === undefined || !this.firstReportInInterval(event.node, event.holder)) return;

    const age = formatAge(event.ageMs / 1000);
    // Why we keep it, and what frees it, so whoever reads the Event knows what to do.
    const advice = 'It is kept: taking it over would let the device plugin serve this pod\'s Allocate with another pod\'s GPUs (HAMi #3096). '
      + 'Check the device plugin on this node; NODELOCK_FORCE_AFTER releases such locks.';
    this.deps.events.record(nodeTarget(event.node), 'Warning', 'NodeLockStalled',
      `The node lock of ${describeHolder(value)} is ${age} old, past NODELOCK_EXPIRE, and the pod is still waiting for Allocate. ${advice}`);
    if (value.kind === 'owned') {
      const uid = this.deps.podUid?.(value.owner);
      this.deps.events.record({ kind: 'Pod', namespace: value.owner.namespace, name: value.owner.name, ...(uid === undefined ? {} : { uid }) }, 'Warning', 'NodeLockStalled',
        `This pod has held the lock on node ${event.node} for ${age}, past NODELOCK_EXPIRE, waiting for the device plugin's Allocate. ${advice}`);
    }
  }

  private firstReportInInterval(node: string, lockValue: string): boolean {
    const now = this.now();
    // Forget entries past the interval, so the map holds only locks stalled right now.
    for (const [key, at] of this.stalledReported) if (now - at >= this.stalledIntervalMs) this.stalledReported.delete(key);
    const key = `${node}\n${lockValue}`;
    if (this.stalledReported.has(key)) return false;
    this.stalledReported.set(key, now);
    return true;
  }
}

/**
 * Node events go to the default namespace with the node name as uid, as the kubelet records
 * them; `kubectl describe node` looks for exactly that.
 */
function nodeTarget(node: string): EventTarget {
  return { kind: 'Node', name: node, uid: node };
}
