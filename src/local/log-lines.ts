import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { Writable } from 'node:stream';

const LEVEL_NAMES: Record<number, string> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
};

/**
 * A JSON log line as one short line for the live view's notes (`warn bind: message`); a line that is
 * not a pino object is kept as it is.
 */
export function logNoteText(line: string): string {
  try {
    const entry = JSON.parse(line) as { level?: unknown; component?: unknown; msg?: unknown };
    if (typeof entry.msg !== 'string') return line;
    const level = typeof entry.level === 'number' ? (LEVEL_NAMES[entry.level] ?? String(entry.level)) : 'log';
    return `${level}${typeof entry.component === 'string' ? ` ${entry.component}` : ''}: ${entry.msg}`;
  } catch {
    return line;
  }
}

/** A stream for the logger that hands on whole lines (a chunk may hold several, or part of one). */
export function lineStream(onLine: (line: string) => void): Writable {
  let partial = '';
  return new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) if (line !== '') onLine(line);
      done();
    },
    final(done) {
      if (partial !== '') onLine(partial);
      partial = '';
      done();
    },
  });
}

/** The last whole lines within `bytes` of the end of a file; none when it cannot be read. */
export function tailLines(path: string, bytes: number): string[] {
  let handle: number | undefined;
  try {
    handle = openSync(path, 'r');
    const size = fstatSync(handle).size;
    const length = Math.min(size, bytes);
    const buffer = Buffer.alloc(length);
    readSync(handle, buffer, 0, length, size - length);
    const lines = buffer.toString('utf8').split('\n');
    if (length < size) lines.shift();
    return lines.filter((line) => line !== '');
  } catch {
    return [];
  } finally {
    if (handle !== undefined) closeSync(handle);
  }
}
