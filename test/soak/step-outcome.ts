// What one step of one run (or one chaos run beside the suite) came to, decided from its exit and
// its output. Pure, so the rules are unit-tested.
import { parseSpecFailures, type SpecFailure } from './spec-failures.js';
import { lastMeaningfulLines } from './step-output.js';

export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export type StepOutcome =
  | { kind: 'passed' }
  /** Mocha listed failing tests. `failing` is mocha's count; fewer entries when its list was cut. */
  | { kind: 'tests'; failing: number; failures: SpecFailure[] }
  /** The step failed as a whole (lint, tsc, a build, a crash, chaos violations): its last lines. */
  | { kind: 'step'; exit: string; lastLines: string[] };

export function describeExit(exit: ChildExit): string {
  return exit.signal === null ? `exit ${exit.code ?? '?'}` : `signal ${exit.signal}`;
}

export function classifyStep(exit: ChildExit, output: string): StepOutcome {
  if (exit.code === 0 && exit.signal === null) return { kind: 'passed' };
  // Mocha's exit code is its failure count, so any non-zero exit with a failure list is those tests.
  const list = parseSpecFailures(output);
  if (list !== undefined && list.failures.length > 0)
    return { kind: 'tests', failing: Math.max(list.failing, list.failures.length), failures: list.failures };
  return { kind: 'step', exit: describeExit(exit), lastLines: lastMeaningfulLines(output, 5) };
}

export interface StepResult {
  run: number;
  step: string;
  durationMs: number;
  outcome: StepOutcome;
}

export interface ChaosResult {
  seed: number;
  durationMs: number;
  exit: ChildExit;
  /** The soak ended it (SIGTERM at the end of the soak): not a failure whatever its exit. */
  stoppedBySoak: boolean;
  lastLines: string[];
  logPath: string;
}

export function chaosFailed(result: ChaosResult): boolean {
  return !result.stoppedBySoak && (result.exit.code !== 0 || result.exit.signal !== null);
}
