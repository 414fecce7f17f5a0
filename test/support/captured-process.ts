import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';

/**
 * A child process whose stdout and stderr a test keeps as text, so that an assertion or a wait
 * that gave up can show what the process wrote. One copy of the spawn-and-collect code that the
 * serve, local, worker and build tests each used to carry.
 */
export interface CapturedProcess {
  child: ChildProcessByStdio<null, Readable, Readable>;
  /** Everything written to stdout so far. */
  stdout: () => string;
  /** Everything written to stderr so far. */
  stderr: () => string;
  /** Both, interleaved in the order the chunks arrived: what a person at a terminal would see. */
  output: () => string;
  /**
   * When the process exited, and when (`at`, Date.now(), for tests that time a shutdown). Output
   * written just before the exit may still be in the pipes: use `closed` to read it all.
   */
  exited: Promise<ProcessExit>;
  /** When the process exited and its stdout and stderr ended (no output is left to arrive). */
  closed: Promise<ProcessExit>;
}

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  at: number;
}

export interface CaptureOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

/**
 * Starts `file args` with stdin closed and both outputs collected. A process that cannot be
 * started at all (no such file) rejects `exited` and `closed` instead of throwing an unhandled
 * 'error' event.
 */
export function spawnCaptured(file: string, args: readonly string[], options: CaptureOptions = {}): CapturedProcess {
  const child = spawn(file, args, {
    ...(options.env === undefined ? {} : { env: options.env }),
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    const text = chunk.toString();
    stdout += text;
    output += text;
  });
  child.stderr.on('data', (chunk: Buffer) => {
    const text = chunk.toString();
    stderr += text;
    output += text;
  });
  const failed = new Promise<never>((_done, fail) => {
    child.once('error', fail);
  });
  // Only the awaited promise reports a start failure; the other must not count as unhandled.
  failed.catch(() => undefined);
  const settled = (event: 'exit' | 'close') =>
    Promise.race([
      new Promise<ProcessExit>((done) => {
        child.once(event, (code: number | null, signal: NodeJS.Signals | null) => {
          done({ code, signal, at: Date.now() });
        });
      }),
      failed,
    ]);
  const exited = settled('exit');
  const closed = settled('close');
  exited.catch(() => undefined);
  closed.catch(() => undefined);
  return { child, stdout: () => stdout, stderr: () => stderr, output: () => output, exited, closed };
}

/** `node --import tsx script args`: how the tests run src/main.ts and the fixtures, uncompiled. */
export function spawnTsx(script: string, args: readonly string[] = [], options: CaptureOptions = {}): CapturedProcess {
  return spawnCaptured(process.execPath, ['--import', 'tsx', script, ...args], options);
}

/** What a process that ran to the end wrote, and how it ended. */
export interface FinishedProcess extends ProcessExit {
  stdout: string;
  stderr: string;
  output: string;
}

/** Runs a started process to the end: waits for `closed`, so all its output is in. */
export async function finished(started: CapturedProcess): Promise<FinishedProcess> {
  const end = await started.closed;
  return { ...end, stdout: started.stdout(), stderr: started.stderr(), output: started.output() };
}
