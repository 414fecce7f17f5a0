import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { WardenError } from '../base/errors.js';
import { sleep } from '../base/abort.js';
import { tailLines } from './log-lines.js';

export interface ManagedProcessOptions {
  /** Short name used in errors, e.g. "kube-apiserver". */
  name: string;
  command: string;
  args: readonly string[];
  /** stdout and stderr of the process go here. */
  logFile: string;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** The process whose death makes the guard stop this one; defaults to the current process. */
  guardPid?: number;
}

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export class ProcessStartError extends WardenError {}

/** True while any process (zombies included) is still in process group `pgid`. */
export function processGroupExists(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The least of a log's end lastLogLines() reads. */
const LOG_TAIL_MIN_BYTES = 256 * 1024;

// Runs the real program under a small bash guard in its own process group. The guard forwards
// SIGTERM and, if our Node process disappears without cleaning up (SIGKILL, crash), stops the
// program within about a second, so no etcd or kube-apiserver is ever orphaned.
const GUARD_SCRIPT = `
guard=$1; shift
"$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
while kill -0 "$child" 2>/dev/null; do
  if ! kill -0 "$guard" 2>/dev/null; then
    echo "[vgpu-warden guard] process $guard is gone; stopping $1" >&2
    kill -TERM "$child" 2>/dev/null
    for _ in 1 2 3 4 5; do kill -0 "$child" 2>/dev/null || break; sleep 1; done
    kill -KILL "$child" 2>/dev/null
    break
  fi
  # Wake on the child's exit or after a second, whichever is first.
  sleep 1 & sleeper=$!
  wait -n "$child" "$sleeper" 2>/dev/null
  kill "$sleeper" 2>/dev/null
  # Reap it here: a zombie left to init keeps the process group visible after we exit.
  wait "$sleeper" 2>/dev/null
done
wait "$child"
`;

/**
 * A long-running child process (etcd, kube-apiserver, kube-scheduler) with its log in a file, a
 * promise for its exit, and stop/kill that act on its whole process group.
 */
export class ManagedProcess {
  readonly exited: Promise<ProcessExit>;
  private exit: ProcessExit | undefined;

  private constructor(
    readonly name: string,
    readonly logFile: string,
    private readonly child: ChildProcess,
  ) {
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exit = { code, signal };
        resolve(this.exit);
      });
    });
  }

  static start(options: ManagedProcessOptions): ManagedProcess {
    const log = openSync(options.logFile, 'a');
    try {
      const child = spawn(
        'bash',
        [
          '-c',
          GUARD_SCRIPT,
          'vgpu-warden-guard',
          String(options.guardPid ?? process.pid),
          options.command,
          ...options.args,
        ],
        { cwd: options.cwd, env: options.env ?? process.env, stdio: ['ignore', log, log], detached: true },
      );
      if (child.pid === undefined) {
        throw new ProcessStartError(`could not start ${options.name} (${options.command}): bash did not spawn`);
      }
      // A forgotten stop() must not keep Node alive; the exit hook and the guard still clean up.
      child.unref();
      return new ManagedProcess(options.name, options.logFile, child);
    } finally {
      closeSync(log);
    }
  }

  /** Process-group id: the guard's pid, shared by the program it runs. */
  get pid(): number {
    return this.child.pid ?? -1;
  }

  get hasExited(): boolean {
    return this.exit !== undefined;
  }

  get exitInfo(): ProcessExit | undefined {
    return this.exit;
  }

  /** SIGTERM to the group, then SIGKILL after `graceMs`; resolves once the process is gone. */
  async stop(graceMs = 5000): Promise<void> {
    if (this.hasExited) return;
    this.signalGroup('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => {
        resolve('timeout');
      }, graceMs);
    });
    const outcome = await Promise.race([this.exited, timedOut]);
    clearTimeout(timer);
    if (outcome === 'timeout') {
      this.signalGroup('SIGKILL');
      await this.exited;
      await this.groupGone(2000);
    }
  }

  // After SIGKILL the guard's exit can be seen before the kernel has reaped the rest of the group.
  private async groupGone(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline && this.groupExists()) await sleep(20);
  }

  private groupExists(): boolean {
    return processGroupExists(this.pid);
  }

  /** Synchronous SIGKILL of the group, for `process.on('exit')` where nothing async may run. */
  killNow(): void {
    if (!this.hasExited) this.signalGroup('SIGKILL');
  }

  lastLogLines(count = 20): string {
    // The end of the log only (a kubelet's grows for its node's whole life), with room for long lines.
    const lines = tailLines(this.logFile, Math.max(LOG_TAIL_MIN_BYTES, count * 1024));
    return lines.length === 0 ? '(no log written)' : lines.slice(-count).join('\n');
  }

  private signalGroup(signal: NodeJS.Signals): void {
    try {
      process.kill(-this.pid, signal);
    } catch (error) {
      // ESRCH: the group is already gone, which is what we wanted.
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  }
}
