// Children of the soak run in their own process groups (detached), so that stopping one stops
// everything it started (npm, sh, tsx, node, the cluster binaries a test forgot), and so that a
// Ctrl-C at the terminal reaches the soak alone, which then stops each group in order.
import { spawn, type ChildProcess } from 'node:child_process';
import {
  closeSync,
  createWriteStream,
  existsSync,
  fstatSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  type WriteStream,
} from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import type { ChildExit } from './step-outcome.js';

export interface GroupExit extends ChildExit {
  durationMs: number;
  /** The soak signalled the group before its leader exited. */
  stoppedBySoak: boolean;
  /** Processes of the group were still running after its leader exited (they were stopped). */
  strays: boolean;
}

export interface SpawnGroupOptions {
  cwd: string;
  env?: NodeJS.ProcessEnv;
  /** Both stdout and stderr go here, interleaved as they arrive. */
  logPath: string;
  /** How long stop() waits after SIGTERM before SIGKILL. */
  killAfterMs?: number;
  /** How long to wait for the pipes to close after the leader exited (tests shorten it). */
  stdioGraceMs?: number;
}

export const DEFAULT_KILL_AFTER_MS = 20_000;
// After the leader exits, its pipes close at once unless a process it left behind holds them.
const STDIO_GRACE_MS = 5_000;
const POLL_MS = 100;

export class ProcessGroup {
  readonly finished: Promise<GroupExit>;
  private readonly child: ChildProcess;
  private readonly log: WriteStream;
  private readonly killAfterMs: number;
  private readonly stdioGraceMs: number;
  private readonly startedAt = Date.now();
  private leaderExited = false;
  private signalled = false;
  private stopping: Promise<void> | undefined;

  constructor(file: string, args: readonly string[], options: SpawnGroupOptions) {
    this.killAfterMs = options.killAfterMs ?? DEFAULT_KILL_AFTER_MS;
    this.stdioGraceMs = options.stdioGraceMs ?? STDIO_GRACE_MS;
    // Opened synchronously so the log exists the moment the step starts (for `tail -f`).
    this.log = createWriteStream(options.logPath, { fd: openSync(options.logPath, 'w') });
    this.child = spawn(file, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout?.pipe(this.log, { end: false });
    this.child.stderr?.pipe(this.log, { end: false });
    this.finished = this.watch();
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** SIGTERM to the whole group, SIGKILL to what is left after killAfterMs; resolves once it ended. */
  async stop(): Promise<GroupExit> {
    if (!this.leaderExited) this.signalled = true;
    await this.terminate();
    return this.finished;
  }

  /** Last resort for a second Ctrl-C or the soak's own exit: no waiting, no clean-up. */
  signalNow(signal: NodeJS.Signals): void {
    if (!this.leaderExited) this.signalled = true;
    this.signal(signal);
  }

  private async watch(): Promise<GroupExit> {
    const closed = new Promise<boolean>((resolve) =>
      this.child.once('close', () => {
        resolve(true);
      }),
    );
    const exit = await new Promise<ChildExit>((resolve) => {
      this.child.once('exit', (code, signal) => {
        resolve({ code, signal });
      });
      this.child.once('error', (error) => {
        this.log.write(`\n[soak] could not run the command: ${error.message}\n`);
        resolve({ code: null, signal: null });
      });
    });
    this.leaderExited = true;
    const durationMs = Date.now() - this.startedAt;
    const closedInTime = await Promise.race([closed, delay(this.stdioGraceMs).then(() => false)]);
    let strays = false;
    if (this.groupAlive()) {
      // Left-overs of one step (a server a test did not stop) would load and confuse later steps.
      strays = true;
      this.log.write(
        `\n[soak] processes of group ${this.child.pid ?? '?'} were still running after its leader exited; stopping them\n`,
      );
      await this.terminate();
    }
    if (!closedInTime) {
      this.child.stdout?.destroy();
      this.child.stderr?.destroy();
    }
    await new Promise<void>((resolve) => {
      this.log.end(() => {
        resolve();
      });
    });
    return { ...exit, durationMs, stoppedBySoak: this.signalled, strays };
  }

  private terminate(): Promise<void> {
    this.stopping ??= (async () => {
      this.signal('SIGTERM');
      if (await this.waitGone(this.killAfterMs)) return;
      this.log.write(
        `\n[soak] group ${this.child.pid ?? '?'} still running ${this.killAfterMs} ms after SIGTERM; sending SIGKILL\n`,
      );
      this.signal('SIGKILL');
      await this.waitGone(5_000);
    })().finally(() => {
      this.stopping = undefined;
    });
    return this.stopping;
  }

  private async waitGone(ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (this.groupAlive()) {
      if (Date.now() >= deadline) return false;
      await delay(POLL_MS);
    }
    return true;
  }

  private signal(signal: NodeJS.Signals): void {
    const pid = this.child.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, signal);
    } catch {
      // ESRCH: the group is already gone, which is what the signal was for.
    }
  }

  private groupAlive(): boolean {
    const pid = this.child.pid;
    return pid !== undefined && groupHasLiveMembers(pid);
  }
}

/**
 * Whether any process of group `pgid` still runs. A killed process whose parent already exited
 * stays a zombie in its group until init reaps it, which some container inits do only every
 * second or two; kill(-pgid, 0) counts zombies, so on Linux /proc is read to skip them.
 */
export function groupHasLiveMembers(pgid: number): boolean {
  let entries: string[] | undefined;
  try {
    entries = readdirSync('/proc');
  } catch {
    entries = undefined;
  }
  if (entries === undefined || !existsSync('/proc/self/stat')) {
    try {
      process.kill(-pgid, 0);
      return true;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'EPERM';
    }
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited while we looked
    }
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so split after the last ')'.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pgrp) === pgid && state !== 'Z' && state !== 'X') return true;
  }
  return false;
}

/**
 * The last `maxBytes` of a log. Mocha prints its failure list at the very end, and a step's log can
 * be large (servers' output during integration tests), so the whole file is not needed.
 */
export function readLogTail(path: string, maxBytes = 32 * 1024 * 1024): string {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    const length = Math.min(size, maxBytes);
    const buffer = Buffer.alloc(length);
    let read = 0;
    while (read < length) {
      const n = readSync(fd, buffer, read, length - read, size - length + read);
      if (n === 0) break;
      read += n;
    }
    return buffer.subarray(0, read).toString('utf8');
  } finally {
    closeSync(fd);
  }
}
