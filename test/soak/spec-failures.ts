// Reads the failure list that mocha's `spec` reporter prints at the end of a run. Pure: text in,
// failures out, so it is tested against recorded reporter output.
import { outputLines } from './step-output.js';

export interface SpecFailure {
  /** Suite and test titles joined with " › ", e.g. `suite › nested › test` or `suite › "before all" hook for "x"`. */
  title: string;
  /** The first non-empty line of the error (the message, or the assertion's class when mocha shows a diff). */
  error: string;
}

export interface SpecFailureList {
  /** The count in mocha's `N failing` line (0 when the run printed `N passing` and nothing failed). */
  failing: number;
  /** The entries that could be read, in mocha's order. */
  failures: SpecFailure[];
  /** False when the output ended (or turned into something else) before all `failing` entries were read. */
  complete: boolean;
}

const PASSING = /^\s*\d+ passing\b/;
const PENDING = /^\s*\d+ pending\b/;
const FAILING = /^\s*(\d+) failing\s*$/;
// Mocha starts each entry with two spaces; messages are indented five and stack lines six or more,
// so a numbered line inside an error is not taken for the next entry.
const ENTRY = /^ {0,4}(\d+)\) (.*)$/;
// Mocha writes one line per suite level; a title longer than this means the list is not mocha's.
const MAX_TITLE_LINES = 20;

/**
 * The failure list of the last mocha run in `output`, or undefined when the output holds no mocha
 * summary at all (the step crashed before mocha reported, or the step is not mocha).
 *
 * A title runs from the text after `N) ` to the first line that ends with `:` (mocha appends it);
 * so a suite or test title that itself ends with a colon is cut there: a known limit.
 */
export function parseSpecFailures(output: string): SpecFailureList | undefined {
  const lines = outputLines(output);
  const failingAt = findFailingLine(lines);
  if (failingAt === undefined) {
    return lines.some((line) => PASSING.test(line)) ? { failing: 0, failures: [], complete: true } : undefined;
  }
  const failing = Number(FAILING.exec(lines[failingAt] ?? '')?.[1]);
  const failures: SpecFailure[] = [];
  let index = failingAt + 1;
  while (failures.length < failing && index < lines.length) {
    const entry = entryAt(lines, index, failures.length + 1);
    if (entry === 'not-an-entry') {
      index++;
      continue;
    }
    if (entry === 'truncated') break;
    failures.push(entry.failure);
    index = entry.next;
  }
  const complete = failures.length === failing && failures.every((failure) => failure.error !== '');
  return { failing, failures, complete };
}

/** The `N failing` line that belongs to the last `N passing` line (with `N pending` between). */
function findFailingLine(lines: readonly string[]): number | undefined {
  let passingAt: number | undefined;
  for (let i = lines.length - 1; i >= 0; i--)
    if (PASSING.test(lines[i] ?? '')) {
      passingAt = i;
      break;
    }
  if (passingAt === undefined) {
    // Output cut at the front (a tail read of a huge log) may have lost the passing line only.
    for (let i = lines.length - 1; i >= 0; i--) if (FAILING.test(lines[i] ?? '')) return i;
    return undefined;
  }
  for (let i = passingAt + 1; i < Math.min(lines.length, passingAt + 3); i++) {
    const line = lines[i] ?? '';
    if (FAILING.test(line)) return i;
    if (!PENDING.test(line)) return undefined;
  }
  return undefined;
}

type EntryRead = { failure: SpecFailure; next: number } | 'not-an-entry' | 'truncated';

function entryAt(lines: readonly string[], start: number, number: number): EntryRead {
  const head = ENTRY.exec(lines[start] ?? '');
  if (head?.[1] === undefined || Number(head[1]) !== number) return 'not-an-entry';
  const titleLines = [head[2] ?? ''];
  let at = start;
  while (!(titleLines.at(-1) ?? '').trimEnd().endsWith(':')) {
    at++;
    if (at >= lines.length || titleLines.length >= MAX_TITLE_LINES) return 'truncated';
    const line = lines[at] ?? '';
    if (isEntry(line, number + 1)) return 'truncated';
    titleLines.push(line);
  }
  const parts = titleLines.map((line) => line.trim()).filter((line) => line !== '');
  const last = parts.length - 1;
  parts[last] = (parts[last] ?? '').slice(0, -1).trimEnd();
  const title = parts.filter((part) => part !== '').join(' › ');
  // The error's first line is the next non-empty one (mocha leaves a blank line before a diff).
  let next = at + 1;
  while (next < lines.length && (lines[next] ?? '').trim() === '') next++;
  if (next >= lines.length || isEntry(lines[next] ?? '', number + 1)) return { failure: { title, error: '' }, next };
  return { failure: { title, error: (lines[next] ?? '').trim() }, next: next + 1 };
}

function isEntry(line: string, number: number): boolean {
  return Number(ENTRY.exec(line)?.[1]) === number;
}
