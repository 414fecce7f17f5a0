import { RELEASE_REASON_TEXT, type ReleaseReason } from '../lock/lock-rules.js';
import { parseLockValue, podKey, quoteForMessage, type LockValue, type PodRef } from '../lock/lock-value.js';
import type { LockEvent, LockObserver, ReleasePath, SweepObserver, SweepOutcome } from '../lock/lock-events.js';
import { clip } from '../base/user-text.js';
import type { EventRecorder, EventTarget } from './events.js';
import { formatAge } from '../base/human-age.js';
import type { Logger } from './logger.js';
import type { WardenMetrics } from './metrics.js';
import { DEFAULT_STALLED_LIMITS, StalledLocks, type Stall, type StallReport } from './stalled-locks.js';
import { type Clock, systemClock } from '../base/clock.js';

/** What LockTelemetry needs of an EventRecorder (the class, or an in-memory stand-in in tests). */
export type EventSink = Pick<EventRecorder, 'record'>;

export interface LockTelemetryDeps {
  metrics: WardenMetrics;
  events?: EventSink;
  log?: Logger;
  /**
   * A stalled lock is reported by every sweep (every 30 s by default) and every bind it refuses,
   * until the device plugin acts. It is logged and recorded as an Event when first seen, then
   * again after this long (default 5 min), each reminder waiting twice as long as the last...
   */
  stalledRepeatMs?: number;
  /**
   * ...up to this long (default 30 min; keep it under the
   * EventRecorder's idle expiry, 1 h, so reminders count on one Event).
   */
  stalledMaxRepeatMs?: number;
  /** Milliseconds now; injected so tests can step over the backoff. */
  now?: Clock;
  /**
   * The holder pod's uid when known (e.g. from the informer cache). `kubectl describe pod` selects
   * events by uid, so without it the pod's NodeLockStalled shows only in `kubectl get events`.
   */
  podUid?: (pod: PodRef) => string | undefined;
}

export const DEFAULT_STALLED_REPEAT_MS = DEFAULT_STALLED_LIMITS.firstRepeatMs;
export const DEFAULT_STALLED_MAX_REPEAT_MS = DEFAULT_STALLED_LIMITS.maxRepeatMs;

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
  return reason === 'owner-request'
    ? "owner-request (released on its holder's behalf)"
    : `${reason} (${RELEASE_REASON_TEXT[reason]})`;
}

function seconds(ms: number | undefined): number | undefined {
  return ms === undefined ? undefined : Math.round(ms / 100) / 10;
}

/**
 * The lock service's telemetry: every LockEvent becomes metrics and one JSON log line, except a
 * stall, which persists and is reported again by every sweep: it is one warning (and Events on the
 * Node and the holder pod) when first seen, reminders with backoff, and one line when it ends (a
 * release, or a sweep that no longer finds it; the sweeper tells us through sweepCompleted).
 * NodeLocks calls this synchronously and ignores its failures, so nothing here waits or throws
 * on purpose; Events are written fire-and-forget by the EventRecorder.
 */
export class LockTelemetry implements LockObserver, SweepObserver {
  private readonly now: Clock;
  private readonly stalls: StalledLocks;

  constructor(private readonly deps: LockTelemetryDeps) {
    this.now = deps.now ?? systemClock;
    const firstRepeatMs = deps.stalledRepeatMs ?? DEFAULT_STALLED_LIMITS.firstRepeatMs;
    this.stalls = new StalledLocks({
      ...DEFAULT_STALLED_LIMITS,
      firstRepeatMs,
      maxRepeatMs: Math.max(firstRepeatMs, deps.stalledMaxRepeatMs ?? DEFAULT_STALLED_LIMITS.maxRepeatMs),
    });
  }

  onLockEvent(event: LockEvent): void {
    switch (event.type) {
      case 'acquired':
        this.onAcquired(event);
        return;
      case 'reentrant':
        this.deps.metrics.recordAcquisition('reentrant');
        this.deps.log?.info(
          { component: 'lock', event: 'reentrant', node: event.node, pod: podKey(event.pod), value: event.value },
          `lock on node ${event.node} already held by ${podKey(event.pod)} (re-entrant)`,
        );
        return;
      case 'released':
        this.onReleased(event);
        return;
      case 'contention':
        this.deps.metrics.recordContention();
        this.deps.log?.info(
          {
            component: 'lock',
            event: 'contention',
            node: event.node,
            pod: podKey(event.pod),
            holder: holderOf(event.holderValue),
            value: logValue(event.holder),
            state: event.classification.state,
            reason: event.classification.reason,
            ageSeconds: seconds(event.classification.ageMs),
          },
          `lock on node ${event.node} refused to ${podKey(event.pod)}: ` +
            `${event.classification.state} by ${describeHolder(event.holderValue)}`,
        );
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
    const stall = this.stalls.released(node, value);
    this.deps.log?.info(
      {
        component: 'lock',
        event: 'released',
        node,
        holder,
        value: value === undefined ? undefined : logValue(value),
        reason: 'external',
        path: 'device-plugin',
        ...stalledFields(stall, this.now()),
      },
      `lock on node ${node} released outside vgpu-warden` +
        `${holder === null ? '' : ` (held by ${holder})`}${stalledSuffix(stall, this.now())}`,
    );
  }

  /**
   * A complete sweep checked every locked node: a stalled lock it no longer finds stalled has ended
   * without a release of ours (the device plugin's Allocate, or a person). One line says so, the
   * counterpart of the warning that announced it.
   */
  sweepCompleted(outcome: SweepOutcome): void {
    const now = this.now();
    for (const stall of this.stalls.sweepCompleted(outcome.stalled, outcome.unchecked))
      this.logEndedStall(stall, now, 'gone or replaced outside vgpu-warden');
  }

  private onAcquired(event: Extract<LockEvent, { type: 'acquired' }>): void {
    const outcome = event.replaced ? 'taken-over' : 'acquired';
    this.deps.metrics.recordAcquisition(outcome);
    const replaced = event.replaced
      ? {
          previousHolder: holderOf(event.replaced.parsed),
          previousValue: logValue(event.replaced.value),
          reason: event.replaced.reason,
        }
      : {};
    this.deps.log?.info(
      {
        component: 'lock',
        event: 'acquired',
        node: event.node,
        pod: podKey(event.pod),
        value: event.value,
        outcome,
        attempts: event.attempts,
        ...replaced,
      },
      `lock on node ${event.node} ${outcome === 'taken-over' ? 'taken over' : 'acquired'} by ${podKey(event.pod)}`,
    );
  }

  private onReleased(event: Extract<LockEvent, { type: 'released' }>): void {
    this.deps.metrics.recordRelease(event.reason, event.path);
    const value = event.parsed;
    const holder = holderOf(value);
    const now = this.now();
    const stall = this.stalls.released(event.node, event.value);
    this.deps.log?.info(
      {
        component: 'lock',
        event: 'released',
        node: event.node,
        holder,
        value: logValue(event.value),
        reason: event.reason,
        path: event.path,
        ageSeconds: seconds(event.ageMs),
        ...stalledFields(stall, now),
      },
      `lock on node ${event.node} released by ${event.path}: ${event.reason}${stalledSuffix(stall, now)}`,
    );
    const age = event.ageMs === undefined ? '' : ` after ${formatAge(event.ageMs / 1000)}`;
    this.deps.events?.record(
      nodeTarget(event.node),
      'Normal',
      'NodeLockReleased',
      `Released the node lock of ${describeHolder(value)}${age}: ` +
        `${describeReason(event.reason)}; released by ${PATH_TEXT[event.path]}`,
    );
  }

  /**
   * Every report counts in the metric; the warning line and the Events go out when the lock is
   * first seen stalled and then as reminders with backoff (stalled-locks.ts), not on every sweep.
   * The EventRecorder folds the reminders into the first Event, whose count grows.
   */
  private onStalled(event: Extract<LockEvent, { type: 'stalled' }>): void {
    this.deps.metrics.recordStalledReport();
    const now = this.now();
    const report = this.stalls.report(event.node, event.holder, now);
    if (report.replaced !== undefined) this.logEndedStall(report.replaced, now, 'replaced by another lock');
    if (report.announce === undefined) return;
    this.logStall(event, report, now);
    this.recordStallEvents(event);
  }

  private logStall(event: Extract<LockEvent, { type: 'stalled' }>, report: StallReport, now: number): void {
    const holder = holderOf(event.holderValue);
    const who = holder ?? quoteForMessage(event.holder);
    const fields = {
      component: 'lock',
      event: 'stalled',
      node: event.node,
      holder,
      value: logValue(event.holder),
      reason: 'awaiting-allocation-past-expiry',
      ageSeconds: seconds(event.ageMs),
      ...(event.forceWithheld === undefined ? {} : { forceWithheld: event.forceWithheld }),
    };
    if (report.announce === 'first') {
      this.deps.log?.warn(fields, `lock on node ${event.node} held by ${who} is stalled`);
      return;
    }
    const unlogged = report.unlogged > 0 ? `; ${report.unlogged} reports not logged` : '';
    this.deps.log?.warn(
      { ...fields, reminder: true, unlogged: report.unlogged, stalledSeconds: seconds(now - report.stall.since) },
      `lock on node ${event.node} held by ${who} is still stalled (for ` +
        `${formatAge((now - report.stall.since) / 1000)}${unlogged})`,
    );
  }

  /** The line that says a stalled lock has ended without a release of ours, and `how`. */
  private logEndedStall(stall: Stall, now: number, how: string): void {
    const holder = holderOf(parseLockValue(stall.value));
    this.deps.log?.info(
      {
        component: 'lock',
        event: 'stall-ended',
        node: stall.node,
        holder,
        value: logValue(stall.value),
        ...stalledFields(stall, now),
      },
      `lock on node ${stall.node} held by ${holder ?? quoteForMessage(stall.value)} is no longer ` +
        `stalled${stalledSuffix(stall, now)}: ${how}`,
    );
  }

  private recordStallEvents(event: Extract<LockEvent, { type: 'stalled' }>): void {
    if (this.deps.events === undefined) return;
    const value = event.holderValue;
    const age = formatAge(event.ageMs / 1000);
    // Why we keep it, and what frees it, so whoever reads the Event knows what to do.
    const advice =
      "It is kept: taking it over would let the device plugin serve this pod's Allocate with another pod's GPUs " +
      '(HAMi #3096). ' +
      (event.forceWithheld === 'kubelet-queue'
        ? "NODELOCK_FORCE_AFTER has passed but is withheld: the node's kubelet has not renewed its Lease since the " +
          'lock was written (frozen or cut off), or another pod there still awaits its Allocate, so kubelet would ' +
          'still admit this pod through the lock. Check the kubelet and the device plugin on this node.'
        : "Check the device plugin on this node; NODELOCK_FORCE_AFTER releases such locks once the node's kubelet " +
          'is running.');
    this.deps.events.record(
      nodeTarget(event.node),
      'Warning',
      'NodeLockStalled',
      `The node lock of ${describeHolder(value)} is ${age} old, past NODELOCK_EXPIRE, and the pod is still waiting ` +
        `for Allocate. ${advice}`,
    );
    if (value.kind === 'owned') {
      const uid = this.deps.podUid?.(value.owner);
      this.deps.events.record(
        {
          kind: 'Pod',
          namespace: value.owner.namespace,
          name: value.owner.name,
          ...(uid === undefined ? {} : { uid }),
        },
        'Warning',
        'NodeLockStalled',
        `This pod has held the lock on node ${event.node} for ${age}, past NODELOCK_EXPIRE, waiting for the device ` +
          `plugin's Allocate. ${advice}`,
      );
    }
  }
}

/** Log fields for a release or end of a lock that had been stalled; none for one that had not. */
function stalledFields(stall: Stall | undefined, now: number): { wasStalled?: true; stalledSeconds?: number } {
  return stall === undefined ? {} : { wasStalled: true, stalledSeconds: seconds(now - stall.since) ?? 0 };
}

function stalledSuffix(stall: Stall | undefined, now: number): string {
  return stall === undefined ? '' : ` (stalled for ${formatAge((now - stall.since) / 1000)})`;
}

/**
 * Node events go to the default namespace with the node name as uid, as the kubelet records
 * them; `kubectl describe node` looks for exactly that.
 */
function nodeTarget(node: string): EventTarget {
  return { kind: 'Node', name: node, uid: node };
}
