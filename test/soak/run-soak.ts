// The soak runner: the steps of `npm test`, N times, with a table of what failed how often.
//   npm run test:soak -- --runs N [--load] [--steps a,b] [--fail-fast] [--log-dir DIR]
// Unlike `npm test`, a failing step does not skip the later steps of its run, so one failure does
// not hide another step's flake. Each step's full output stays in the log directory.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ChaosBeside } from './chaos-beside.js';
import { ProcessGroup, readLogTail } from './process-group.js';
import { parseSoakArgs, USAGE, type SoakOptions } from './soak-args.js';
import { SoakUsageError, SuiteShapeError } from './soak-errors.js';
import { chaosLine, progressLine, renderSummary } from './soak-report.js';
import { SoakTally } from './soak-tally.js';
import { classifyStep } from './step-outcome.js';
import { selectSteps, splitTestScript } from './suite-steps.js';

const repoRoot = resolve(import.meta.dirname, '..', '..');
const SIGNAL_EXIT: Record<'SIGINT' | 'SIGTERM', number> = { SIGINT: 130, SIGTERM: 143 };
// One Ctrl-C can arrive twice (from the terminal, and relayed by npm/tsx in the same chain); only
// a signal this long after the first means "stop waiting for the clean-up".
const DUPLICATE_SIGNAL_MS = 2_000;

const say = (line: string) => {
  process.stdout.write(`${line}\n`);
};

function usageFailure(error: unknown): never {
  if (!(error instanceof SoakUsageError)) throw error;
  process.stderr.write(`soak: ${error.message}\n`);
  process.exit(2);
}

function readSteps(options: SoakOptions): string[] {
  const path = join(repoRoot, 'package.json');
  let packageJson: { scripts?: unknown };
  try {
    packageJson = JSON.parse(readFileSync(path, 'utf8')) as { scripts?: unknown };
  } catch (error) {
    throw new SuiteShapeError(`cannot read ${path}: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  return selectSteps(splitTestScript(packageJson.scripts), options.steps);
}

let options: SoakOptions;
let steps: string[];
try {
  options = parseSoakArgs(process.argv.slice(2));
  if (options.help) {
    say(USAGE);
    process.exit(0);
  }
  steps = readSteps(options);
} catch (error) {
  usageFailure(error);
}

let logDir: string;
if (options.logDir === undefined) {
  logDir = mkdtempSync(join(tmpdir(), 'vgpu-warden-soak-'));
} else {
  logDir = resolve(options.logDir);
  mkdirSync(logDir, { recursive: true });
}

const tally = new SoakTally();
const runWidth = String(options.runs).length;
let currentStep: ProcessGroup | undefined;
let interrupted: 'SIGINT' | 'SIGTERM' | undefined;
let firstSignalAt = 0;

const chaos = options.load
  ? new ChaosBeside({
      command: (seed) => ({
        file: 'npm',
        args: ['run', 'chaos', '--', '--seed', String(seed), '--minutes', String(options.chaosMinutes)],
      }),
      firstSeed: options.chaosSeed,
      cwd: repoRoot,
      logDir,
      onRunEnd: (result) => {
        tally.recordChaos(result);
        say(chaosLine(result));
      },
    })
  : undefined;

function onSignal(signal: 'SIGINT' | 'SIGTERM'): void {
  const now = Date.now();
  if (interrupted === undefined) {
    interrupted = signal;
    firstSignalAt = now;
    say(
      `soak: ${signal}; stopping the running step${chaos === undefined ? '' : ' and chaos'} (SIGTERM, SIGKILL after 20 s)`,
    );
    // The main loop sees `interrupted` once the step has stopped, stops chaos and prints the summary.
    void currentStep?.stop();
    return;
  }
  if (now - firstSignalAt < DUPLICATE_SIGNAL_MS) return;
  say(`soak: ${signal} again; killing the running groups without waiting`);
  currentStep?.signalNow('SIGKILL');
  chaos?.signalNow('SIGKILL');
  process.exit(SIGNAL_EXIT[interrupted]);
}
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
// If the soak itself crashes, its detached children would otherwise outlive it unnoticed; SIGTERM
// lets chaos clean up its cluster.
process.on('exit', () => {
  currentStep?.signalNow('SIGTERM');
  chaos?.signalNow('SIGTERM');
});

const started = Date.now();
say(
  `soak: ${options.runs} run(s) of ${steps.join(', ')}${chaos === undefined ? '' : `, with chaos beside from seed ${options.chaosSeed} (${options.chaosMinutes} min each)`}`,
);
say(`soak: logs in ${logDir}`);
chaos?.start();

let runsDone = 0;
let endedEarly: string | undefined;
runs: for (let run = 1; run <= options.runs; run++) {
  runsDone = run;
  for (const step of steps) {
    const logPath = join(logDir, `run-${String(run).padStart(runWidth, '0')}-${step.replaceAll(':', '-')}.log`);
    currentStep = new ProcessGroup('npm', ['run', step], { cwd: repoRoot, logPath });
    const exit = await currentStep.finished;
    currentStep = undefined;
    if (interrupted !== undefined) {
      // A step the soak stopped says nothing about the suite; it is not recorded.
      say(
        `run ${run}/${options.runs} ${step}: stopped by ${interrupted} after ${Math.round(exit.durationMs / 1000)} s`,
      );
      endedEarly = `interrupted by ${interrupted}`;
      break runs;
    }
    const result = { run, step, durationMs: exit.durationMs, outcome: classifyStep(exit, readLogTail(logPath)) };
    tally.recordStep(result);
    say(`${progressLine(result, options.runs)}${exit.strays ? ' (left processes running; stopped them)' : ''}`);
  }
  // A chaos failure counts too: it may be what the suite's flakes come from.
  if (options.failFast && run < options.runs && tally.failureCount() > 0) {
    endedEarly = 'a run had a failure (--fail-fast)';
    break;
  }
}

const chaosResults = chaos === undefined ? undefined : await chaos.stop();
const summary = renderSummary({
  rows: tally.failureRows(),
  durations: tally.durations(steps),
  chaos: chaosResults,
  failureCount: tally.failureCount(),
  runsDone,
  runsPlanned: options.runs,
  wallMs: Date.now() - started,
  logDir,
  endedEarly,
});
say(summary);
writeFileSync(join(logDir, 'summary.txt'), `${summary}\n`);
if (interrupted !== undefined) process.exit(SIGNAL_EXIT[interrupted]);
process.exit(tally.failureCount() === 0 ? 0 : 1);
