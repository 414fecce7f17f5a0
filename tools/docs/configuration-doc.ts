/**
 * docs/configuration.md's settings table, generated from SETTINGS so that the documented
 * variables, flags, defaults and meanings cannot drift from what the code parses.
 *
 *   npx tsx tools/docs/configuration-doc.ts --write   rewrite the block between the markers
 *   npx tsx tools/docs/configuration-doc.ts           print the block (changes nothing)
 *
 * test/unit/docs/configuration-doc.test.ts fails when the committed block differs from the render.
 * This is the one place that imports SETTINGS for the docs; if src/config/settings.ts moves, only this
 * import changes.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { SETTINGS } from '../../src/config/settings.js';

/** What the table needs of a setting: a structural subset, so the renderer stays pure and testable. */
export interface DocumentedSetting {
  env: string;
  aliases?: readonly string[];
  flag: string;
  defaultValue: string | undefined;
  description: string;
}

export const CONFIGURATION_DOC = resolve(import.meta.dirname, '..', '..', 'docs', 'configuration.md');
export const BEGIN_MARKER = '<!-- settings:begin -->';
export const END_MARKER = '<!-- settings:end -->';
export const WRITE_COMMAND = 'npx tsx tools/docs/configuration-doc.ts --write';

const TABLE_HEADER = ['| variable | flag | default | meaning |', '| --- | --- | --- | --- |'];

/** `unset` for no default and `empty` for '': a backticked empty string would render as nothing. */
export function renderDefault(defaultValue: string | undefined): string {
  if (defaultValue === undefined) return 'unset';
  if (defaultValue === '') return 'empty';
  return `\`${defaultValue}\``;
}

/** The first cell: the variable, then the names also read for it (HAMi's, older ones). */
export function renderVariable(setting: DocumentedSetting): string {
  const aliases = setting.aliases ?? [];
  const also = aliases.length === 0 ? '' : ` (also ${aliases.map((alias) => `\`${alias}\``).join(', ')})`;
  return `\`${setting.env}\`${also}`;
}

/** One row per setting, in SETTINGS order, with the header rows first. */
export function renderConfigurationTable(settings: readonly DocumentedSetting[]): string {
  const rows = settings.map(
    (setting) =>
      `| ${renderVariable(setting)} | \`--${setting.flag}\` | ${renderDefault(setting.defaultValue)} | ${setting.description} |`,
  );
  return [...TABLE_HEADER, ...rows].join('\n');
}

/** The text between the two markers (without them), or undefined when they are missing or out of order. */
export function extractSettingsBlock(doc: string): string | undefined {
  const begin = doc.indexOf(BEGIN_MARKER);
  const end = doc.indexOf(END_MARKER);
  if (begin === -1 || end === -1 || end < begin) return undefined;
  return doc.slice(begin + BEGIN_MARKER.length, end).trim();
}

/** `doc` with the block between the markers replaced by `table`; throws when the markers are missing. */
export function replaceSettingsBlock(doc: string, table: string): string {
  const begin = doc.indexOf(BEGIN_MARKER);
  const end = doc.indexOf(END_MARKER);
  if (begin === -1 || end === -1 || end < begin) {
    throw new Error(`${CONFIGURATION_DOC} lacks ${BEGIN_MARKER} … ${END_MARKER}; put them back where the table goes`);
  }
  return `${doc.slice(0, begin + BEGIN_MARKER.length)}\n${table}\n${doc.slice(end)}`;
}

export function renderedSettingsTable(): string {
  return renderConfigurationTable(SETTINGS);
}

function main(args: readonly string[]): void {
  const table = renderedSettingsTable();
  if (!args.includes('--write')) {
    process.stdout.write(`${table}\n`);
    return;
  }
  const before = readFileSync(CONFIGURATION_DOC, 'utf8');
  const after = replaceSettingsBlock(before, table);
  if (after === before) {
    process.stdout.write(`${CONFIGURATION_DOC}: settings table already up to date\n`);
    return;
  }
  writeFileSync(CONFIGURATION_DOC, after);
  process.stdout.write(`${CONFIGURATION_DOC}: settings table rewritten (${SETTINGS.length} settings)\n`);
}

// Run only as a script, so the test can import the renderer without side effects.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main(process.argv.slice(2));
}
