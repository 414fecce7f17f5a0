import { readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { join, sep } from 'node:path';
import { cgroupTree, removeCgroupRootSync, unescapeMountPath } from './cgroup-roots.js';
import { cgroupRootFor } from './node-layout.js';
import { errorChain, RealNodeError } from './real-node-error.js';

// A SIGKILLed run cannot tidy up: its processes die (their guards kill them), but its run folder
// and the empty cgroup folders of its nodes stay. Each run folder names its owner, and the next run
// removes the folders whose owner is gone.

/** mkdtemp prefix of every run folder (`<baseDir>/vgpu-warden-rn-XXXXXX`). */
export const RUN_FOLDER_PREFIX = 'vgpu-warden-rn-';
/** The file in a run folder that names the process the folder belongs to. */
export const OWNER_FILE = 'owner';

/** The process that owns a run folder: a pid alone would match whatever process reuses it later. */
export interface RunFolderOwner {
  pid: number;
  /** Field 22 of /proc/<pid>/stat: clock ticks after boot at which the process started. */
  startTime: number;
  /** `pid:[inode]` of the owner's pid namespace; a pid means nothing outside it. */
  pidNamespace?: string;
}

/** A run folder's owner could not be read from /proc or recorded. */
export class RunFolderOwnerError extends RealNodeError {}

export interface StatStart {
  state: string;
  startTime: number;
}

/**
 * State and start time from a /proc/<pid>/stat line. The command name in parentheses may hold
 * spaces and ')', so fields are counted from the last ')': state is field 3, start time field 22.
 */
export function parseStatStart(statLine: string): StatStart | undefined {
  const end = statLine.lastIndexOf(')');
  if (end < 0 || statLine.indexOf('(') > end) return undefined;
  const fields = statLine
    .slice(end + 1)
    .trim()
    .split(/\s+/);
  const state = fields[0];
  const startTime = fields[22 - 3];
  if (state === undefined || state === '' || startTime === undefined || !/^\d+$/.test(startTime)) return undefined;
  return { state, startTime: Number(startTime) };
}

export function formatOwner(owner: RunFolderOwner): string {
  return `${JSON.stringify(owner)}\n`;
}

/** The owner named by an owner file's text, or undefined when the text is not one (e.g. half written). */
export function parseOwner(text: string): RunFolderOwner | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const { pid, startTime, pidNamespace } = value as Record<string, unknown>;
  const count = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
  if (!count(pid) || pid === 0 || !count(startTime)) return undefined;
  if (pidNamespace !== undefined && typeof pidNamespace !== 'string') return undefined;
  return pidNamespace === undefined ? { pid, startTime } : { pid, startTime, pidNamespace };
}

export type IsAlive = (pid: number, startTime: number) => boolean;

export type OwnerVerdict = { gone: true; owner: RunFolderOwner } | { gone: false; reason: string };

/**
 * Whether the owner of a run folder is gone, from its owner file's text (undefined: no such file).
 * Anything unclear counts as alive: a folder is removed only when its owner is known to be gone.
 */
export function judgeOwner(
  ownerText: string | undefined,
  isAlive: IsAlive,
  ownPidNamespace: string | undefined,
): OwnerVerdict {
  if (ownerText === undefined) return { gone: false, reason: 'no owner file' };
  const owner = parseOwner(ownerText);
  if (owner === undefined) return { gone: false, reason: 'owner file unreadable' };
  if (owner.pidNamespace !== undefined && ownPidNamespace !== undefined && owner.pidNamespace !== ownPidNamespace) {
    return { gone: false, reason: `owner pid ${owner.pid} is in another pid namespace (${owner.pidNamespace})` };
  }
  if (isAlive(owner.pid, owner.startTime)) return { gone: false, reason: `owner pid ${owner.pid} is alive` };
  return { gone: true, owner };
}

/** Mount points (field 5) of mountinfo text, with its octal escapes undone. */
export function parseMountPoints(mountinfo: string): string[] {
  return mountinfo
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((point): point is string => point !== undefined)
    .map(unescapeMountPath);
}

// ---- I/O edge ----

const errorCode = (error: unknown) => (error as NodeJS.ErrnoException | undefined)?.code;

const gone = (error: unknown) => errorCode(error) === 'ENOENT' || errorCode(error) === 'ESRCH';

export function readPidNamespace(pid: number | 'self' = 'self', procDir = '/proc'): string | undefined {
  try {
    return readlinkSync(`${procDir}/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}

/**
 * The default isAlive: `pid` runs and started at `startTime` (a later start is pid reuse). A
 * zombie has exited. When /proc cannot tell (unreadable, unparsable), the owner counts as alive.
 */
export function isOwnerAlive(pid: number, startTime: number, procDir = '/proc'): boolean {
  let text: string;
  try {
    text = readFileSync(`${procDir}/${pid}/stat`, 'utf8');
  } catch (error) {
    return !gone(error);
  }
  const stat = parseStatStart(text);
  if (stat === undefined) return true;
  return stat.state !== 'Z' && stat.state !== 'X' && stat.startTime === startTime;
}

/** This process as the owner of a run folder. */
export function currentProcessOwner(procDir = '/proc'): RunFolderOwner {
  const file = `${procDir}/${process.pid}/stat`;
  let stat: StatStart | undefined;
  try {
    stat = parseStatStart(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new RunFolderOwnerError(`could not read ${file}`, { cause: error });
  }
  if (stat === undefined) throw new RunFolderOwnerError(`no start time for this process in ${file}`);
  const pidNamespace = readPidNamespace('self', procDir);
  return pidNamespace === undefined
    ? { pid: process.pid, startTime: stat.startTime }
    : { pid: process.pid, startTime: stat.startTime, pidNamespace };
}

/** Writes `<runDir>/owner`. A half-written file reads as unreadable, which keeps the folder: safe. */
export function writeOwner(runDir: string, self: RunFolderOwner): void {
  const file = join(runDir, OWNER_FILE);
  try {
    writeFileSync(file, formatOwner(self));
  } catch (error) {
    throw new RunFolderOwnerError(`could not write the owner of run folder ${runDir}`, { cause: error });
  }
}

export interface SweepOptions {
  /** The folder run folders are made in (mkdtemp). */
  baseDir: string;
  /** Every cgroup hierarchy (cgroupHierarchies()); a node's cgroup root is removed in each. */
  hierarchies: readonly string[];
  isAlive?: IsAlive;
  /**
   * This process's pid namespace; an owner recorded in another one is left alone. Default: read from
   * /proc; given as undefined, not compared.
   */
  pidNamespace?: string;
  /** Default removeCgroupRootSync (which retries for 2 s while the kernel reaps the last processes). */
  removeCgroupRoot?: (root: string, hierarchies: readonly string[]) => void;
  /**
   * Mount points visible here; a run folder with one inside is never removed recursively. Default:
   * /proc/self/mountinfo.
   */
  mountPoints?: () => readonly string[];
}

export interface KeptRunFolder {
  dir: string;
  /** `owner`: the owner may be alive or is unknown (normal); `failed`: the owner is gone but removal failed. */
  kind: 'owner' | 'failed';
  reason: string;
}

export interface SweepReport {
  /** Run folders removed, together with their nodes' cgroup folders. */
  removed: string[];
  kept: KeptRunFolder[];
}

const defaultMountPoints = () => parseMountPoints(readFileSync('/proc/self/mountinfo', 'utf8'));

// Kubernetes node names start with a letter or digit; dot folders (.image-build-*) are not nodes.
const NODE_FOLDER = /^[a-z0-9]/;

/** The owner file's text, or undefined when the run folder has none. */
function readOwnerText(dir: string): string | undefined {
  const file = join(dir, OWNER_FILE);
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return undefined;
    throw new RunFolderOwnerError(`could not read ${file}`, { cause: error });
  }
}

/** Folder names in a run folder that can be nodes, or undefined when it cannot be listed. */
function nodeFolders(dir: string): string[] | undefined {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((node) => node.isDirectory() && NODE_FOLDER.test(node.name))
      .map((node) => node.name);
  } catch {
    return undefined;
  }
}

/** The run folders of `baseDir` (none when it does not exist). */
function runFolders(baseDir: string): string[] {
  let entries;
  try {
    entries = readdirSync(baseDir, { withFileTypes: true });
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return [];
    throw new RunFolderOwnerError(`could not list ${baseDir} for leftover run folders`, { cause: error });
  }
  return (
    entries
      // withFileTypes does not follow symlinks: a link named like a run folder is not one.
      .filter((entry) => entry.name.startsWith(RUN_FOLDER_PREFIX) && entry.isDirectory())
      .map((entry) => join(baseDir, entry.name))
  );
}

/** judgeOwner on a run folder's owner file; an owner that cannot be read is unknown, so kept. */
function ownerVerdict(dir: string, isAlive: IsAlive, ownNamespace: string | undefined): OwnerVerdict {
  try {
    return judgeOwner(readOwnerText(dir), isAlive, ownNamespace);
  } catch (error) {
    return { gone: false, reason: `owner unknown: ${errorChain(error)}` };
  }
}

/** What removing a leftover run folder needs. */
interface Removal {
  hierarchies: readonly string[];
  removeRoot: (root: string, hierarchies: readonly string[]) => void;
  /** Node names a kept run folder also has: maybe a live node's, so their cgroups are left alone. */
  namesInUse: ReadonlySet<string>;
  /** The mount points visible here (read when first needed, and kept once read). */
  mountPoints: () => readonly string[];
}

/**
 * Removes a leftover run folder, after the cgroup roots of its nodes: undefined once it is gone,
 * otherwise why it is kept.
 */
function removeLeftover(dir: string, removal: Removal): string | undefined {
  // rm -r would go through a mount into whatever it shows.
  let mounts;
  try {
    mounts = removal.mountPoints();
  } catch (error) {
    return `could not list mounts: ${errorChain(error)}`;
  }
  const inside = mounts.filter((point) => point === dir || point.startsWith(dir + sep));
  if (inside.length > 0) return `mounts inside: ${inside.join(', ')}`;
  const nodes = nodeFolders(dir);
  if (nodes === undefined) return 'could not list its node folders';
  const failures = removeNodeCgroups(
    nodes.filter((name) => !removal.namesInUse.has(name)),
    removal,
  );
  if (failures.length > 0) return failures.join('; ');
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch (error) {
    return `could not remove: ${errorChain(error)}`;
  }
  return undefined;
}

/** Removes the cgroup root of each node in every hierarchy: what failed, and what stayed. */
function removeNodeCgroups(nodes: readonly string[], { removeRoot, hierarchies }: Removal): string[] {
  const failures: string[] = [];
  for (const node of nodes) {
    const root = cgroupRootFor(node);
    try {
      removeRoot(root, hierarchies);
    } catch (error) {
      failures.push(`${root}: ${errorChain(error)}`);
      continue;
    }
    const left = cgroupTree(root, hierarchies);
    if (left.length > 0) failures.push(`cgroups still present (a process inside?): ${left.join(', ')}`);
  }
  return failures;
}

/**
 * Removes every `vgpu-warden-rn-*` folder of `baseDir` whose owner is gone, after the cgroup root of
 * each of its node subfolders. Never throws for one folder: what cannot be judged or removed is
 * kept and reported. A folder whose cgroups stay (a process still inside: EBUSY) is kept as well.
 * A node name that a kept run folder also has is a live node's, maybe: its cgroups are left alone.
 */
export function sweepLeftoverRunFolders(options: SweepOptions): SweepReport {
  const isAlive = options.isAlive ?? ((pid, startTime) => isOwnerAlive(pid, startTime));
  const ownNamespace = 'pidNamespace' in options ? options.pidNamespace : readPidNamespace();
  const report: SweepReport = { removed: [], kept: [] };
  const leftovers: string[] = [];
  const namesInUse = new Set<string>();
  for (const dir of runFolders(options.baseDir)) {
    const verdict = ownerVerdict(dir, isAlive, ownNamespace);
    if (verdict.gone) {
      leftovers.push(dir);
    } else {
      report.kept.push({ dir, kind: 'owner', reason: verdict.reason });
      for (const name of nodeFolders(dir) ?? []) namesInUse.add(name);
    }
  }
  let mounts: readonly string[] | undefined;
  const removal: Removal = {
    hierarchies: options.hierarchies,
    removeRoot:
      options.removeCgroupRoot ??
      ((root, all) => {
        removeCgroupRootSync(root, all);
      }),
    namesInUse,
    mountPoints: () => (mounts ??= (options.mountPoints ?? defaultMountPoints)()),
  };
  for (const dir of leftovers) {
    const reason = removeLeftover(dir, removal);
    if (reason === undefined) report.removed.push(dir);
    else report.kept.push({ dir, kind: 'failed', reason });
  }
  return report;
}

/** One progress line when the sweep removed something or failed to; undefined when it has nothing to say. */
export function describeSweep(report: SweepReport): string | undefined {
  const failed = report.kept.filter((kept) => kept.kind === 'failed');
  if (report.removed.length === 0 && failed.length === 0) return undefined;
  const parts: string[] = [];
  if (report.removed.length > 0)
    parts.push(`removed ${report.removed.length} leftover run folder(s) of gone runs: ${report.removed.join(', ')}`);
  if (failed.length > 0)
    parts.push(
      `kept ${failed.length} of gone runs: ${failed.map((kept) => `${kept.dir} (${kept.reason})`).join(', ')}`,
    );
  return parts.join('; ');
}
