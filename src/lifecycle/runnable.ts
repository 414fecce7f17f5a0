import { untilAborted } from '../base/abort.js';
import { WardenError } from '../base/errors.js';

/**
 * A background part of the process, after controller-runtime's manager Runnable: `start` runs it
 * until `signal` aborts, and the promise it returns (if any) settles once it has stopped. A part
 * with `needsLeader` runs only while this replica holds the Lease (controller-runtime's
 * LeaderElectionRunnable.NeedLeaderElection): it is started once per term, and that term's signal
 * aborts when leadership is lost.
 */
export interface Runnable {
  name: string;
  start(signal: AbortSignal): Promise<void> | void;
  needsLeader?: boolean;
}

/** Leadership as terms: each election hands out a signal that aborts when that term ends. */
export interface Leadership {
  /**
   * Calls `elected` with the term's signal each time this replica becomes the leader (at once when
   * it leads already); returns how to stop listening.
   */
  onElected(elected: (term: AbortSignal) => void): () => void;
}

/** A part with its own start() and stop() as a runnable: started at once, stopped when the signal aborts. */
export function runnableOf(name: string, part: { start(): void; stop(): unknown }): Runnable {
  return {
    name,
    start: async (signal) => {
      part.start();
      await untilAborted(signal);
      await part.stop();
    },
  };
}

/** A part that only has to be stopped (it started when it was built) as a runnable. */
export function stoppedOnAbort(name: string, stop: () => unknown): Runnable {
  return {
    name,
    start: async (signal) => {
      await untilAborted(signal);
      await stop();
    },
  };
}

/** Where a runnable that stopped on its own, or failed, is reported. */
export type RunFailure = (part: string, problem: string) => void;

function problemOf(error: unknown): string {
  return error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error);
}

/**
 * Starts `runnable` with `signal` now; the promise settles once it has stopped and never rejects: a
 * failure (a synchronous throw included) is told to `onFailure`, unless it is the abort itself.
 */
export function runOnce(runnable: Runnable, signal: AbortSignal, onFailure?: RunFailure): Promise<void> {
  let running: Promise<void>;
  try {
    running = Promise.resolve(runnable.start(signal));
  } catch (error) {
    running = Promise.reject(error instanceof Error ? error : new WardenError(String(error)));
  }
  return running.catch((error: unknown) => {
    if (!signal.aborted) onFailure?.(runnable.name, problemOf(error));
  });
}

/**
 * Runs a leader-needing runnable once per term of `leadership` until `signal` aborts: each run's
 * signal aborts when its term ends or `signal` does. The promise settles once the run in progress
 * (if any) has stopped after `signal` aborted.
 */
export async function runWhileLeading(
  runnable: Runnable,
  leadership: Leadership,
  signal: AbortSignal,
  onFailure?: RunFailure,
): Promise<void> {
  let current: Promise<void> = Promise.resolve();
  const unsubscribe = leadership.onElected((term) => {
    if (signal.aborted) return;
    const previous = current;
    // A new term starts after the last one's run has stopped: two runs never overlap.
    current = previous.then(() => {
      if (term.aborted || signal.aborted) return undefined;
      return runOnce(runnable, AbortSignal.any([term, signal]), onFailure);
    });
  });
  await untilAborted(signal);
  unsubscribe();
  await current;
}
