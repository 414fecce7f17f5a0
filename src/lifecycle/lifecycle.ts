import { WardenError } from '../base/errors.js';
import { runWhileLeading, type Leadership, type Runnable } from './runnable.js';

/**
 * How long stopping may take, from the signal to the last listener closed: under the Deployment's
 * terminationGracePeriodSeconds (30 s, manifests/deployment.yaml) with 5 s to spare, so the kubelet
 * never has to SIGKILL a replica that is still releasing its Lease. A bind still running when the
 * bound passes has its connection cut; kube-scheduler retries it on another replica.
 */
export const GRACEFUL_SHUTDOWN_MS = 25_000;

/** Start-up failed; the message is the one line the operator sees (what failed, the setting, the cause). */
export class StartupError extends WardenError {}

/** A stop was asked (SIGTERM, SIGINT) while starting; everything started so far has been stopped. */
export class StartAborted extends WardenError {}

export interface StopReport {
  /** The bound passed before every part had stopped. */
  timedOut: boolean;
  /** Parts that had not finished stopping by the bound, or whose stop threw (with why). */
  unfinished: string[];
}

/** Stops one part; `remainingMs` is what is left of the bound (a listener uses it to cut open connections in time). */
type StopFn = (remainingMs: number) => unknown;

export interface LifecycleDeps {
  /** Aborted when the process is asked to stop; a start step then ends with StartAborted. */
  signal?: AbortSignal;
  /** Total time stopAll may take. */
  boundMs?: number;
  clock?: () => number;
  /** Told about a part that failed or outlived the bound while stopping. */
  onStopProblem?: (part: string, problem: string) => void;
  /** Told about a runnable that failed, or stopped before it was asked to. */
  onRunProblem?: (part: string, problem: string) => void;
  /**
   * Whose terms gate the runnables that need a leader; without it this process is alone and they
   * run from the start.
   */
  leadership?: Leadership;
}

function problemOf(error: unknown): string {
  return error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error);
}

/**
 * All-or-nothing start and bounded stop. Every part that starts registers how to stop it; a start
 * step that fails, or a stop asked during start, stops what already started (last started, first
 * stopped) before the error goes up. stopAll() never takes longer than the bound: a part still
 * stopping then is left to finish on its own, and the parts after it are still told to stop.
 */
export class Lifecycle {
  private readonly stops: { part: string; stop: StopFn; boundMs: number | undefined }[] = [];
  private readonly clock: () => number;
  private readonly boundMs: number;
  private stopping: Promise<StopReport> | undefined;

  constructor(private readonly deps: LifecycleDeps = {}) {
    this.clock = deps.clock ?? Date.now;
    this.boundMs = deps.boundMs ?? GRACEFUL_SHUTDOWN_MS;
  }

  /** Whether a stop has been asked (by the signal) or begun. */
  get stopRequested(): boolean {
    return this.stopping !== undefined || this.deps.signal?.aborted === true;
  }

  /**
   * Registers how to stop a part that has just started. With `boundMs` the part gets at most that
   * long (e.g. a Lease release against an apiserver that does not answer), and the parts after it
   * still get the rest of the total bound.
   */
  defer(part: string, stop: StopFn, options: { boundMs?: number } = {}): void {
    this.stops.push({ part, stop, boundMs: options.boundMs });
  }

  /** Throws StartAborted when a stop has been asked. */
  checkpoint(): void {
    if (this.stopRequested) throw new StartAborted('stop requested during start-up');
  }

  /**
   * Runs one start step and registers its stop. A stop asked while it runs ends the step at once
   * with StartAborted; if the step still succeeds later, what it started is stopped then.
   */
  async step<T>(
    part: string,
    start: (signal: AbortSignal) => Promise<T>,
    stop?: (value: T, remainingMs: number) => unknown,
  ): Promise<T> {
    this.checkpoint();
    const signal = this.deps.signal ?? new AbortController().signal;
    const running = start(signal);
    // Abandoned when a stop is asked first: its failure then has nobody to tell.
    running.catch(() => undefined);
    const value = await new Promise<T>((resolve, reject) => {
      const onAbort = (): void => {
        reject(new StartAborted(`stop requested while starting ${part}`));
        // Started after all: stop it, or it would outlive the process's intent to stop.
        if (stop)
          running
            .then(
              (late) => stop(late, this.boundMs),
              () => undefined,
            )
            .catch(() => undefined);
      };
      if (signal.aborted) {
        onAbort();
        return;
      }
      signal.addEventListener('abort', onAbort, { once: true });
      void running.then(resolve, reject).finally(() => {
        signal.removeEventListener('abort', onAbort);
      });
    });
    if (stop) this.defer(part, (remainingMs) => stop(value, remainingMs));
    return value;
  }

  /**
   * Starts a runnable and registers its stop (abort its signal, wait for it to have stopped). One
   * that needs a leader runs once per term of `leadership`, stopped when the term ends; with
   * `stopBoundMs` its stop gets at most that long (see defer). A start that throws at once fails
   * the start-up; a runnable that fails later is told to onRunProblem.
   */
  run(runnable: Runnable, options: { stopBoundMs?: number } = {}): void {
    this.checkpoint();
    const controller = new AbortController();
    const onFailure = (part: string, problem: string): void => {
      this.deps.onRunProblem?.(part, problem);
    };
    const stopped =
      runnable.needsLeader === true && this.deps.leadership !== undefined
        ? runWhileLeading(runnable, this.deps.leadership, controller.signal, onFailure)
        : this.watch(runnable, runnable.start(controller.signal), controller.signal);
    this.defer(
      runnable.name,
      () => {
        controller.abort(new WardenError(`${runnable.name} is stopping`));
        return stopped;
      },
      options.stopBoundMs === undefined ? {} : { boundMs: options.stopBoundMs },
    );
  }

  /**
   * What a runnable's stop waits for. An end before the stop was asked is told to onRunProblem at
   * once (and not again when stopping); a failure while stopping is the stop's own problem.
   */
  private watch(runnable: Runnable, running: Promise<void> | void, signal: AbortSignal): Promise<void> {
    // A start that returns nothing stops by itself when its signal aborts.
    if (running === undefined) return Promise.resolve();
    return running.then(
      () => {
        if (!signal.aborted) this.deps.onRunProblem?.(runnable.name, 'stopped before it was asked to');
      },
      (error: unknown) => {
        if (signal.aborted) throw error;
        this.deps.onRunProblem?.(runnable.name, problemOf(error));
      },
    );
  }

  /** Stops every registered part, last started first, within the bound. Idempotent. */
  stopAll(): Promise<StopReport> {
    this.stopping ??= this.runStops();
    return this.stopping;
  }

  private async runStops(): Promise<StopReport> {
    const deadline = this.clock() + this.boundMs;
    const unfinished: string[] = [];
    let timedOut = false;
    for (const { part, stop, boundMs } of this.stops.splice(0).reverse()) {
      const totalLeft = Math.max(0, deadline - this.clock());
      const remainingMs = Math.min(totalLeft, boundMs ?? totalLeft);
      let finished: Promise<unknown>;
      try {
        finished = Promise.resolve(stop(remainingMs));
      } catch (error) {
        finished = Promise.reject(error instanceof Error ? error : new WardenError(String(error)));
      }
      // Past the bound: each later part is still told to stop, but not waited for.
      if (timedOut) {
        finished.catch(() => undefined);
        unfinished.push(part);
        continue;
      }
      const outcome = await this.within(finished, remainingMs);
      if (outcome === 'timeout') {
        // Only the total bound running out stops the waiting; a part's own bound just skips that part.
        timedOut = remainingMs === totalLeft;
        unfinished.push(part);
        this.deps.onStopProblem?.(part, `still stopping after ${remainingMs} ms; left behind`);
      } else if (outcome !== 'ok') {
        unfinished.push(`${part} (${outcome.problem})`);
        this.deps.onStopProblem?.(part, outcome.problem);
      }
    }
    return { timedOut, unfinished };
  }

  private async within(finished: Promise<unknown>, ms: number): Promise<'ok' | 'timeout' | { problem: string }> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => {
        resolve('timeout');
      }, ms);
    });
    try {
      return await Promise.race([
        finished.then(
          () => 'ok' as const,
          (error: unknown) => ({ problem: problemOf(error) }),
        ),
        timeout,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }
}
