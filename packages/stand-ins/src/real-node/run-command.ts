import { execFile } from 'node:child_process';
import { RealNodeError } from './real-node-error.js';

/** Runs a short command to completion; its stderr goes into the error when it fails. */
export function runCommand(
  command: string,
  args: readonly string[],
  options: { timeoutMs?: number; cwd?: string } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      { cwd: options.cwd, timeout: options.timeoutMs ?? 30_000, maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' },
      (error, stdout, stderr) => {
        if (error)
          reject(
            new RealNodeError(`${command} ${args.join(' ')} failed: ${stderr.trim() || error.message}`, {
              cause: error,
            }),
          );
        else resolve(stdout);
      },
    );
  });
}
