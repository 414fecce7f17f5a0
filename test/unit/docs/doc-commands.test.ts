/**
 * Every command shown in the docs is run by a test or by a docs check: each one has an entry in
 * commands-run-by.ts, and each entry's test still holds the command's essence.
 *
 * What counts as a shown command (README.md and docs/*.md; `shownCommands` in tools/docs/markdown.ts):
 * - in a fenced block tagged `sh`, `bash` or `shell`, every line that is not blank or a `#` comment:
 *   such a block is pasted into a shell as it is;
 * - in any other fenced block (untagged, `console`, `text`, …), only the lines that start with the
 *   prompt `$ `; the lines after them are output;
 * - a line ending in `\` goes on with the next one; a trailing ` # comment` is not part of it;
 * - the registry key is the command without its prompt, whitespace collapsed.
 * Commands in inline code in prose (`npm run lint`) are not shown commands: they name a command
 * in a sentence rather than give one to copy, and the prose around them is the documentation.
 *
 * Fails for a shown command with no entry, for an entry no doc shows any more, for a duplicate
 * entry, and for a `runBy` file that is missing or no longer contains its `contains` text. Entries
 * marked `runByNoTest` are listed as pending, so the gaps show in every run.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { REPO_ROOT, documentationFiles, shownCommands } from '../../../tools/docs/markdown.js';
import { COMMANDS_RUN_BY, type CommandEntry } from './commands-run-by.js';

const REGISTRY = 'test/unit/docs/commands-run-by.ts';

/** Every shown command with the places that show it (`docs/x.md:12`). */
function shownEverywhere(): Map<string, string[]> {
  const shown = new Map<string, string[]>();
  for (const doc of documentationFiles()) {
    for (const { line, command } of shownCommands(readFileSync(join(REPO_ROOT, doc), 'utf8'))) {
      shown.set(command, [...(shown.get(command) ?? []), `${doc}:${line}`]);
    }
  }
  return shown;
}

const withoutWhitespace = (text: string): string => text.replace(/\s+/g, '');

/** What a runBy entry lacks: missing files and texts they no longer contain. */
function runByProblems(entry: CommandEntry): string[] {
  if (!('runBy' in entry)) return [];
  return entry.runBy.flatMap(({ file, contains }) => {
    const path = join(REPO_ROOT, file);
    if (!existsSync(path)) return [`${file} does not exist (moved? update ${REGISTRY})`];
    // Whitespace is ignored: the formatter may break a needle's call across lines.
    const text = withoutWhitespace(readFileSync(path, 'utf8'));
    return contains
      .filter((needle) => !text.includes(withoutWhitespace(needle)))
      .map((needle) => `${file} no longer contains ${JSON.stringify(needle)}`);
  });
}

describe('docs: every shown command is run by a test', () => {
  const shown = shownEverywhere();
  const registered = new Map(COMMANDS_RUN_BY.map((entry) => [entry.command, entry]));

  it('shows at least the two commands of the README', () => {
    expect([...shown.keys()]).to.include.members(['npm ci && npm start', 'npm ci && npm test']);
  });

  it(`has an entry in ${REGISTRY} for every shown command`, () => {
    const missing = [...shown]
      .filter(([command]) => !registered.has(command))
      .map(([command, where]) => `${where.join(', ')}: ${command}`);
    expect(missing, `add these to ${REGISTRY} with the test that runs them:\n${missing.join('\n')}`).to.deep.equal([]);
  });

  it('has no entry for a command no doc shows any more, and no entry twice', () => {
    const stale = COMMANDS_RUN_BY.map((entry) => entry.command).filter((command) => !shown.has(command));
    expect(stale, `remove these from ${REGISTRY} (or fix their text):\n${stale.join('\n')}`).to.deep.equal([]);
    expect(registered.size, 'an entry appears twice').to.equal(COMMANDS_RUN_BY.length);
  });

  describe('each test named still runs its command', () => {
    for (const entry of COMMANDS_RUN_BY) {
      if ('runByNoTest' in entry) {
        // Pending on purpose: a visible gap, not a mapping made up to silence the check.
        it(`NOT RUN BY ANY TEST: ${entry.command} (${entry.runByNoTest})`);
        continue;
      }
      if ('illustrative' in entry) continue;
      it(entry.command, () => {
        const problems = runByProblems(entry);
        expect(problems, problems.join('\n')).to.deep.equal([]);
      });
    }
  });

  it('gives every illustrative entry a reason', () => {
    const bare = COMMANDS_RUN_BY.filter((entry) => 'illustrative' in entry && entry.illustrative.trim() === '').map(
      (entry) => entry.command,
    );
    expect(bare).to.deep.equal([]);
  });
});
