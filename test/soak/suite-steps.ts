// Derives the soak's steps from package.json's "test" script at run time, so the soak runs exactly
// what `npm test` runs even after someone adds or reorders a step.
import { SuiteShapeError, UnknownStepError } from './soak-errors.js';

const NPM_RUN_STEP = /^npm run ([A-Za-z0-9][A-Za-z0-9:._-]*)$/;

/**
 * Splits the "test" script into its `npm run <name>` steps. Anything else (another command, `||`,
 * `;`, pipes, extra arguments, quoting) is refused rather than guessed at: running a different
 * suite from `npm test` would make the soak's numbers mean nothing.
 */
export function splitTestScript(scripts: unknown): string[] {
  if (typeof scripts !== 'object' || scripts === null)
    throw new SuiteShapeError('package.json has no "scripts" object');
  const table = scripts as Record<string, unknown>;
  const test = table.test;
  if (typeof test !== 'string') throw new SuiteShapeError('package.json has no "test" script');
  const parts = test.split('&&').map((part) => part.trim());
  const steps: string[] = [];
  for (const [index, part] of parts.entries()) {
    const name = NPM_RUN_STEP.exec(part)?.[1];
    const where = `package.json "test" script, part ${index + 1} ("${part.slice(0, 80)}")`;
    if (name === undefined)
      throw new SuiteShapeError(`cannot split the ${where}: every part between "&&" must be "npm run <name>"`);
    if (typeof table[name] !== 'string') throw new SuiteShapeError(`${where} names no script in package.json`);
    if (name === 'test') throw new SuiteShapeError(`${where} runs "test" itself`);
    // Log files and the duration table are keyed by step name.
    if (steps.includes(name)) throw new SuiteShapeError(`${where} repeats step "${name}"`);
    steps.push(name);
  }
  return steps;
}

/** The steps to run: all of them, or the `--steps` subset kept in the suite's order. */
export function selectSteps(suite: readonly string[], wanted: readonly string[] | undefined): string[] {
  if (wanted === undefined) return [...suite];
  for (const step of wanted) if (!suite.includes(step)) throw new UnknownStepError(step, suite);
  return suite.filter((step) => wanted.includes(step));
}
