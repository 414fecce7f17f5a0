import { sleep as realSleep } from './abort.js';
import { Backoff, type BackoffSpec } from './backoff.js';

/**
 * The one keyed work queue of the code base, client-go's rate-limiting delaying workqueue as a value:
 * a key queued while already queued is queued once; a key added while it is being processed is
 * processed once more after that run ends, never twice at once; `addAfter` delays a key (the earliest
 * of two delays wins); `addRateLimited` delays it by its own `Backoff`, which `forget` resets. At most
 * `workers` keys are processed at once, in the order they became ready. Whether a run is retried is
 * the consumer's call (`addRateLimited` or `forget`), as in client-go's controllers.
 *
 * Unlike client-go's workers, which wake later, a key added while a worker is free starts at once, in
 * the caller's turn: a consumer's first run happens before `add` returns, as a direct call would.
 */
export interface WorkQueueOptions<K> {
  /** One run for `key`; `signal` aborts on shut-down. A throw goes to `onError`: the key is not retried. */
  process: (key: K, signal: AbortSignal) => Promise<void> | void;
  /** Keys processed at once at most; default 1. */
  workers?: number;
  /** Pauses of `addRateLimited`, one Backoff per key; default 5 ms doubling up to 1000 s (client-go's). */
  backoff?: BackoffSpec;
  /** Shuts the queue down when it aborts. */
  signal?: AbortSignal;
  onError?: (key: K, error: unknown) => void;
  /** The pause of a delayed key; rejects when the signal aborts (a cancelled delay). */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Orders two delays of one key; ms since the epoch. */
  clock?: () => number;
}

const DEFAULT_BACKOFF: BackoffSpec = { initialMs: 5, factor: 2, capMs: 1_000_000 };

interface Delayed {
  readonly readyAt: number;
  readonly cancel: AbortController;
}

export class WorkQueue<K> {
  /** Keys ready and waiting for a worker, oldest first. */
  private readonly ready: K[] = [];
  /** Keys owed a run: waiting in `ready`, or added again while processing. */
  private readonly dirty = new Set<K>();
  private readonly processing = new Set<K>();
  private readonly delayed = new Map<K, Delayed>();
  private readonly backoffs = new Map<K, Backoff>();
  private readonly stopper = new AbortController();
  private readonly drained: (() => void)[] = [];
  private readonly workers: number;
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  private readonly clock: () => number;

  constructor(private readonly options: WorkQueueOptions<K>) {
    this.workers = Math.max(1, options.workers ?? 1);
    this.sleep = options.sleep ?? realSleep;
    this.clock = options.clock ?? Date.now;
    options.signal?.addEventListener(
      'abort',
      () => {
        void this.shutDown();
      },
      { once: true },
    );
    if (options.signal?.aborted === true) void this.shutDown();
  }

  /** Queues `key` unless it is queued already; a key being processed runs once more after. */
  add(key: K): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    this.ready.push(key);
    this.pump();
  }

  /** Queues `key` once `ms` have passed; a key already delayed keeps the earlier of the two times. */
  addAfter(key: K, ms: number): void {
    if (this.shuttingDown) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const readyAt = this.clock() + ms;
    const previous = this.delayed.get(key);
    if (previous !== undefined && previous.readyAt <= readyAt) return;
    previous?.cancel.abort();
    const entry: Delayed = { readyAt, cancel: new AbortController() };
    this.delayed.set(key, entry);
    this.sleep(ms, entry.cancel.signal).then(
      () => {
        if (this.delayed.get(key) !== entry) return;
        this.delayed.delete(key);
        this.add(key);
      },
      // Cancelled: removed, delayed again for sooner, or shut down.
      () => undefined,
    );
  }

  /** Queues `key` after its next backoff pause: each retry waits longer until `forget`. */
  addRateLimited(key: K): void {
    let backoff = this.backoffs.get(key);
    if (backoff === undefined) this.backoffs.set(key, (backoff = new Backoff(this.options.backoff ?? DEFAULT_BACKOFF)));
    this.addAfter(key, backoff.next());
  }

  /** The key succeeded (or was given up): its next retry starts from the first pause. */
  forget(key: K): void {
    this.backoffs.delete(key);
  }

  /** Rate-limited retries of `key` since it was last forgotten. */
  retries(key: K): number {
    return this.backoffs.get(key)?.steps ?? 0;
  }

  /** `key` no longer waits: out of the queue, its delay cancelled; a run in progress finishes. */
  remove(key: K): void {
    this.delayed.get(key)?.cancel.abort();
    this.delayed.delete(key);
    if (!this.dirty.delete(key) || this.processing.has(key)) return;
    const at = this.ready.indexOf(key);
    if (at >= 0) this.ready.splice(at, 1);
  }

  /** Keys ready and waiting for a worker. */
  get length(): number {
    return this.ready.length;
  }

  get shuttingDown(): boolean {
    return this.stopper.signal.aborted;
  }

  /**
   * Stops the queue: adds are ignored, waiting and delayed keys dropped (their timers cleared), runs in
   * progress see their signal abort. Resolves once those runs have ended.
   */
  shutDown(): Promise<void> {
    if (!this.shuttingDown) {
      this.stopper.abort(new Error('work queue shut down'));
      for (const entry of this.delayed.values()) entry.cancel.abort();
      this.delayed.clear();
      this.ready.length = 0;
      this.dirty.clear();
    }
    if (this.processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.drained.push(resolve));
  }

  /** Hands ready keys to free workers; a run starts in this turn. */
  private pump(): void {
    while (this.processing.size < this.workers && !this.shuttingDown) {
      const key = this.ready.shift();
      if (key === undefined) return;
      this.dirty.delete(key);
      this.processing.add(key);
      void this.run(key);
    }
  }

  private async run(key: K): Promise<void> {
    try {
      await this.options.process(key, this.stopper.signal);
    } catch (error) {
      this.options.onError?.(key, error);
    } finally {
      this.processing.delete(key);
      if (this.dirty.has(key)) this.ready.push(key);
      if (this.processing.size === 0 && this.shuttingDown) for (const resolve of this.drained.splice(0)) resolve();
      this.pump();
    }
  }
}
