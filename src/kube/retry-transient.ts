import { isTransientApiError } from './errors.js';
import { abortReason, sleep as realSleep, until } from '../base/abort.js';
import { Backoff } from '../base/backoff.js';
import { type Clock, systemClock } from '../base/clock.js';

export interface UntilNotTransientOptions {
  deadlineMs: number;
  onRetry: (error: unknown, pauseMs: number) => void;
  /** Aborting it ends the retries at once (a stop asked during start-up): rejects with the signal's reason. */
  signal?: AbortSignal;
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  now?: Clock;
}

const isAborted = (signal: AbortSignal): boolean => signal.aborted;

/**
 * Runs `attempt` until it succeeds, fails definitely (isTransientApiError false) or `deadlineMs`
 * passes; pauses 0.5 s doubling to 8 s between tries. A replica restarted while the apiserver is
 * briefly unreachable then starts instead of exiting (found by the chaos suite: both replicas died
 * at start on one reset connection each). A stop asked meanwhile (`signal`) ends it at once, even
 * in the middle of an attempt, so SIGTERM during start-up is not held up by the apiserver.
 */
export async function untilNotTransient<T>(attempt: () => Promise<T>, options: UntilNotTransientOptions): Promise<T> {
  const now = options.now ?? systemClock;
  const sleep = options.sleep ?? realSleep;
  const signal = options.signal ?? new AbortController().signal;
  const giveUpAt = now() + options.deadlineMs;
  const backoff = new Backoff({ initialMs: 500, factor: 2, capMs: 8_000 });
  for (;;) {
    try {
      return await until(attempt(), signal);
    } catch (error) {
      const pauseMs = backoff.next();
      if (signal.aborted || !isTransientApiError(error) || now() + pauseMs > giveUpAt) throw error;
      options.onRetry(error, pauseMs);
      // Cut short by a stop: the stop's own reason is thrown below.
      await sleep(pauseMs, signal).catch(() => undefined);
      // A call, so the check is not narrowed away by the one before the pause.
      if (isAborted(signal)) throw abortReason(signal);
    }
  }
}
