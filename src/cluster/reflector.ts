import { describeError, WardenError } from '../base/errors.js';
import { apiCondition, failureText } from '../telemetry/api-failure.js';
import { ConditionLog, type ConditionReporter } from '../telemetry/condition-log.js';
import { sleep, until } from '../base/abort.js';
import { Backoff } from '../base/backoff.js';

export interface ListResult<T> {
  items: T[];
  resourceVersion: string;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface WatchHandlers<T> {
  onEvent(type: WatchEventType, object: T): void;
  onBookmark(resourceVersion: string): void;
}

export interface ListWatchSource<T> {
  list(signal: AbortSignal): Promise<ListResult<T>>;
  /** Streams events after `resourceVersion` (allowWatchBookmarks). `onBookmark(rv)` for BOOKMARK events.
   *  Resolves when the server ends the watch normally; rejects with the error otherwise. A 410 Gone
   *  (as an ERROR event with Status code 410, or an HTTP 410) must reject with `ResourceExpiredError`. */
  watch(resourceVersion: string, handlers: WatchHandlers<T>, signal: AbortSignal): Promise<void>;
}

/** The resourceVersion a watch started from is older than the apiserver keeps: only a relist helps. */
export class ResourceExpiredError extends WardenError {}

export interface ReflectorSink<T> {
  /** The whole collection after a successful LIST (initial or relist): replace semantics; the sink reconciles. */
  replace(items: T[], resourceVersion: string): void;
  apply(type: WatchEventType, object: T): void;
}

export interface ReflectorOptions {
  /** First pause after a failure (default 1000 ms). */
  initialBackoffMs?: number;
  /** Longest pause, jitter included (default 30000 ms). */
  maxBackoffMs?: number;
  /** Growth of the pause per consecutive failure (default 2). */
  backoffFactor?: number;
  /** A pause of d becomes d * (1 + jitter * random()), like client-go's wait.Jitter (default 1.0). */
  jitter?: number;
  /** A watch that lived this long resets the backoff to its initial value (default 60000 ms). */
  backoffResetAfterMs?: number;
  /** A watch that ends normally sooner than this without a single event counts as a failure (default 1000 ms). */
  shortWatchMs?: number;
  /**
   * A LIST that has not answered after this long is abandoned and retried (default 60000 ms, the
   * apiserver's own request timeout): a connection that went silent must not stall the store forever.
   */
  listTimeoutMs?: number;
}

export interface ReflectorDeps<T> {
  /** Names the collection in log messages, e.g. 'pods'. */
  what: string;
  source: ListWatchSource<T>;
  sink: ReflectorSink<T>;
  clock?: () => number;
  /** Waits `ms`; rejects (or resolves) early when `signal` aborts. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  random?: () => number;
  log?: (level: 'info' | 'warn', message: string) => void;
  /**
   * Where list and watch failures go: one warning per persistent condition, repeated with backoff,
   * and one line when it recovers (by default a ConditionLog of its own writing to `log`).
   */
  conditions?: ConditionReporter;
  options?: ReflectorOptions;
}

/** Calls an injected async function, turning a synchronous throw into a rejection. */
async function attempt<R>(call: () => Promise<R>): Promise<R> {
  return await call();
}

function resourceVersionOf(object: unknown): string | undefined {
  const rv = (object as { metadata?: { resourceVersion?: unknown } } | null | undefined)?.metadata?.resourceVersion;
  return typeof rv === 'string' && rv !== '' ? rv : undefined;
}

type WatchOutcome = 'ended' | 'expired' | 'failed';

/**
 * Keeps a sink in step with one Kubernetes collection the way client-go's reflector does: LIST, hand
 * the whole list to the sink, then WATCH from the list's resourceVersion, following event and
 * bookmark resourceVersions so a watch the server ends normally resumes without a relist. A 410
 * relists at once; any other failure backs off (exponential, jittered) and relists, since after an
 * error nothing guarantees the last resourceVersion is still served. Events are applied as they
 * arrive, so memory stays bounded by the sink, not by a queue here.
 */
export class Reflector<T> {
  private readonly source: ListWatchSource<T>;
  private readonly sink: ReflectorSink<T>;
  private readonly clock: () => number;
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  private readonly log: (level: 'info' | 'warn', message: string) => void;
  private readonly backoff: Backoff;
  private readonly backoffResetAfterMs: number;
  private readonly listTimeoutMs: number;
  private readonly shortWatchMs: number;
  private readonly abort = new AbortController();
  private loop: Promise<void> | undefined;
  private isSynced = false;
  private down: number | undefined;
  private seen: string | undefined;
  private lastFailure: string | undefined;
  private readonly conditions: ConditionReporter;
  /** One entry per pending waitForSync call; each removes itself when it settles. */
  private readonly syncWaiters = new Set<() => void>();

  constructor(private readonly deps: ReflectorDeps<T>) {
    const options = deps.options ?? {};
    this.source = deps.source;
    this.sink = deps.sink;
    this.clock = deps.clock ?? Date.now;
    this.sleep = deps.sleep ?? sleep;
    this.log = deps.log ?? (() => undefined);
    this.backoff = new Backoff(
      {
        initialMs: options.initialBackoffMs ?? 1000,
        capMs: options.maxBackoffMs ?? 30_000,
        factor: options.backoffFactor ?? 2,
        jitter: options.jitter ?? 1.0,
      },
      deps.random ?? Math.random,
    );
    this.backoffResetAfterMs = options.backoffResetAfterMs ?? 60_000;
    this.listTimeoutMs = options.listTimeoutMs ?? 60_000;
    this.shortWatchMs = options.shortWatchMs ?? 1000;
    this.conditions =
      deps.conditions ??
      new ConditionLog({
        clock: this.clock,
        emit: (level, message) => {
          this.log(level, message);
        },
      }).reporter(deps.what);
  }

  /** Why the last list or watch failed, on one line; undefined once a LIST has succeeded since. */
  get failure(): string | undefined {
    return this.lastFailure;
  }

  /** True once a LIST has succeeded and been delivered to the sink (stays true afterwards). */
  get synced(): boolean {
    return this.isSynced;
  }

  /**
   * undefined while the reflector has a live watch (or has just listed); otherwise the clock time
   * since when it has been down: the failure of the last good watch, the start time before the first
   * good LIST, or the stop time. Before start() it is undefined.
   */
  get downSince(): number | undefined {
    return this.down;
  }

  /**
   * The resourceVersion of the last LIST, event or bookmark delivered to the sink: the store reflects
   * every change of the collection up to it. undefined before the first LIST.
   */
  get seenThrough(): string | undefined {
    return this.seen;
  }

  /** Runs the list-watch loop in the background. Never throws; a second call does nothing. */
  start(): void {
    if (this.loop !== undefined || this.abort.signal.aborted) return;
    this.down = this.clock();
    this.loop = this.run(this.abort.signal).catch((error: unknown) => {
      // run() handles its own failures; reaching here is a bug, and it must not crash the process.
      this.log('warn', `${this.deps.what}: reflector loop ended unexpectedly: ${describeError(error)}`);
    });
  }

  /** Aborts the list, watch or pause in progress; resolves when the loop has ended. Not restartable. */
  async stop(): Promise<void> {
    if (!this.abort.signal.aborted) this.abort.abort(new WardenError(`${this.deps.what}: reflector stopped`));
    await this.loop;
    this.down ??= this.clock();
  }

  /** Resolves true once synced, false after `timeoutMs` (or once stopped without having synced). */
  async waitForSync(timeoutMs: number): Promise<boolean> {
    if (this.isSynced) return true;
    const timer = new AbortController();
    const wake = () => {
      timer.abort();
    };
    this.syncWaiters.add(wake);
    const onStop = () => {
      timer.abort();
    };
    this.abort.signal.addEventListener('abort', onStop, { once: true });
    try {
      if (!this.abort.signal.aborted)
        await until(
          attempt(() => this.sleep(timeoutMs, timer.signal)),
          timer.signal,
        );
    } catch {
      // The pause was cut short by a sync or a stop; `isSynced` tells which.
    } finally {
      this.syncWaiters.delete(wake);
      this.abort.signal.removeEventListener('abort', onStop);
    }
    return this.isSynced;
  }

  private async run(signal: AbortSignal): Promise<void> {
    // A call, so the compiler does not carry the loop condition's narrowing across the awaits.
    const stopped = (): boolean => signal.aborted;
    // undefined means the next step is a LIST.
    let resourceVersion: string | undefined;
    while (!stopped()) {
      if (resourceVersion === undefined) {
        resourceVersion = await this.list(signal);
        if (resourceVersion === undefined) {
          await this.pause(signal);
          continue;
        }
      }
      const watched = await this.watch(resourceVersion, signal);
      if (stopped()) return;
      if (watched.outcome === 'ended') {
        resourceVersion = watched.resourceVersion;
        continue;
      }
      resourceVersion = undefined;
      this.down ??= watched.endedAt;
      if (watched.outcome === 'failed') await this.pause(signal);
    }
  }

  /** One LIST delivered to the sink; returns its resourceVersion, or undefined when it failed. */
  private async list(signal: AbortSignal): Promise<string | undefined> {
    let listed: ListResult<T>;
    try {
      const bounded = AbortSignal.any([signal, AbortSignal.timeout(this.listTimeoutMs)]);
      listed = await until(
        attempt(() => this.source.list(bounded)),
        bounded,
      );
    } catch (error) {
      if (!signal.aborted) this.failed(apiCondition(`${this.deps.what} list`, error));
      return undefined;
    }
    // A sink that throws here still counts as delivered: listing the same data again would not help.
    this.deliver('replace', () => {
      this.sink.replace(listed.items, listed.resourceVersion);
    });
    this.seen = listed.resourceVersion;
    this.lastFailure = undefined;
    this.conditions.ok();
    const first = !this.isSynced;
    this.isSynced = true;
    this.down = undefined;
    for (const wake of this.syncWaiters) wake();
    if (first)
      this.log(
        'info',
        `${this.deps.what}: synced, ${listed.items.length} items at resourceVersion ${listed.resourceVersion}`,
      );
    return listed.resourceVersion;
  }

  /** One WATCH from `from`; reports how it ended and the last resourceVersion it saw. */
  private async watch(
    from: string,
    signal: AbortSignal,
  ): Promise<{ outcome: WatchOutcome; resourceVersion: string; endedAt: number }> {
    const startedAt = this.clock();
    let resourceVersion = from;
    let events = 0;
    // A source that ignored the abort may still call back after we moved on; those calls are dropped
    // so a stale watch can never write over a newer list.
    let live = true;
    const handlers: WatchHandlers<T> = {
      onEvent: (type, object) => {
        if (!live) return;
        events++;
        this.deliver(type, () => {
          this.sink.apply(type, object);
        });
        resourceVersion = resourceVersionOf(object) ?? resourceVersion;
        this.seen = resourceVersion;
      },
      onBookmark: (bookmarkVersion) => {
        if (!live) return;
        events++;
        if (bookmarkVersion !== '') resourceVersion = this.seen = bookmarkVersion;
      },
    };
    let outcome: WatchOutcome;
    try {
      await until(
        attempt(() => this.source.watch(from, handlers, signal)),
        signal,
      );
      outcome = 'ended';
    } catch (error) {
      if (signal.aborted) outcome = 'failed';
      else if (error instanceof ResourceExpiredError) {
        this.log(
          'info',
          `${this.deps.what}: resourceVersion ${resourceVersion} expired, relisting: ${failureText(error)}`,
        );
        outcome = 'expired';
      } else {
        this.failed(apiCondition(`${this.deps.what} watch`, error));
        outcome = 'failed';
      }
    } finally {
      live = false;
    }
    const endedAt = this.clock();
    const lived = endedAt - startedAt;
    if (lived >= this.backoffResetAfterMs) this.backoff.reset();
    if (outcome === 'ended' && events === 0 && lived < this.shortWatchMs) {
      // A server that closes every watch at once would otherwise be hammered in a tight loop.
      if (!signal.aborted)
        this.failed({
          condition: `${this.deps.what} watch closing at once`,
          message: `${this.deps.what}: watch closed after ${lived} ms without events, relisting after a pause`,
        });
      outcome = 'failed';
    }
    return { outcome, resourceVersion, endedAt };
  }

  private failed(report: { condition: string; message: string }): void {
    this.lastFailure = report.message;
    this.conditions.fail(report.condition, report.message);
  }

  private async pause(signal: AbortSignal): Promise<void> {
    try {
      await until(
        attempt(() => this.sleep(this.backoff.next(), signal)),
        signal,
      );
    } catch {
      // Only a stop cuts a pause short, and the loop checks for that.
    }
  }

  /** A failing sink must not end the loop: the next event or relist may well succeed. */
  private deliver(what: string, call: () => void): void {
    try {
      call();
    } catch (error) {
      this.log('warn', `${this.deps.what}: sink failed on ${what}: ${describeError(error)}`);
    }
  }
}
