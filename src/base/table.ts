/** kubectl-style plain-text tables for the CLI and the live view. */

// kubectl's tabwriter: cells padded by 3 spaces, at least 6 wide; the last column is not padded.
const PADDING = 3;
const MIN_WIDTH = 6;

/** Lines of a kubectl-style table; the column widths fit the widest cell of each column. */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const all = [header, ...rows];
  const widths = header.map((_, column) =>
    Math.max(MIN_WIDTH, ...all.map((row) => (row[column] ?? '').length + PADDING)),
  );
  return all.map((row) =>
    row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column] ?? 0))).join(''),
  );
}
