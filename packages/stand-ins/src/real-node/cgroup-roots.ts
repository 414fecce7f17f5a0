import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { RealNodeError } from './real-node-error.js';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Mount points of every cgroup hierarchy (v1 controllers, named ones such as name=systemd, and
 * cgroup2) from mountinfo text: kubelet and runc create a node's cgroups in all of them, so
 * teardown has to look in all of them.
 */
export function parseCgroupMounts(mountinfo: string): string[] {
  const points: string[] = [];
  for (const line of mountinfo.split('\n')) {
    const [left, right] = line.split(' - ');
    if (left === undefined || right === undefined) continue;
    const fsType = right.split(' ')[0];
    const mountPoint = left.split(' ')[4];
    if ((fsType === 'cgroup' || fsType === 'cgroup2') && mountPoint !== undefined)
      points.push(unescapeMountPath(mountPoint));
  }
  return points;
}

/** A mountinfo path with its octal escapes undone (mountinfo writes space, tab, newline and backslash so). */
export function unescapeMountPath(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

export function cgroupHierarchies(mountinfoPath = '/proc/self/mountinfo'): string[] {
  return parseCgroupMounts(readFileSync(mountinfoPath, 'utf8'));
}

/**
 * Creates `root` (e.g. /vgpu-warden-rn-0) in every hierarchy: kubelet refuses a cgroupRoot that is
 * missing in any controller it uses ("cgroup ... has some missing paths"). A new v1 cpuset starts
 * with no CPUs and no memory nodes, and nothing can join it until they are set, so they are copied
 * from the parent.
 */
export function createCgroupRoot(root: string, hierarchies: readonly string[]): void {
  for (const hierarchy of hierarchies) {
    const dir = join(hierarchy, root);
    try {
      mkdirSync(dir, { recursive: true });
      for (const file of ['cpuset.cpus', 'cpuset.mems']) {
        const own = join(dir, file);
        if (existsSync(own) && readFileSync(own, 'utf8').trim() === '')
          writeFileSync(own, readFileSync(join(dirname(dir), file), 'utf8'));
      }
    } catch (error) {
      throw new RealNodeError(`could not create cgroup ${dir}`, { cause: error });
    }
  }
}

/** The folders of `root` still present, deepest first (the order rmdir needs). */
export function cgroupTree(root: string, hierarchies: readonly string[]): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) if (entry.isDirectory()) walk(join(dir, entry.name));
    found.push(dir);
  };
  for (const hierarchy of hierarchies) walk(join(hierarchy, root));
  return found;
}

/**
 * rmdir of every folder under `root`, bottom-up. A cgroup folder holds only kernel files, which
 * rmdir takes along; it fails (EBUSY) while a process is still inside, so callers kill first and
 * retry while the kernel finishes reaping. Returns the folders that could not be removed.
 */
export function removeCgroupTreeOnce(root: string, hierarchies: readonly string[]): string[] {
  const left: string[] = [];
  for (const dir of cgroupTree(root, hierarchies)) {
    try {
      rmdirSync(dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') left.push(dir);
    }
  }
  return left;
}

export async function removeCgroupRoot(root: string, hierarchies: readonly string[], timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = removeCgroupTreeOnce(root, hierarchies);
    if (left.length === 0) return;
    if (Date.now() >= deadline) throw new RealNodeError(`cgroups still busy after ${timeoutMs} ms: ${left.join(', ')}`);
    await sleep(20);
  }
}

export function removeCgroupRootSync(root: string, hierarchies: readonly string[], timeoutMs = 2000): void {
  const deadline = Date.now() + timeoutMs;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  while (removeCgroupTreeOnce(root, hierarchies).length > 0 && Date.now() < deadline) Atomics.wait(pause, 0, 0, 20);
}
