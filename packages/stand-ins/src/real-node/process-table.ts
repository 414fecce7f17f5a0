import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

// This kernel has no /proc/<pid>/task/<tid>/children (CONFIG_PROC_CHILDREN is off), so the parent
// of every process is read from its stat line instead.

export interface ProcessStat {
  /** The executable's name as the kernel keeps it (at most 15 characters). */
  comm: string;
  state: string;
  ppid: number;
}

/** Name, state letter and parent pid from /proc/<pid>/stat, or undefined when the process is gone. */
export function readProcessStat(pid: number, procDir = '/proc'): ProcessStat | undefined {
  let text: string;
  try {
    text = readFileSync(`${procDir}/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  return parseStatLine(text);
}

/** The command name in parentheses may hold spaces and parentheses, so fields are counted from the last ')'. */
export function parseStatLine(text: string): ProcessStat | undefined {
  const start = text.indexOf('(');
  const end = text.lastIndexOf(')');
  if (start < 0 || end < start) return undefined;
  const [state, ppid] = text.slice(end + 2).split(' ');
  if (state === undefined || ppid === undefined || !/^\d+$/.test(ppid)) return undefined;
  return { comm: text.slice(start + 1, end), state, ppid: Number(ppid) };
}

/** Host pids of the live children of `pid`. */
export function childPids(pid: number, procDir = '/proc'): number[] {
  const children: number[] = [];
  for (const entry of readdirSync(procDir)) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readProcessStat(Number(entry), procDir);
    if (stat?.ppid === pid && stat.state !== 'Z') children.push(Number(entry));
  }
  return children;
}

/** True while `pid` exists and is not a zombie (a zombie has exited; only its parent's wait is missing). */
export function isRunning(pid: number, procDir = '/proc'): boolean {
  const stat = readProcessStat(pid, procDir);
  return stat !== undefined && stat.state !== 'Z' && stat.state !== 'X';
}

/** Live descendants exactly `depth` generations below `pid` (1: its children). */
export function descendantsAt(pid: number, depth: number, procDir = '/proc'): number[] {
  let level = [pid];
  for (let step = 0; step < depth; step++) level = level.flatMap((parent) => childPids(parent, procDir));
  return level;
}

/**
 * The pid `depth` generations below `pid` that runs `comm`, waiting up to `timeoutMs` for it to be
 * forked and exec'd; e.g. ManagedProcess's guard → nsenter → kubelet is depth 2 (the guard's
 * other child is its one-second sleeper). Undefined when it never came or `pid` died.
 */
export async function waitForDescendant(
  pid: number,
  depth: number,
  comm: string,
  timeoutMs: number,
): Promise<number | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = descendantsAt(pid, depth).find((candidate) => readProcessStat(candidate)?.comm === comm);
    if (found !== undefined) return found;
    if (Date.now() >= deadline || !isRunning(pid)) return undefined;
    await sleep(10);
  }
}

/** Waits until none of `pids` runs any more; false when some still ran at the deadline. */
export async function waitUntilGone(pids: readonly number[], timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (pids.some((pid) => isRunning(pid))) {
    if (Date.now() >= deadline) return false;
    await sleep(10);
  }
  return true;
}

/** The same, blocking: for `process.on('exit')`, where nothing asynchronous runs. */
export function waitUntilGoneSync(pids: readonly number[], timeoutMs: number): boolean {
  const deadline = Date.now() + timeoutMs;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  while (pids.some((pid) => isRunning(pid))) {
    if (Date.now() >= deadline) return false;
    Atomics.wait(pause, 0, 0, 10);
  }
  return true;
}
