import { Backoff } from '../base/backoff.js';
import { LockUnavailableError, NodeNotFoundError, WriteConflictError, WriteRejectedError } from './lock-errors.js';

export interface RetryPolicy {
  /** Writes with an unknown outcome (timeouts, resets, 5xx) tolerated per call before giving up. */
  attempts: number;
  /** Pause after the first unknown outcome; doubles each time (one Backoff, base/backoff.ts). */
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
  attempts: 5,
  errorDelayMs: 100,
  conflictAttempts: 50,
  conflictDelayMs: 5,
  maxConflictDelayMs: 200,
  jitter: 0.5,
};

/** Counts one call's retries; says how long to pause, or throws when the budget is spent. */
export class RetryBudget {
  private readonly errors: Backoff;
  private readonly conflicts: Backoff;

  constructor(
    private readonly policy: RetryPolicy,
    random: () => number,
  ) {
    const jitter = policy.jitter;
    this.errors = new Backoff(
      { initialMs: policy.errorDelayMs, factor: 2, capMs: Number.POSITIVE_INFINITY, jitter },
      random,
    );
    this.conflicts = new Backoff(
      { initialMs: policy.conflictDelayMs, factor: 1.5, capMs: policy.maxConflictDelayMs, jitter },
      random,
    );
  }

  get attempts(): number {
    return this.errors.steps + this.conflicts.steps + 1;
  }

  /** Rethrows definite failures; otherwise returns the pause before the next read. */
  next(error: unknown, what: string): number {
    if (error instanceof WriteRejectedError || error instanceof NodeNotFoundError) throw error;
    if (error instanceof WriteConflictError) {
      if (this.conflicts.steps + 1 >= this.policy.conflictAttempts) {
        throw new LockUnavailableError(`could not ${what}: ${this.conflicts.steps + 1} conflicting writes in a row`, {
          cause: error,
        });
      }
      return this.conflicts.next();
    }
    if (this.errors.steps + 1 >= this.policy.attempts) {
      throw new LockUnavailableError(`could not ${what} after ${this.errors.steps + 1} failed attempts`, {
        cause: error,
      });
    }
    return this.errors.next();
  }
}
