import { resolve } from 'node:path';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';

/** The repository root, where eslint.config.js lives. */
export const REPO_ROOT = resolve(import.meta.dirname, '..', '..');

// The project's own eslint.config.js, with type-aware parsing off so planted files can be linted.
const eslint = new ESLint({
  cwd: REPO_ROOT,
  overrideConfig: [{ files: ['**/*.ts'], ...tseslint.configs.disableTypeChecked }],
});

/**
 * Lints `code` as if it were the file at `filePath` (relative to the root; it need not exist) and
 * returns the messages of `rule` only: how the boundary rules' tests plant a bad import.
 */
export async function plantedProblems(rule: string, filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: resolve(REPO_ROOT, filePath) });
  return (result?.messages ?? []).filter((message) => message.ruleId === rule).map((message) => message.message);
}
