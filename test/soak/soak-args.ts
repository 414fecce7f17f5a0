// Command-line parsing for the soak runner, kept pure so it is unit-tested without spawning.
import { parseArgs } from 'node:util';
import { SoakUsageError } from './soak-errors.js';

export interface SoakOptions {
  runs: number;
  /** Run chaos beside the suite for the whole soak. */
  load: boolean;
  /** The subset of the "test" script's steps to run; undefined runs them all. */
  steps: string[] | undefined;
  /** Finish all runs even after one had a failure (by default the soak stops after that run). */
  failFast: boolean;
  logDir: string | undefined;
  chaosSeed: number;
  chaosMinutes: number;
  help: boolean;
}

export const DEFAULT_CHAOS_SEED = 1;
// Long enough that a chaos run reaches steady state and its faults overlap several suite steps,
// short enough that a soak of a few runs sees more than one seed.
export const DEFAULT_CHAOS_MINUTES = 15;

export const USAGE = `usage: npm run test:soak -- --runs N [--load] [--steps a,b] [--fail-fast] [--log-dir DIR]
                              [--chaos-seed S] [--chaos-minutes M]
  Runs the steps of package.json's "test" script N times (a failing step does not skip the later
  ones) and prints every test or step that failed at least once.
  --runs N           how many times to run the suite (required)
  --load             run \`npm run chaos\` beside the suite for the whole soak, seed S, S+1, ...
  --steps a,b        only these steps of the "test" script
  --fail-fast        stop after the first run with a failure (default: all N runs, so a table counts every run)
  --log-dir DIR      keep the logs here (default: a fresh directory under the system temp dir)
  --chaos-seed S     first chaos seed with --load (default ${DEFAULT_CHAOS_SEED})
  --chaos-minutes M  minutes of each chaos run with --load (default ${DEFAULT_CHAOS_MINUTES})`;

function positiveInteger(flag: string, text: string): number {
  if (!/^\d+$/.test(text) || Number(text) < 1)
    throw new SoakUsageError(`${flag} must be a positive integer, got "${text}"`);
  return Number(text);
}

export function parseSoakArgs(argv: readonly string[]): SoakOptions {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        runs: { type: 'string' },
        load: { type: 'boolean', default: false },
        steps: { type: 'string' },
        'fail-fast': { type: 'boolean', default: false },
        'log-dir': { type: 'string' },
        'chaos-seed': { type: 'string' },
        'chaos-minutes': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }));
  } catch (error) {
    // node:util reports unknown flags and missing values as a TypeError with a readable message.
    throw new SoakUsageError(error instanceof Error ? error.message : String(error), { cause: error });
  }
  const base = {
    load: values.load,
    failFast: values['fail-fast'],
    logDir: values['log-dir'],
    help: values.help,
  };
  if (values.help)
    return { ...base, runs: 1, steps: undefined, chaosSeed: DEFAULT_CHAOS_SEED, chaosMinutes: DEFAULT_CHAOS_MINUTES };
  if (values.runs === undefined) throw new SoakUsageError('--runs N is required');
  const runs = positiveInteger('--runs', values.runs);
  let steps: string[] | undefined;
  if (values.steps !== undefined) {
    steps = values.steps.split(',').map((step) => step.trim());
    if (steps.some((step) => step === ''))
      throw new SoakUsageError(`--steps must be a comma-separated list of step names, got "${values.steps}"`);
  }
  const seedText = values['chaos-seed'] ?? String(DEFAULT_CHAOS_SEED);
  if (!/^-?\d+$/.test(seedText)) throw new SoakUsageError(`--chaos-seed must be an integer, got "${seedText}"`);
  const minutesText = values['chaos-minutes'] ?? String(DEFAULT_CHAOS_MINUTES);
  const chaosMinutes = Number(minutesText);
  if (!/^\d+(\.\d+)?$/.test(minutesText) || !(chaosMinutes > 0))
    throw new SoakUsageError(`--chaos-minutes must be a positive number, got "${minutesText}"`);
  if (!values.load && (values['chaos-seed'] !== undefined || values['chaos-minutes'] !== undefined)) {
    throw new SoakUsageError('--chaos-seed and --chaos-minutes only apply with --load');
  }
  return { ...base, runs, steps, chaosSeed: Number(seedText), chaosMinutes };
}
