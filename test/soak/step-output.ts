// Turning a child's raw output into the few bounded lines the summary may show.

// CSI sequences (colours, cursor moves) and OSC sequences (titles, links). Mocha colours its
// failure list when it thinks it writes to a terminal, and some tools force colour regardless.
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)|\u001b[@-Z\\-_]/g;

export function stripAnsi(text: string): string {
  return text.replace(ANSI, '');
}

/** The output as lines, colour codes gone; a bare \r (a progress bar redrawing) also ends a line. */
export function outputLines(text: string): string[] {
  return stripAnsi(text).split(/\r\n|\n|\r/);
}

// npm's own report of a failing script (`npm error Lifecycle script "lint" failed ...`, the
// command, the path) says only that the step failed, which the summary already says; the lines
// before it are the ones that tell why.
const NPM_NOISE = /^npm (?:error|ERR!|warn|WARN|notice)\b/;

/** The last `count` non-empty lines, skipping npm's own failure report when anything else is left. */
export function lastMeaningfulLines(text: string, count = 5): string[] {
  const lines = outputLines(text)
    .map((line) => line.trimEnd())
    .filter((line) => line.trim() !== '');
  const meaningful = lines.filter((line) => !NPM_NOISE.test(line.trimStart()));
  return (meaningful.length > 0 ? meaningful : lines).slice(-count);
}

export const CLIP_CHARS = 160;

/** One summary-safe line: tabs and runs of spaces collapsed, at most `max` characters. */
export function clip(text: string, max = CLIP_CHARS): string {
  const line = stripAnsi(text)
    .replace(/[\r\n\t]+/g, ' ')
    .replace(/ {2,}/g, ' ')
    .trim();
  return line.length <= max ? line : `${line.slice(0, max - 1)}…`;
}
