// The soak's console output: progress lines while it runs and the summary at the end. Pure
// rendering; every piece of child output that reaches it is clipped so the summary stays bounded.
import { chaosFailed, describeExit, type ChaosResult, type StepResult } from './step-outcome.js';
import type { FailureRow, StepDurations } from './soak-tally.js';
import { clip } from './step-output.js';

/** Whole seconds, with one decimal under 10 s so short steps do not all read "0 s". */
export function formatSeconds(ms: number): string {
  const seconds = ms / 1000;
  return seconds < 10 ? `${seconds.toFixed(1)} s` : `${Math.round(seconds)} s`;
}

export function formatWallTime(ms: number): string {
  const total = Math.round(ms / 1000);
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = total % 60;
  if (hours > 0) return `${hours} h ${minutes} min ${seconds} s`;
  if (minutes > 0) return `${minutes} min ${seconds} s`;
  return `${seconds} s`;
}

export function progressLine(result: StepResult, runs: number): string {
  const prefix = `run ${result.run}/${runs} ${result.step}:`;
  const took = `in ${formatSeconds(result.durationMs)}`;
  const { outcome } = result;
  switch (outcome.kind) {
    case 'passed':
      return `${prefix} passed ${took}`;
    case 'tests': {
      const count = outcome.failing === 1 ? '1 test' : `${outcome.failing} tests`;
      return `${prefix} failed (${count}) ${took}`;
    }
    case 'step':
      return `${prefix} failed (${outcome.exit}) ${took}`;
  }
}

export function chaosLine(result: ChaosResult): string {
  const prefix = `chaos beside (seed ${result.seed}):`;
  const took = `after ${formatSeconds(result.durationMs)}`;
  if (result.stoppedBySoak) return `${prefix} stopped by the soak ${took} (${describeExit(result.exit)})`;
  if (!chaosFailed(result)) return `${prefix} passed ${took}`;
  const last = result.lastLines.at(-1);
  return `${prefix} failed (${describeExit(result.exit)}) ${took}${last === undefined ? '' : `: ${clip(last)}`}`;
}

export interface SummaryInput {
  rows: readonly FailureRow[];
  durations: readonly StepDurations[];
  chaos: readonly ChaosResult[] | undefined;
  failureCount: number;
  /** Runs that started (a run stopped part-way by a signal counts). */
  runsDone: number;
  runsPlanned: number;
  wallMs: number;
  logDir: string;
  /** Why the soak ended before its last run, if it did. */
  endedEarly: string | undefined;
}

// A step's row shows its exit and its last 5 lines; nothing longer reaches the summary.
const MAX_ROW_LINES = 6;

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

export function renderSummary(input: SummaryInput): string {
  const out: string[] = [''];
  if (input.rows.length > 0) {
    const fails = input.rows.map((row) => `${row.failures}/${row.runs}`);
    const names = input.rows.map((row) => clip(row.test ?? '(the step itself)'));
    const failsWidth = Math.max('failed'.length, ...fails.map((text) => text.length));
    const stepWidth = Math.max('step'.length, ...input.rows.map((row) => row.step.length));
    const indent = ' '.repeat(2 + failsWidth + 2 + stepWidth + 2 + 2);
    out.push(
      `failures (${input.rows.length} ${input.rows.length === 1 ? 'test or step' : 'tests or steps'} failed at least once):`,
    );
    out.push(`  ${'failed'.padEnd(failsWidth)}  ${'step'.padEnd(stepWidth)}  test`);
    for (const [index, row] of input.rows.entries()) {
      out.push(`  ${(fails[index] ?? '').padEnd(failsWidth)}  ${row.step.padEnd(stepWidth)}  ${names[index] ?? ''}`);
      for (const line of row.latest.slice(0, MAX_ROW_LINES)) out.push(`${indent}${clip(line)}`);
    }
    out.push('');
  }
  if (input.durations.length > 0) {
    const runs = input.durations.map((stats) => stats.runs);
    const sameRuns = runs.every((count) => count === runs[0]);
    const stepWidth = Math.max('step'.length, ...input.durations.map((stats) => stats.step.length));
    out.push(
      `step durations (min / median / max over ${sameRuns ? plural(runs[0] ?? 0, 'run') : 'the runs of each step'}):`,
    );
    for (const stats of input.durations) {
      const cells = [stats.minMs, stats.medianMs, stats.maxMs].map((ms) => formatSeconds(ms).padStart(8));
      out.push(`  ${stats.step.padEnd(stepWidth)}  ${cells.join('  ')}${sameRuns ? '' : `  (${stats.runs} runs)`}`);
    }
  }
  if (input.chaos !== undefined) {
    const failed = input.chaos.filter(chaosFailed).length;
    const stopped = input.chaos.filter((result) => result.stoppedBySoak).length;
    const seeds = input.chaos.map((result) => result.seed);
    const seedText =
      seeds.length === 0
        ? 'none'
        : seeds.length === 1
          ? `seed ${seeds[0] ?? ''}`
          : `seeds ${seeds[0] ?? ''}..${seeds.at(-1) ?? ''}`;
    out.push(
      `chaos beside: ${input.chaos.length} run(s) (${seedText}): ${input.chaos.length - failed - stopped} passed, ${failed} failed, ${stopped} stopped by the soak`,
    );
  }
  out.push(`total wall time: ${formatWallTime(input.wallMs)}; logs in ${input.logDir}`);
  if (input.endedEarly !== undefined)
    out.push(`ended early after run ${input.runsDone} of ${input.runsPlanned}: ${input.endedEarly}`);
  const runsText = plural(input.runsDone, 'run');
  out.push(
    input.failureCount === 0 && input.endedEarly === undefined
      ? `all green: ${runsText}`
      : `${plural(input.failureCount, 'failure')} in ${runsText}`,
  );
  return out.join('\n');
}
