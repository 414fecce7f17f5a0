/**
 * The one backoff of the code base, client-go's `wait.Backoff` as a value: each pause is the
 * previous one times `factor`, up to `capMs`, with up to `jitter` of it added at random, so that
 * processes retrying together spread out. No pause is longer than `capMs` (client-go caps only the
 * base and lets jitter pass it). Budgets of attempts are the caller's: `steps` says how many pauses
 * were given since the last reset.
 */
export interface BackoffSpec {
  /** The first pause. */
  initialMs: number;
  /** How much each pause grows over the one before. */
  factor: number;
  /** The longest pause. */
  capMs: number;
  /** Up to this fraction of a pause is added at random (default 0). */
  jitter?: number;
}

export class Backoff {
  private base: number;
  private given = 0;

  constructor(
    private readonly spec: BackoffSpec,
    private readonly random: () => number = Math.random,
  ) {
    this.base = spec.initialMs;
  }

  /** The next pause; the one after it grows by the factor. */
  next(): number {
    const { factor, capMs, jitter = 0 } = this.spec;
    const pause = Math.min(this.base * (1 + jitter * this.random()), capMs);
    this.base = Math.min(this.base * factor, capMs);
    this.given++;
    return pause;
  }

  /** Pauses given since the start or the last reset. */
  get steps(): number {
    return this.given;
  }

  /** Back to the first pause (a success, or a long quiet period). */
  reset(): void {
    this.base = this.spec.initialMs;
    this.given = 0;
  }
}
