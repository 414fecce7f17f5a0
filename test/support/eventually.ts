import { inspect } from 'node:util';

/**
 * Waiting in tests for a state the system reaches on its own. A check answers either the value it
 * waited for or `notYet(what it saw)`; when the wait gives up, the error names what it waited for,
 * what it saw last and the last error a check threw, so a timeout on a loaded CI machine says
 * which step never happened instead of only how long the test waited.
 */

/** What a check saw while the condition did not hold yet. */
export class NotYet {
  constructor(readonly seen: string) {}
}

export function notYet(seen: string): NotYet {
  return new NotYet(seen);
}

/** Re-runs the check at once when something the check depends on changed; returns an unsubscribe. */
export type Wake = (recheck: () => void) => () => void;

/** The timeout error: the last observation (and the check's last error, as `cause`). */
export class EventuallyTimeoutError extends Error {
  constructor(
    readonly what: string,
    readonly timeoutMs: number,
    readonly lastSeen: string | undefined,
    readonly checks: number,
    cause: unknown,
  ) {
    const seen = lastSeen === undefined ? 'no check answered' : clipSeen(lastSeen);
    const error = cause === undefined ? '' : `; last error: ${clipSeen(describeCause(cause))}`;
    super(
      `timed out after ${timeoutMs} ms waiting for ${what} (${checks} checks); last seen: ${seen}${error}`,
      cause === undefined ? undefined : { cause },
    );
    this.name = 'EventuallyTimeoutError';
  }
}

const SEEN_CHARS = 2_000;

function describeCause(cause: unknown): string {
  if (cause instanceof Error) return cause.message;
  return typeof cause === 'string' ? cause : inspect(cause, { depth: 2, breakLength: Infinity });
}

/** Any value but undefined, which a check may not answer: it has to say what it saw instead. */
type Defined = object | string | number | bigint | boolean | symbol | null;

function clipSeen(text: string): string {
  return text.length <= SEEN_CHARS ? text : `${text.slice(0, SEEN_CHARS)}… (${text.length - SEEN_CHARS} more chars)`;
}

/**
 * Runs `check` until it answers something other than `notYet(...)`, every `intervalMs` and, with
 * `wake`, also as soon as the wake source fires (event-driven, with polling only as the fallback).
 * The value type excludes undefined so that every check has to say what it saw.
 */
export async function eventually<T extends Defined>(
  what: string,
  check: () => Promise<T | NotYet>,
  timeoutMs = 30_000,
  intervalMs = 100,
  wake?: Wake,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastSeen: string | undefined;
  let lastError: unknown;
  let checks = 0;
  // An object, not a local: the wake callback sets it while a check runs.
  const woke: { pending: boolean; resume: (() => void) | undefined } = { pending: false, resume: undefined };
  const wokenMeanwhile = (): boolean => woke.pending;
  const unsubscribe = wake?.(() => {
    woke.pending = true;
    woke.resume?.();
  });
  try {
    for (;;) {
      woke.pending = false;
      checks++;
      try {
        const value = await check();
        if (!(value instanceof NotYet)) return value;
        lastSeen = value.seen;
        lastError = undefined;
      } catch (error) {
        lastError = error;
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new EventuallyTimeoutError(what, timeoutMs, lastSeen, checks, lastError);
      if (wokenMeanwhile()) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(intervalMs, left));
        woke.resume = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      woke.resume = undefined;
    }
  } finally {
    unsubscribe?.();
  }
}

/** A wake source from an emitter event, e.g. `wakeOn(child.stdout, 'data')` for a log line. */
export function wakeOn(emitter: NodeJS.EventEmitter, event: string): Wake {
  return (recheck) => {
    emitter.on(event, recheck);
    return () => {
      emitter.off(event, recheck);
    };
  };
}

/**
 * `eventually` for a condition on in-memory state (a fake's counter, a flag a component sets):
 * checked every `intervalMs`, so the fakes' timers and promises run in between. The condition
 * cannot say what it saw, so a timeout names only what it waited for.
 */
export async function until(what: string, condition: () => boolean, timeoutMs = 3_000, intervalMs = 5): Promise<void> {
  await eventually(
    what,
    () => Promise.resolve(condition() ? true : notYet('the condition was false')),
    timeoutMs,
    intervalMs,
  );
}
