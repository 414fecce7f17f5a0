import { execFile, spawn, spawnSync, type ChildProcessByStdio } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { finished, spawnCaptured } from './captured-process.js';

const execFileAsync = promisify(execFile);

/** Whether `buildah` can be run here at all (the image tests are skipped where it cannot). */
export function buildahAvailable(): boolean {
  return spawnSync('buildah', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** The parts of an image's OCI configuration the tests look at. */
export interface ImageConfig {
  User?: string;
  Env?: string[];
  Entrypoint?: string[];
  Cmd?: string[];
  WorkingDir?: string;
  ExposedPorts?: Record<string, unknown>;
  Labels?: Record<string, string>;
}

export async function imageConfig(image: string): Promise<ImageConfig> {
  // buildah 1.28's --format has no `json` function: the whole inspection, then its OCI config.
  const { stdout } = await execFileAsync('buildah', ['inspect', '--type', 'image', image], {
    maxBuffer: 16 * 1024 * 1024,
  });
  return (JSON.parse(stdout) as { OCIv1: { config?: ImageConfig } }).OCIv1.config ?? {};
}

export interface RunOptions {
  /** `uid:gid`; the image's USER when omitted, as a container runtime would. */
  user?: string;
  env?: Record<string, string>;
  /** Host files or directories bind-mounted read-only. */
  mounts?: { source: string; target: string }[];
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * A working container made with `buildah from`, whose commands run with `buildah run --isolation
 * chroot`: no runc or crun needed, and the host's network namespace is shared, so the test control
 * plane on 127.0.0.1 is reachable from inside and the container's listeners from outside.
 * `buildah run` ignores ENTRYPOINT and CMD: callers pass the full command, taken from imageConfig().
 */
export class BuildahContainer {
  private constructor(readonly id: string) {}

  static async from(image: string): Promise<BuildahContainer> {
    const { stdout } = await execFileAsync('buildah', ['from', '--pull=never', '--quiet', image]);
    return new BuildahContainer(stdout.trim());
  }

  private runArgs(command: readonly string[], options: RunOptions): string[] {
    return [
      'run',
      '--isolation',
      'chroot',
      ...(options.user === undefined ? [] : ['--user', options.user]),
      ...Object.entries(options.env ?? {}).flatMap(([name, value]) => ['--env', `${name}=${value}`]),
      ...(options.mounts ?? []).flatMap(({ source, target }) => ['--volume', `${source}:${target}:ro`]),
      this.id,
      '--',
      ...command,
    ];
  }

  /** Runs `command` to completion. */
  async run(command: readonly string[], options: RunOptions = {}): Promise<RunResult> {
    const { code, stdout, stderr } = await finished(spawnCaptured('buildah', this.runArgs(command, options)));
    return { code, stdout, stderr };
  }

  /**
   * Starts `command` and returns at once. The process leads a process group of its own, so that
   * stopGroup() reaches whatever buildah started under it.
   */
  start(command: readonly string[], options: RunOptions = {}): ChildProcessByStdio<null, Readable, Readable> {
    return spawn('buildah', this.runArgs(command, options), { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  }

  /** A file of the container's root filesystem as it is now, or undefined when it does not exist. */
  async readFile(path: string): Promise<string | undefined> {
    const { stdout } = await execFileAsync('buildah', ['mount', this.id]);
    try {
      return await readFile(join(stdout.trim(), path), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    } finally {
      await execFileAsync('buildah', ['umount', this.id]);
    }
  }

  async remove(): Promise<void> {
    await execFileAsync('buildah', ['rm', this.id]);
  }
}

/** Sends `signal` to the process group that `start()` made, if it still exists. */
export function signalGroup(child: { pid?: number | undefined }, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/**
 * The processes of the group that `start()` made running `command` (argv[0] as resolved on the PATH,
 * e.g. /usr/local/bin/node for node; buildah's own buildah-chroot-exec carries it further along). buildah
 * answers SIGTERM by killing what it runs, so a graceful stop (what a container runtime sends to
 * the entry point) has to be sent to the container's process itself: with chroot isolation there
 * is no PID namespace, and it is a descendant of our child in the same process group.
 */
export function groupProcesses(child: { pid?: number | undefined }, command: readonly string[]): number[] {
  if (child.pid === undefined) return [];
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so count from the last ')'.
      const pgrp = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
      if (pgrp !== child.pid || Number(entry) === child.pid) continue;
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (
        basename(argv[0] ?? '') === basename(command[0] ?? '-') &&
        command.every((word, index) => index === 0 || argv[index] === word)
      )
        found.push(Number(entry));
    } catch {
      // Gone between the listing and the read.
    }
  }
  return found;
}
