import { isTransientApiError } from './errors.js';

/**
 * Runs `attempt` until it succeeds, fails definitely (isTransientApiError false) or `deadlineMs`
 * passes; pauses 0.5 s doubling to 8 s between tries. A replica restarted while the apiserver is
 * briefly unreachable then starts instead of exiting (found by the chaos suite: both replicas died
 * at start on one reset connection each).
 */
export async function untilNotTransient<T>(
  attempt: () => Promise<T>,
  options: { deadlineMs: number; onRetry: (error: unknown, pauseMs: number) => void; sleep?: (ms: number) => Promise<void>; now?: () => number },
): Promise<T> {
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const giveUpAt = now() + options.deadlineMs;
  for (let pauseMs = 500; ; pauseMs = Math.min(pauseMs * 2, 8_000)) {
    try {
      return await attempt();
    } catch (error) {
      if (!isTransientApiError(error) || now() + pauseMs > giveUpAt) throw error;
      options.onRetry(error, pauseMs);
      await sleep(pauseMs);
    }
  }
}
