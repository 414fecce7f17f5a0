import { LockUnavailableError, NodeNotFoundError, WriteConflictError, WriteRejectedError } from './lock-errors.js';

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
export class RetryBudget {
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
