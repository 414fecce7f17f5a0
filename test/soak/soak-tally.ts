// Accumulates step and chaos results over the soak into the failure table's rows and the duration
// statistics. Pure: the runner feeds it results, the report renders what it returns.
import { chaosFailed, type ChaosResult, type StepResult } from './step-outcome.js';

export interface FailureRow {
  /** The step, or "chaos" for a chaos run beside the suite. */
  step: string;
  /** The failing test's title; undefined when the step itself failed. */
  test: string | undefined;
  failures: number;
  /** Runs of the step recorded so far (1 for a chaos row: each seed runs once). */
  runs: number;
  /** Why it failed the latest time: a test's first error line, or a step's last output lines. */
  latest: string[];
  /** Run number of the latest failure (for finding its log). */
  latestRun: number;
}

export interface StepDurations {
  step: string;
  runs: number;
  minMs: number;
  medianMs: number;
  maxMs: number;
}

export class SoakTally {
  private readonly steps: StepResult[] = [];
  private readonly chaos: ChaosResult[] = [];
  private readonly rows = new Map<string, FailureRow>();

  recordStep(result: StepResult): void {
    this.steps.push(result);
    const { outcome } = result;
    if (outcome.kind === 'tests') {
      for (const failure of outcome.failures)
        this.bump(result, failure.title, [
          failure.error === '' ? '(the output ended before the error)' : failure.error,
        ]);
      const unlisted = outcome.failing - outcome.failures.length;
      if (unlisted > 0)
        this.bump(result, undefined, [
          `mocha reported ${outcome.failing} failing but its list ended after ${outcome.failures.length}`,
        ]);
    } else if (outcome.kind === 'step') {
      this.bump(result, undefined, [outcome.exit, ...outcome.lastLines]);
    }
  }

  recordChaos(result: ChaosResult): void {
    this.chaos.push(result);
    if (!chaosFailed(result)) return;
    const test = `chaos beside (seed ${result.seed})`;
    const key = `chaos\u0000${test}\u0000${this.chaos.length}`;
    const exit = result.exit.signal === null ? `exit ${result.exit.code ?? '?'}` : `signal ${result.exit.signal}`;
    this.rows.set(key, {
      step: 'chaos',
      test,
      failures: 1,
      runs: 1,
      latest: [exit, ...result.lastLines],
      latestRun: 0,
    });
  }

  /** Every test or step that failed at least once: most failures first, then in order of first failure. */
  failureRows(): FailureRow[] {
    return [...this.rows.values()]
      .map((row) => (row.step === 'chaos' ? row : { ...row, runs: this.runsOf(row.step) }))
      .map((row, order) => ({ row, order }))
      .sort((a, b) => b.row.failures - a.row.failures || a.order - b.order)
      .map(({ row }) => row);
  }

  /** Total failures: each failing test, failing step and failing chaos run counted once per run. */
  failureCount(): number {
    let total = 0;
    for (const row of this.rows.values()) total += row.failures;
    return total;
  }

  chaosResults(): readonly ChaosResult[] {
    return this.chaos;
  }

  durations(order: readonly string[]): StepDurations[] {
    const stats: StepDurations[] = [];
    for (const step of order) {
      const times = this.steps
        .filter((result) => result.step === step)
        .map((result) => result.durationMs)
        .sort((a, b) => a - b);
      if (times.length === 0) continue;
      stats.push({ step, runs: times.length, minMs: times[0] ?? 0, medianMs: median(times), maxMs: times.at(-1) ?? 0 });
    }
    return stats;
  }

  private runsOf(step: string): number {
    return this.steps.filter((result) => result.step === step).length;
  }

  private bump(result: StepResult, test: string | undefined, latest: string[]): void {
    const key = `${result.step}\u0000${test ?? ''}`;
    const row = this.rows.get(key);
    if (row === undefined)
      this.rows.set(key, { step: result.step, test, failures: 1, runs: 0, latest, latestRun: result.run });
    // Two entries with one title in one run (mocha's multiple errors of one test, or two files
    // with the same titles) make one failing run of that test, shown with its first error.
    else if (row.latestRun !== result.run)
      this.rows.set(key, { ...row, failures: row.failures + 1, latest, latestRun: result.run });
  }
}

/** Median of numbers sorted ascending (mean of the middle two for an even count). */
export function median(sorted: readonly number[]): number {
  if (sorted.length === 0) return 0;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}
