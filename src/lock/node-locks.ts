import { KeyedMutex } from './keyed-mutex.js';
import {
  LockContentionError,
  LockUnavailableError,
  NodeNotFoundError,
  WriteConflictError,
  WriteRejectedError,
} from './lock-errors.js';
import { classifyLock, type LockClassification, type LockRulesConfig, type ReleaseReason } from './lock-rules.js';
import { formatLockValue, isOwnedBy, parseLockValue, type LockValue, type PodRef } from './lock-value.js';
import type { NodeLockApi, NodeSnapshot } from './node-lock-api.js';
import type { OwnerPod } from './owner-pod.js';

/** Who released a lock: metrics and events report releases by path. */
export type ReleasePath = 'owner' | 'bind-failure' | 'webhook' | 'watch' | 'sweeper' | 'takeover';

export type LockEvent =
  | { type: 'acquired'; node: string; pod: PodRef; value: string; attempts: number; replaced?: { value: string; reason: ReleaseReason } }
  | { type: 'reentrant'; node: string; pod: PodRef; value: string }
  | { type: 'released'; node: string; value: string; reason: ReleaseReason | 'owner-request'; path: ReleasePath; ageMs: number | undefined }
  | { type: 'contention'; node: string; pod: PodRef; holder: string; classification: LockClassification }
  | { type: 'stalled'; node: string; holder: string; ageMs: number };

/** Receives every lock outcome; telemetry (metrics, events, logs) plugs in here. */
export interface LockObserver {
  onLockEvent(event: LockEvent): void;
}

export interface RetryPolicy {
  /** Writes with an unknown outcome (timeouts, resets, 5xx) tolerated per call before giving up. */
  attempts: number;
  /** Pause after the first unknown outcome; doubles each time. */
  errorDelayMs: number;
  /**
   * 409s tolerated per call. A conflict is progress by someone else (another replica, the device
   * plugin, the kubelet's status updates), and the next read decides afresh, so the budget is
   * generous; it only stops a pathological livelock.
   */
  conflictAttempts: number;
  /** Pause after the first 409; grows by half each time, up to maxConflictDelayMs. */
  conflictDelayMs: number;
  maxConflictDelayMs: number;
  /** Up to this fraction is added at random to every pause, so racing replicas spread out. */
  jitter: number;
}

// Like HAMi's (5 steps, 100 ms doubling, 0.5 jitter) for errors. Conflicts retry fast and often: two
// processes cycling on one node made 5 conflicts in a row common once API calls took ~3 ms.
export const DEFAULT_RETRY: RetryPolicy = {
  attempts: 5, errorDelayMs: 100, conflictAttempts: 50, conflictDelayMs: 5, maxConflictDelayMs: 200, jitter: 0.5,
};

/** Counts one call's retries; says how long to pause, or throws when the budget is spent. */
class RetryBudget {
  private errors = 0;
  private conflicts = 0;

  constructor(private readonly policy: RetryPolicy, private readonly random: () => number) {}

  get attempts(): number {
    return this.errors + this.conflicts + 1;
  }

  /** Rethrows definite failures; otherwise returns the pause before the next read. */
  next(error: unknown, what: string): number {
    if (error instanceof WriteRejectedError || error instanceof NodeNotFoundError) throw error;
    let base: number;
    if (error instanceof WriteConflictError) {
      this.conflicts++;
      if (this.conflicts >= this.policy.conflictAttempts) {
        throw new LockUnavailableError(`could not ${what}: ${this.conflicts} conflicting writes in a row`, { cause: error });
      }
      base = Math.min(this.policy.maxConflictDelayMs, this.policy.conflictDelayMs * 1.5 ** (this.conflicts - 1));
    } else {
      this.errors++;
      if (this.errors >= this.policy.attempts) {
        throw new LockUnavailableError(`could not ${what} after ${this.errors} failed attempts`, { cause: error });
      }
      base = this.policy.errorDelayMs * 2 ** (this.errors - 1);
    }
    return base * (1 + this.policy.jitter * this.random());
  }
}

export interface NodeLocksDeps {
  api: NodeLockApi;
  config: LockRulesConfig;
  clock?: () => Date;
  observer?: LockObserver;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  retry?: RetryPolicy;
}

export interface AcquireResult {
  outcome: 'acquired' | 'reentrant' | 'taken-over';
  node: string;
  value: string;
  /** resourceVersion of the node after our write (or as read, for re-entrant calls). */
  resourceVersion: string;
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
  outcome: 'released' | 'kept' | 'not-locked';
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

const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * HAMi's node lock over the Kubernetes API, with the rules of lock-rules.ts deciding takeovers and
 * releases. Every write is an RV-guarded merge patch; after a 409 or a lost response the node is
 * read again and the decision made anew. Calls on one node are serialised in this process; other
 * processes are kept honest by the resourceVersion.
 */
export class NodeLocks {
  private readonly mutex = new KeyedMutex();
  private readonly clock: () => Date;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;
  private readonly retry: RetryPolicy;

  constructor(private readonly deps: NodeLocksDeps) {
    this.clock = deps.clock ?? (() => new Date());
    this.sleep = deps.sleep ?? realSleep;
    this.random = deps.random ?? Math.random;
    this.retry = deps.retry ?? DEFAULT_RETRY;
  }

  /**
   * Takes the lock on `node` for `pod`: re-entrant for the same pod, takes over a releasable lock,
   * and throws LockContentionError (without retrying) while another pod holds it.
   */
  acquire(node: string, pod: PodRef): Promise<AcquireResult> {
    return this.mutex.run(node, async () => {
      let wrote: string | undefined;
      let replaced: AcquireResult['replaced'];
      const budget = this.budget();
      for (;;) {
        const snapshot = await this.deps.api.readNode(node);
        const current = snapshot.lock;
        if (current !== undefined) {
          const value = parseLockValue(current);
          if (isOwnedBy(value, pod)) {
            // Our own earlier write whose answer was lost still counts as this call's acquisition.
            if (wrote !== undefined) return this.acquired(snapshot, pod, current, budget.attempts, replaced);
            this.emit({ type: 'reentrant', node, pod, value: current });
            return { outcome: 'reentrant', node, value: current, resourceVersion: snapshot.resourceVersion, attempts: budget.attempts };
          }
          const { classification } = await this.classify(node, value);
          if (classification.state !== 'releasable') {
            this.emit({ type: 'contention', node, pod, holder: current, classification });
            if (classification.state === 'stalled') this.emit({ type: 'stalled', node, holder: current, ageMs: classification.ageMs });
            throw new LockContentionError(node, pod, value, classification);
          }
          replaced = { value: current, reason: classification.reason };
        } else {
          replaced = undefined;
        }
        const value = formatLockValue(this.clock(), pod);
        try {
          wrote = value;
          const written = await this.deps.api.writeLock(node, snapshot.resourceVersion, value);
          return this.acquired(written, pod, value, budget.attempts, replaced);
        } catch (error) {
          await this.sleep(budget.next(error, `acquire the lock on node ${node} for ${pod.namespace}/${pod.name}`));
        }
      }
    });
  }

  /**
   * Removes `pod`'s lock from `node`. Owner-checked (another pod's lock is never touched, even one
   * taken while we retried), RV-guarded and idempotent.
   */
  release(node: string, pod: PodRef, path: ReleasePath = 'owner'): Promise<ReleaseResult> {
    return this.mutex.run(node, async () => {
      const budget = this.budget();
      for (;;) {
        const snapshot = await this.readLockedNode(node);
        if (snapshot === undefined) return { outcome: 'not-locked', node };
        const current = snapshot.lock;
        const value = parseLockValue(current);
        if (!isOwnedBy(value, pod)) return { outcome: 'not-owner', node, value: current };
        try {
          const written = await this.deps.api.writeLock(node, snapshot.resourceVersion, null);
          this.emit({ type: 'released', node, value: current, reason: 'owner-request', path, ageMs: this.ageOf(value) });
          return { outcome: 'released', node, value: current, resourceVersion: written.resourceVersion };
        } catch (error) {
          await this.sleep(budget.next(error, `release the lock on node ${node} for ${pod.namespace}/${pod.name}`));
        }
      }
    });
  }

  /** Releases the node's lock only if the rules say nobody will use it (sweeper, webhook, watch). */
  releaseIfReleasable(node: string, path: ReleasePath): Promise<ConditionalReleaseResult> {
    return this.mutex.run(node, async () => {
      const budget = this.budget();
      for (;;) {
        const snapshot = await this.readLockedNode(node);
        if (snapshot === undefined) return { outcome: 'not-locked', node };
        const current = snapshot.lock;
        const value = parseLockValue(current);
        const { classification } = await this.classify(node, value);
        if (classification.state !== 'releasable') {
          if (classification.state === 'stalled') this.emit({ type: 'stalled', node, holder: current, ageMs: classification.ageMs });
          return { outcome: 'kept', node, value: current, classification, resourceVersion: snapshot.resourceVersion };
        }
        try {
          const written = await this.deps.api.writeLock(node, snapshot.resourceVersion, null);
          this.emit({ type: 'released', node, value: current, reason: classification.reason, path, ageMs: classification.ageMs });
          return { outcome: 'released', node, value: current, classification, resourceVersion: written.resourceVersion };
        } catch (error) {
          await this.sleep(budget.next(error, `release the releasable lock on node ${node}`));
        }
      }
    });
  }

  /** The node's lock, its holder's state and the classification; writes nothing. */
  async inspect(node: string): Promise<LockInspection> {
    const snapshot = await this.deps.api.readNode(node);
    if (snapshot.lock === undefined) {
      return { node, resourceVersion: snapshot.resourceVersion, raw: undefined, value: undefined, owner: undefined, classification: undefined };
    }
    const value = parseLockValue(snapshot.lock);
    const { owner, classification } = await this.classify(node, value);
    return { node, resourceVersion: snapshot.resourceVersion, raw: snapshot.lock, value, owner, classification };
  }

  /** The node when it exists and carries a lock; undefined when there is nothing to release. */
  private async readLockedNode(node: string): Promise<(NodeSnapshot & { lock: string }) | undefined> {
    try {
      const snapshot = await this.deps.api.readNode(node);
      return snapshot.lock === undefined ? undefined : { ...snapshot, lock: snapshot.lock };
    } catch (error) {
      if (error instanceof NodeNotFoundError) return undefined;
      throw error;
    }
  }

  private async classify(node: string, value: LockValue): Promise<{ owner: OwnerPod | null | undefined; classification: LockClassification }> {
    const owner = value.kind === 'owned' ? ((await this.deps.api.readPod(value.owner)) ?? null) : undefined;
    return { owner, classification: classifyLock(value, owner ?? undefined, node, this.clock(), this.deps.config) };
  }

  private acquired(snapshot: NodeSnapshot, pod: PodRef, value: string, attempts: number, replaced: AcquireResult['replaced']): AcquireResult {
    const node = snapshot.name;
    if (replaced) {
      this.emit({ type: 'released', node, value: replaced.value, reason: replaced.reason, path: 'takeover', ageMs: this.ageOf(parseLockValue(replaced.value)) });
    }
    this.emit({ type: 'acquired', node, pod, value, attempts, ...(replaced ? { replaced } : {}) });
    return {
      outcome: replaced ? 'taken-over' : 'acquired',
      node,
      value,
      resourceVersion: snapshot.resourceVersion,
      attempts,
      ...(replaced ? { replaced } : {}),
    };
  }

  private budget(): RetryBudget {
    return new RetryBudget(this.retry, this.random);
  }

  private ageOf(value: LockValue): number | undefined {
    return value.kind === 'malformed' ? undefined : Math.max(0, this.clock().getTime() - value.time.getTime());
  }

  private emit(event: LockEvent): void {
    try {
      this.deps.observer?.onLockEvent(event);
    } catch {
      // Telemetry must never change a lock decision.
    }
  }
}
