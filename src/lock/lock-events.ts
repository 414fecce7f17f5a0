import type { LockClassification, ReleaseReason } from './lock-rules.js';
import type { LockValue, PodRef } from './lock-value.js';
import type { NodeSnapshot } from './node-lock-api.js';
import type { OwnerPod } from './owner-pod.js';

export type ReleasePath = 'owner' | 'bind-failure' | 'webhook' | 'watch' | 'sweeper' | 'takeover';

export type LockEvent =
  | {
      type: 'acquired';
      node: string;
      pod: PodRef;
      value: string;
      attempts: number;
      replaced?: { value: string; reason: ReleaseReason; parsed: LockValue };
    }
  | { type: 'reentrant'; node: string; pod: PodRef; value: string; previous: string }
  | {
      type: 'released';
      node: string;
      value: string;
      parsed: LockValue;
      reason: ReleaseReason | 'owner-request';
      path: ReleasePath;
      ageMs: number | undefined;
    }
  | {
      type: 'contention';
      node: string;
      pod: PodRef;
      holder: string;
      holderValue: LockValue;
      classification: LockClassification;
    }
  | {
      type: 'stalled';
      node: string;
      holder: string;
      holderValue: LockValue;
      ageMs: number;
      forceWithheld?: 'kubelet-queue';
    };

/** Receives every lock outcome; telemetry (metrics, events, logs) plugs in here. */
export interface LockObserver {
  onLockEvent(event: LockEvent): void;
}

export interface AcquireOptions {
  /** Aborts reads, writes and retry pauses (a bind's deadline). */
  signal?: AbortSignal;
  /**
   * Asked when the lock already names this pod: may this call re-stamp it as its own? The binder
   * answers no while another bind call in this process (an older incarnation of the same name)
   * still owns it, so the two never share one lock.
   */
  mayReenter?: () => boolean;
  /**
   * Asked before the lock is written for a pod that does not hold it yet, with the node state the
   * write will be guarded by: throws NodeBusyError while the node may not take the next pod. Any
   * change of the node after that state makes the write fail with a 409 and this be asked again.
   */
  beforeWrite?: (snapshot: NodeSnapshot, signal?: AbortSignal) => Promise<void>;
  /**
   * Asked before taking over a lock whose owner's allocation is over (bind-phase success or failed,
   * bound here): HAMi's device plugin deletes that lock itself right after writing the phase, so
   * a take-over in that moment races the plugin's write (a 409, then the node and the owner read
   * again). False makes the lock count as held for this try ('release-pending'); the caller is
   * woken by the release, or tries again later and answers true once it has waited long enough.
   */
  takeOverFinished?: (node: string, value: string) => boolean;
}

export interface ReleaseOptions {
  signal?: AbortSignal;
  /** Release only these exact values (the ones this caller wrote); a re-stamped or newer lock is kept. */
  expectValues?: readonly string[];
}

export interface AcquireResult {
  outcome: 'acquired' | 'reentrant' | 'taken-over';
  node: string;
  value: string;
  /** resourceVersion of the node after our write (or as read, for re-entrant calls). */
  resourceVersion: string;
  /**
   * resourceVersion of the node state our write replaced (or, when an earlier write of ours whose
   * answer was lost is found, of the state that shows it): every earlier change of the node, the
   * release of the previous lock included, has a version no newer than this.
   */
  writtenOver: string;
  attempts: number;
  /** The lock we replaced, and why it was releasable. */
  replaced?: { value: string; reason: ReleaseReason };
}

export interface ReleaseResult {
  outcome: 'released' | 'not-locked' | 'not-owner';
  node: string;
  /** The lock value found (for not-owner: the other holder's). */
  value?: string;
  resourceVersion?: string;
}

export interface ConditionalReleaseResult {
  /** not-owner: asked on behalf of a deleted pod, and the lock names another. */
  outcome: 'released' | 'kept' | 'not-locked' | 'not-owner';
  node: string;
  value?: string;
  classification?: LockClassification;
  resourceVersion?: string;
}

export interface LockInspection {
  node: string;
  resourceVersion: string;
  raw: string | undefined;
  value: LockValue | undefined;
  /** The pod the lock names: its state, or null when it does not exist; undefined when the lock names no pod. */
  owner: OwnerPod | null | undefined;
  classification: LockClassification | undefined;
}

/** What a complete pass found: the stalled locks, and the nodes it could not check (errors). */
export interface SweepOutcome {
  stalled: readonly { node: string; value: string | undefined }[];
  unchecked: ReadonlySet<string>;
}

/**
 * Told after every complete pass (not an abandoned one, which saw only some nodes): a pass sees
 * every locked node, so it is where a stalled lock that vanished unobserved is noticed to be gone.
 */
export interface SweepObserver {
  sweepCompleted(outcome: SweepOutcome): void;
}
