import type { HostProcess } from './process-host.js';

/**
 * Waits for a HostProcess to exit, at most `timeoutMs`; false on timeout. the process runner
 * unrefs its child, so a bare `await child.exited` with nothing else pending lets Node exit mid-teardown
 * (it did: the run stopped at "unsettled top-level await" and left the node behind); the timer
 * here keeps the event loop alive until the exit is seen.
 */
export async function waitForExit(child: HostProcess, timeoutMs: number): Promise<boolean> {
  if (child.hasExited) return true;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => {
    timer = setTimeout(() => {
      resolve(false);
    }, timeoutMs);
  });
  try {
    return await Promise.race([child.exited.then(() => true), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
