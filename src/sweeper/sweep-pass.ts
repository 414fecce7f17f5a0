import { describeError } from '../base/errors.js';
import type { LockClassification } from '../lock/lock-rules.js';
import type { ConditionalReleaseResult, ReleasePath, SweepObserver } from '../lock/lock-events.js';

export interface SweepTargets {
  /** Nodes that carry a lock right now (from the informer cache: no API call). */
  lockedNodes(): string[];
}

export interface ConditionalReleaser {
  releaseIfReleasable(
    node: string,
    path: ReleasePath,
    options?: { signal?: AbortSignal },
  ): Promise<ConditionalReleaseResult>;
}

export interface SweepReport {
  released: { node: string; value: string | undefined; classification: LockClassification | undefined }[];
  stalled: { node: string; value: string | undefined; ageMs: number }[];
  kept: number;
  errors: { node: string; error: string }[];
  /** True when the pass stopped early because this replica lost leadership. */
  abandoned: boolean;
}

export interface SweepDeps {
  targets: SweepTargets;
  locks: ConditionalReleaser;
  /** Nodes handled at once: 1000 locked nodes then take a few seconds, not minutes. */
  concurrency: number;
  /**
   * The leader's term: once it aborts (the Lease lost) the pass takes no further node and the
   * releases in flight are aborted, so a replica that lost the lease stops at once.
   */
  signal?: AbortSignal;
  /** LockTelemetry, so a stalled lock's warnings end with one line when it is gone. */
  observer?: SweepObserver;
}

/**
 * One sweep: classify every locked node with the lock rules and release what is releasable through
 * NodeLocks (RV-guarded, so a lock that changed meanwhile is re-read, never blindly deleted).
 * Stalled locks are reported, never released here unless NODELOCK_FORCE_AFTER makes them releasable.
 */
export async function sweepOnce(deps: SweepDeps): Promise<SweepReport> {
  const report: SweepReport = { released: [], stalled: [], kept: 0, errors: [], abandoned: false };
  const queue = [...deps.targets.lockedNodes()];
  // A function, not a field read: the term may end during any await below.
  const termEnded = (): boolean => deps.signal?.aborted === true;
  const worker = async (): Promise<void> => {
    for (let node = queue.shift(); node !== undefined; node = queue.shift()) {
      if (termEnded()) {
        report.abandoned = true;
        return;
      }
      try {
        const result = await deps.locks.releaseIfReleasable(
          node,
          'sweeper',
          deps.signal ? { signal: deps.signal } : {},
        );
        if (result.outcome === 'released')
          report.released.push({ node, value: result.value, classification: result.classification });
        else if (result.outcome === 'kept' && result.classification?.state === 'stalled') {
          report.stalled.push({ node, value: result.value, ageMs: result.classification.ageMs });
        } else report.kept++;
      } catch (error) {
        // Aborted by the end of the term: the next leader's pass sees this node, not an error.
        if (termEnded()) report.abandoned = true;
        else report.errors.push({ node, error: describeError(error) });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, deps.concurrency) }, worker));
  if (!report.abandoned) notify(deps.observer, report);
  return report;
}

function notify(observer: SweepObserver | undefined, report: SweepReport): void {
  try {
    observer?.sweepCompleted({ stalled: report.stalled, unchecked: new Set(report.errors.map((error) => error.node)) });
  } catch {
    // Telemetry; the pass itself succeeded and its report says what it did.
  }
}
