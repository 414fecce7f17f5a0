import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { HostProcess, ProcessHost } from './process-host.js';
import { isRunning, readProcessStat, waitForDescendant, waitUntilGone, waitUntilGoneSync } from './process-table.js';
import { RealNodeError } from './real-node-error.js';
import { waitForExit } from './wait-for-exit.js';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The kernel settings kubelet (1.30 to 1.37) checks at start and writes when they differ (a failed write is
 * fatal), with the values it wants: k8s.io/kubernetes/pkg/kubelet/cm/container_manager_linux.go
 * setupKernelTunables and k8s.io/component-helpers/node/util/sysctl. Keys are /proc/sys paths.
 */
export const KUBELET_KERNEL_SETTINGS: Readonly<Record<string, number>> = {
  'vm/overcommit_memory': 1,
  'vm/panic_on_oom': 0,
  'kernel/panic': 10,
  'kernel/panic_on_oops': 1,
  'kernel/keys/root_maxkeys': 1_000_000,
  'kernel/keys/root_maxbytes': 25_000_000,
};

/**
 * Runs as PID 1 of the node's pid namespace, inside its own mount namespace (private propagation,
 * so nothing mounted here reaches the host): it hides the host folders kubelet and containerd write
 * to by fixed paths, shows kubelet the kernel settings it wants, then stays as the init that
 * reaps orphans (runc shims re-parent to it). When it dies the kernel kills every process of the
 * namespace, pods included, and the mounts go with the namespace.
 *   $1 ready file, $2 host device-plugin folder, then pairs: file with a value, /proc/sys path.
 */
export const HOLDER_SCRIPT = `set -eu
ready=$1; plugins=$2; shift 2
# kubelet writes /var/lib/kubelet/device-plugins (kubelet.sock is hard-coded there) and deletes
# every other socket in it; the bind mount gives this node's plugin a host folder of its own.
mount -t tmpfs -o mode=0755 vgpu-warden-node /var/lib
mkdir -p /var/lib/kubelet/device-plugins
mount --bind "$plugins" /var/lib/kubelet/device-plugins
# /var/log/containers symlinks; shim sockets in /run/containerd/s (hard-coded in containerd 1.6).
# All of /run, not just /run/containerd: that folder would have to be created on the host first.
mount -t tmpfs -o mode=0755 vgpu-warden-node /var/log
mount -t tmpfs -o mode=0755 vgpu-warden-node /run
mkdir -p /run/containerd
while [ $# -gt 0 ]; do mount --bind "$1" "/proc/sys/$2"; shift 2; done
: > "$ready"
trap 'exit 0' TERM INT
while :; do sleep 3600 & wait $! || true; done
`;

export interface NodeNamespaceOptions {
  name: string;
  unshare: string;
  nsenter: string;
  devicePluginDir: string;
  sysctlDir: string;
  readyFile: string;
  logFile: string;
  cwd: string;
  timeoutMs: number;
  processes: ProcessHost;
}

/**
 * A node's mount and pid namespaces, held by a small shell under `unshare`. Processes started
 * through enterCommand() live in both; kill() takes all of them down at once.
 */
export class NodeNamespace {
  private constructor(
    readonly holder: HostProcess,
    /** Host pid of the namespace's init (the holder shell). */
    readonly initPid: number,
    private readonly unsharePid: number,
    private readonly nsenter: string,
  ) {}

  static async start(options: NodeNamespaceOptions): Promise<NodeNamespace> {
    mkdirSync(options.devicePluginDir, { recursive: true });
    mkdirSync(options.sysctlDir, { recursive: true });
    const shadows: string[] = [];
    for (const [key, value] of Object.entries(KUBELET_KERNEL_SETTINGS)) {
      const file = join(options.sysctlDir, key.replaceAll('/', '.'));
      writeFileSync(file, `${value}\n`);
      shadows.push(file, key);
    }
    const holder = options.processes.start({
      name: `namespace of ${options.name}`,
      command: options.unshare,
      // --kill-child: should unshare die first, its child (the init) is killed with it.
      args: [
        '--mount',
        '--pid',
        '--fork',
        '--kill-child',
        '--mount-proc',
        '--propagation',
        'private',
        'bash',
        '-c',
        HOLDER_SCRIPT,
        'vgpu-warden-node',
        options.readyFile,
        options.devicePluginDir,
        ...shadows,
      ],
      logFile: options.logFile,
      cwd: options.cwd,
    });
    const fail = async (message: string): Promise<never> => {
      holder.killNow();
      await waitForExit(holder, 10_000);
      throw new RealNodeError(`${message}; last log lines (${options.logFile}):\n${holder.lastLogLines()}`);
    };
    // The runner's guard → unshare → the namespace's init.
    const unsharePid = await waitForDescendant(holder.pid, 1, 'unshare', options.timeoutMs);
    const initPid =
      unsharePid === undefined ? undefined : await waitForDescendant(unsharePid, 1, 'bash', options.timeoutMs);
    if (unsharePid === undefined || initPid === undefined)
      return fail(`the namespace of ${options.name} did not start`);
    const deadline = Date.now() + options.timeoutMs;
    while (!existsSync(options.readyFile)) {
      if (!isRunning(initPid) || Date.now() > deadline)
        return fail(`the namespace of ${options.name} did not finish its mounts`);
      await sleep(10);
    }
    return new NodeNamespace(holder, initPid, unsharePid, options.nsenter);
  }

  /** `command args` run inside the node's mount and pid namespaces (nsenter forks it into the pid namespace). */
  enterCommand(command: string, args: readonly string[]): { command: string; args: string[] } {
    return { command: this.nsenter, args: ['-t', String(this.initPid), '-m', '-p', '--', command, ...args] };
  }

  get alive(): boolean {
    return isRunning(this.initPid);
  }

  /**
   * SIGKILL to the init: the kernel then kills every process of the pid namespace (kubelet,
   * containerd, shims, pods) and unshare returns once the last of them is reaped. `nudge` runs
   * every 100 ms meanwhile: members whose parent is outside the namespace (what nsenter started)
   * are reaped by that parent, and the caller may have to wake it.
   */
  async kill(timeoutMs = 10_000, nudge: () => void = () => undefined): Promise<void> {
    this.signalInit();
    const deadline = Date.now() + timeoutMs;
    while (!(await waitUntilGone([this.initPid, this.unsharePid], 100))) {
      if (Date.now() >= deadline)
        throw new RealNodeError(
          `the namespace init ${this.initPid} (unshare ${this.unsharePid}) still runs ${timeoutMs} ms after SIGKILL`,
        );
      nudge();
    }
    if (!(await waitForExit(this.holder, timeoutMs)))
      throw new RealNodeError(`unshare of the namespace (guard ${this.holder.pid}) still runs after its init died`);
  }

  killSync(timeoutMs = 2000): void {
    this.signalInit();
    this.holder.killNow();
    waitUntilGoneSync([this.initPid, this.unsharePid], timeoutMs);
  }

  private signalInit(): void {
    // Only while it is still unshare's child: once both are gone the pid may name someone else.
    if (readProcessStat(this.initPid)?.ppid !== this.unsharePid) return;
    try {
      process.kill(this.initPid, 'SIGKILL');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  }
}
