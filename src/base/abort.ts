import { setTimeout as delay } from 'node:timers/promises';
import { WardenError } from './errors.js';

/** Deadlines and cancellation over AbortSignal, for code that waits on promises it did not start. */

/** The signal's reason as an Error (an abort with a non-Error reason becomes a WardenError with it as cause). */
export function abortReason(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new WardenError('aborted', { cause: reason });
}

/**
 * Settles like `promise`, or rejects with the abort reason as soon as `signal` aborts, so a callee
 * that ignores its signal cannot hold the caller up. The losing promise may still reject later; that
 * never surfaces as an unhandled rejection.
 */
export function until<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(abortReason(signal));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => {
      reject(abortReason(signal));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error instanceof Error ? error : new WardenError('rejected', { cause: error }));
      },
    );
  });
}

/** Resolves once `signal` aborts (at once if it has). */
export function untilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    signal.addEventListener(
      'abort',
      () => {
        resolve();
      },
      { once: true },
    );
  });
}

/** A signal that aborts with `error()` after `ms` (an unref'd timer); `clear` stops the timer. */
export function timeoutSignal(ms: number, error: () => Error): { signal: AbortSignal; clear: () => void } {
  const controller = new AbortController();
  const timer = setTimeout(
    () => {
      controller.abort(error());
    },
    Math.max(0, ms),
  );
  timer.unref();
  return {
    signal: controller.signal,
    clear: () => {
      clearTimeout(timer);
    },
  };
}

/**
 * The one pause of the code base: `ms`, keeping the process alive as setTimeout does; with a
 * `signal`, it rejects (an AbortError whose cause is the signal's reason) as soon as the signal aborts.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal === undefined) return new Promise<void>((resolve) => setTimeout(resolve, ms));
  return delay(ms, undefined, { signal });
}
