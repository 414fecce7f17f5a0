import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CoordinationV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { HostProcess, ProcessHost, ShutdownRegistry } from './process-host.js';
import { cgroupHierarchies, createCgroupRoot, removeCgroupRoot, removeCgroupRootSync } from './cgroup-roots.js';
import { LOOPBACK_CNI_CONFLIST, renderContainerdConfig } from './containerd-config.js';
import { buildKubeletConfiguration, kubeletArgs } from './kubelet-config.js';
import { ensureNodeImage, SANDBOX_IMAGE } from './node-image.js';
import { NodeNamespace } from './node-namespace.js';
import { cgroupRootFor, nodeLayout, type NodeLayout } from './node-layout.js';
import { deleteNodeObjects, initializeNode, waitForNodeReady, waitForNodeRegistered } from './node-registration.js';
import type { RealNodeTools } from './node-tools.js';
import { isRunning, readProcessStat, waitForDescendant } from './process-table.js';
import { RealNodeError } from './real-node-error.js';
import { runCommand } from './run-command.js';
import { waitForExit } from './wait-for-exit.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** What a node needs from the control plane; ControlPlane provides both. */
export interface NodeClusterAccess {
  readonly caPem: string;
  /** A kubeconfig authenticating as system:node:<nodeName> (group system:nodes). */
  issueNodeKubeconfig(nodeName: string): string;
}

export interface RealNodeOptions {
  /** DNS label, at most 63 characters (it is also the kubernetes.io/hostname label). */
  nodeName: string;
  /** An existing folder; the node lives in `<runDir>/<nodeName>`, which stop() removes. */
  runDir: string;
  cluster: NodeClusterAccess;
  /** An admin client: it plays the cloud provider (addresses, taint) and deletes the Node at stop. */
  kubeConfig: KubeConfig;
  tools: RealNodeTools;
  /** Starts the node's programs (the caller's process runner). */
  processes: ProcessHost;
  /** Extra node labels (kubelet --node-labels; NodeRestriction limits kubernetes.io ones). */
  labels?: Readonly<Record<string, string>>;
  /** When given, the node is stopped on SIGINT/SIGTERM and killed on process exit. */
  shutdownHooks?: ShutdownRegistry;
  /** Upper bound for each start step (namespace, containerd, kubelet, Ready). */
  startTimeoutMs?: number;
  /**
   * Runs once kubelet answers its health check, before the wait for Ready: e.g. start a device plugin
   * on devicePluginDir.
   */
  onKubeletStarted?: (node: RealNode) => void | Promise<void>;
  progress?: (line: string) => void;
}

interface NodeProcess {
  process: HostProcess;
  /** Host pid of the program itself (not of nsenter or the guard). */
  pid: number;
  /** Host pid of the nsenter that forked it (outside the namespace, it is the program's parent). */
  nsenterPid: number;
}

const NODE_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const NODE_ADDRESS = '127.0.0.1';
const EXIT_TIMEOUT_MS = 10_000;
// kubelet's server.go logs this every 5 s, and keeps running, when its healthz port is taken.
const KUBELET_HEALTHZ_FAILURE_LOG = 'Failed to start healthz server';
// containerd finds containerd-shim-runc-v2 on PATH and the shim finds runc.
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * A real Kubernetes node on this machine: its own containerd and kubelet (the version under test,
 * 1.30 to 1.37) in a mount and pid namespace of their own, registered with the control plane as
 * `nodeName` with the InternalIP 127.0.0.1. Only hostNetwork pods run on it (loopback CNI), with images TEST_IMAGE and
 * SANDBOX_IMAGE (imagePullPolicy: Never). stop() leaves nothing behind: no process, cgroup, mount,
 * file outside the run folder or changed kernel setting.
 */
export class RealNode {
  readonly nodeName: string;
  readonly cgroupRoot: string;
  private readonly layout: NodeLayout;
  private readonly core: CoreV1Api;
  private readonly coordination: CoordinationV1Api;
  private readonly hierarchies = cgroupHierarchies();
  private readonly timeoutMs: number;
  private readonly progress: (line: string) => void;
  private readonly env: NodeJS.ProcessEnv;
  private namespace: NodeNamespace | undefined;
  private containerd: NodeProcess | undefined;
  private kubelet: NodeProcess | undefined;
  private ports: { kubelet: number; healthz: number } | undefined;
  private kubeletEverStarted = false;
  private unregisterHooks: (() => void) | undefined;
  private stopped: Promise<void> | undefined;
  private killedSync = false;

  private constructor(private readonly options: RealNodeOptions) {
    this.nodeName = options.nodeName;
    this.cgroupRoot = cgroupRootFor(options.nodeName);
    this.layout = nodeLayout(options.runDir, options.nodeName);
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.coordination = options.kubeConfig.makeApiClient(CoordinationV1Api);
    this.timeoutMs = options.startTimeoutMs ?? 60_000;
    this.progress = options.progress ?? (() => undefined);
    this.env = { ...process.env, PATH: `${process.env.PATH ?? ''}:${SYSTEM_PATH}` };
  }

  static async start(options: RealNodeOptions): Promise<RealNode> {
    if (!NODE_NAME.test(options.nodeName))
      throw new RealNodeError(
        `node name ${JSON.stringify(options.nodeName)} is not a DNS label of at most 63 characters`,
      );
    const node = new RealNode(options);
    try {
      // Fails when the folder exists: two nodes of one name would share sockets and cgroups.
      mkdirSync(node.layout.nodeDir);
    } catch (error) {
      throw new RealNodeError(`could not create the node folder ${node.layout.nodeDir}`, { cause: error });
    }
    node.unregisterHooks = options.shutdownHooks?.register({
      name: `real node ${options.nodeName}`,
      stop: () => node.stop(),
      killSync: () => {
        node.killSync();
      },
    });
    try {
      await node.boot();
    } catch (error) {
      await node.stop().catch((stopError: unknown) => {
        node.progress(`${node.nodeName}: teardown after a failed start: ${(stopError as Error).message}`);
      });
      throw new RealNodeError(`real node ${options.nodeName} did not start: ${(error as Error).message}`, {
        cause: error,
      });
    }
    return node;
  }

  /**
   * Host folder of /var/lib/kubelet/device-plugins inside the node: kubelet.sock is here, and a device
   * plugin serves its socket here.
   */
  get devicePluginDir(): string {
    return this.layout.devicePluginDir;
  }

  get kubeletSocket(): string {
    return join(this.layout.devicePluginDir, 'kubelet.sock');
  }

  get nodeDir(): string {
    return this.layout.nodeDir;
  }

  get containerdSocket(): string {
    return this.layout.containerdSocket;
  }

  get logFiles(): Readonly<NodeLayout['logs']> {
    return this.layout.logs;
  }

  /** Host pid of kubelet, undefined while it is not running. */
  get kubeletPid(): number | undefined {
    return this.kubelet !== undefined && isRunning(this.kubelet.pid) ? this.kubelet.pid : undefined;
  }

  get containerdPid(): number | undefined {
    return this.containerd !== undefined && isRunning(this.containerd.pid) ? this.containerd.pid : undefined;
  }

  /** Host pid of the node's namespace init: killing it kills everything of the node. */
  get namespacePid(): number | undefined {
    return this.namespace?.alive === true ? this.namespace.initPid : undefined;
  }

  get kubeletPort(): number | undefined {
    return this.ports?.kubelet;
  }

  private async boot(): Promise<void> {
    const started = Date.now();
    const step = (what: string) => {
      this.progress(`${this.nodeName}: ${what} after ${Date.now() - started} ms`);
    };
    const { layout, options } = this;
    // Built once per run folder; in parallel with the namespace and containerd.
    const image = ensureNodeImage(options.runDir, options.tools);
    image.catch(() => undefined);
    for (const dir of [
      layout.cniConfDir,
      layout.podLogsDir,
      layout.volumePluginDir,
      layout.kubeletRoot,
      layout.kubeletCertDir,
    ])
      mkdirSync(dir, { recursive: true });
    writeFileSync(join(layout.cniConfDir, '10-loopback.conflist'), JSON.stringify(LOOPBACK_CNI_CONFLIST));
    writeFileSync(
      layout.containerdConfig,
      renderContainerdConfig({
        root: layout.containerdRoot,
        state: layout.containerdState,
        socket: layout.containerdSocket,
        runcRoot: layout.runcRoot,
        cniBinDir: options.tools.cniBinDir,
        cniConfDir: layout.cniConfDir,
        sandboxImage: SANDBOX_IMAGE,
      }),
    );
    writeFileSync(layout.clientCaFile, options.cluster.caPem);
    writeFileSync(layout.kubeletKubeconfig, options.cluster.issueNodeKubeconfig(this.nodeName), { mode: 0o600 });
    await this.writeKubeletConfig();
    createCgroupRoot(this.cgroupRoot, this.hierarchies);

    this.namespace = await NodeNamespace.start({
      name: this.nodeName,
      unshare: options.tools.unshare,
      nsenter: options.tools.nsenter,
      devicePluginDir: layout.devicePluginDir,
      sysctlDir: layout.sysctlDir,
      readyFile: layout.namespaceReadyFile,
      logFile: layout.logs.namespace,
      cwd: layout.nodeDir,
      timeoutMs: this.timeoutMs,
      processes: options.processes,
    });
    step('namespace ready');
    await this.startContainerd();
    step('containerd ready');
    // kubelet needs the images only for pods, not to register and go Ready: import meanwhile.
    const imported = image.then((archive) =>
      this.exec(options.tools.ctr, ['-a', layout.containerdSocket, '-n', 'k8s.io', 'images', 'import', archive]),
    );
    imported.catch(() => undefined);
    const kubeletStarted = new Date();
    await this.startKubelet();
    step('kubelet healthy');
    await imported;
    step('images imported');
    await options.onKubeletStarted?.(this);
    await waitForNodeRegistered(this.core, this.nodeName, this.nodeWait());
    await initializeNode(this.core, this.nodeName, { address: NODE_ADDRESS });
    step('node registered and initialized');
    await waitForNodeReady(this.core, this.nodeName, { ...this.nodeWait(), since: kubeletStarted });
    step('node Ready');
  }

  private nodeWait(): { timeoutMs: number; abortReason: () => string | undefined } {
    return {
      timeoutMs: this.timeoutMs,
      abortReason: () =>
        this.kubelet?.process.hasExited === true
          ? `kubelet exited; last log lines (${this.layout.logs.kubelet}):\n${this.kubelet.process.lastLogLines()}`
          : undefined,
    };
  }

  /** Runs a short command inside the node's namespaces (e.g. ctr against its containerd) and returns its stdout. */
  exec(command: string, args: readonly string[], timeoutMs = 30_000): Promise<string> {
    const entered = this.requireNamespace().enterCommand(command, args);
    return runCommand(entered.command, entered.args, { timeoutMs });
  }

  /** Starts containerd (again, after killContainerd) and waits until it answers on its socket. */
  async startContainerd(): Promise<void> {
    if (this.containerdPid !== undefined) throw new RealNodeError(`containerd of ${this.nodeName} already runs`);
    const child = await this.startInNamespace(
      'containerd',
      this.options.tools.containerd,
      ['--config', this.layout.containerdConfig],
      this.layout.logs.containerd,
    );
    this.containerd = child;
    const deadline = Date.now() + this.timeoutMs;
    let last = 'socket not created';
    for (;;) {
      if (child.process.hasExited)
        throw new RealNodeError(
          `containerd of ${this.nodeName} exited; last log lines (${this.layout.logs.containerd}):\n` +
            child.process.lastLogLines(),
        );
      if (existsSync(this.layout.containerdSocket)) {
        try {
          await this.exec(this.options.tools.ctr, ['-a', this.layout.containerdSocket, 'version'], 5000);
          return;
        } catch (error) {
          last = (error as Error).message;
        }
      }
      if (Date.now() >= deadline)
        throw new RealNodeError(
          `containerd of ${this.nodeName} not ready after ${this.timeoutMs} ms (last: ${last}); ` +
            `log: ${this.layout.logs.containerd}`,
        );
      await sleep(20);
    }
  }

  /** Picks kubelet's two loopback ports anew and writes its configuration with them. */
  private async writeKubeletConfig(): Promise<void> {
    const { layout } = this;
    const [kubeletPort = 0, healthzPort = 0] = await this.options.processes.freePorts(2);
    this.ports = { kubelet: kubeletPort, healthz: healthzPort };
    writeFileSync(
      layout.kubeletConfig,
      JSON.stringify(
        buildKubeletConfiguration({
          port: kubeletPort,
          healthzPort,
          cgroupRoot: this.cgroupRoot,
          containerdSocket: layout.containerdSocket,
          podLogsDir: layout.podLogsDir,
          volumePluginDir: layout.volumePluginDir,
          clientCaFile: layout.clientCaFile,
        }),
        null,
        2,
      ),
    );
  }

  /**
   * Starts kubelet (again, after killKubelet) and waits until its health check answers. When a port
   * of its was taken meanwhile (kubelet exits for its main port, and only logs, forever, for its
   * healthz port), it is killed and started again on fresh ports.
   */
  async startKubelet(): Promise<void> {
    if (this.kubeletPid !== undefined) throw new RealNodeError(`kubelet of ${this.nodeName} already runs`);
    await this.options.processes.retryWhilePortTaken(
      async (attempt) => {
        // A restart keeps kubelet's ports; only a try after a taken port picks new ones.
        if (attempt > 1) await this.writeKubeletConfig();
        await this.startKubeletOnce();
      },
      (line) => {
        this.progress(`${this.nodeName}: kubelet: ${line}`);
      },
    );
  }

  /** One start; a kubelet whose port was taken is killed again before the port-taken error goes up. */
  private async startKubeletOnce(): Promise<void> {
    const { layout } = this;
    const args = kubeletArgs({
      configFile: layout.kubeletConfig,
      kubeconfig: layout.kubeletKubeconfig,
      rootDir: layout.kubeletRoot,
      certDir: layout.kubeletCertDir,
      nodeName: this.nodeName,
      labels: this.options.labels,
    });
    const child = await this.startInNamespace('kubelet', this.options.tools.kubelet, args, layout.logs.kubelet);
    this.kubelet = child;
    this.kubeletEverStarted = true;
    try {
      await child.process.untilReady({
        url: `http://127.0.0.1:${this.ports?.healthz ?? 0}/healthz`,
        timeoutMs: this.timeoutMs,
        portFailureLog: KUBELET_HEALTHZ_FAILURE_LOG,
      });
    } catch (error) {
      if (this.options.processes.portTaken(error)) await this.killKubelet();
      throw error;
    }
  }

  /** SIGKILL to kubelet alone (a crash): containerd, the pods and the Node object stay. */
  async killKubelet(): Promise<void> {
    await this.killProgram(this.kubelet);
  }

  /** SIGKILL to containerd alone: its shims and the pods keep running, kubelet reports the runtime down. */
  async killContainerd(): Promise<void> {
    await this.killProgram(this.containerd);
  }

  /** Kills kubelet (SIGKILL), keeps it down `downMs`, starts it again and waits until the node reports Ready again. */
  async restartKubelet(options: { downMs?: number } = {}): Promise<void> {
    await this.killKubelet();
    await sleep(options.downMs ?? 0);
    const restarted = new Date();
    await this.startKubelet();
    await waitForNodeReady(this.core, this.nodeName, { ...this.nodeWait(), since: restarted });
  }

  /** Freezes kubelet (SIGSTOP): it stops syncing pods and reporting status, its connections stay open. */
  pause(): void {
    const pid = this.kubeletPid;
    if (pid === undefined) throw new RealNodeError(`kubelet of ${this.nodeName} is not running`);
    signal(pid, 'SIGSTOP');
  }

  /**
   * Thaws a paused kubelet (SIGCONT). nsenter, kubelet's parent, waits with WUNTRACED and stops
   * itself when kubelet stops; left stopped it would never reap kubelet, and the namespace's
   * teardown waited on that zombie until the guard's SIGKILL. So it is continued too.
   */
  resume(): void {
    // A no-op when kubelet is not running, so clean-up code may resume unconditionally.
    const pid = this.kubeletPid;
    if (pid === undefined) return;
    signal(pid, 'SIGCONT');
    continueLauncher(this.kubelet);
  }

  /**
   * Kills everything of the node at once (SIGKILL to the namespace init), removes its cgroups
   * bottom-up, deletes its Node and Lease objects and removes the node folder. Idempotent.
   */
  stop(): Promise<void> {
    this.stopped ??= this.teardown();
    return this.stopped;
  }

  /** stop() without waiting on anything asynchronous, for `process.on('exit')`. */
  killSync(): void {
    if (this.killedSync) return;
    this.killedSync = true;
    this.kubelet?.process.killNow();
    this.containerd?.process.killNow();
    this.namespace?.killSync();
    removeCgroupRootSync(this.cgroupRoot, this.hierarchies);
    rmSync(this.layout.nodeDir, { recursive: true, force: true });
  }

  private async teardown(): Promise<void> {
    const problems: Error[] = [];
    const note = (error: unknown) => {
      problems.push(error instanceof Error ? error : new Error(String(error)));
    };
    const started = Date.now();
    const step = (what: string) => {
      this.progress(`${this.nodeName}: ${what} after ${Date.now() - started} ms of teardown`);
    };
    // The namespace is gone only once every member is reaped, and kubelet and containerd are
    // reaped by their nsenter, outside it. An nsenter stops itself when its child stops (a paused
    // kubelet), so it is continued until the end. Killing the nsenters first instead hands their
    // children to the host's init, which reaped them only after 1-2 s here.
    const nudge = () => {
      for (const child of [this.kubelet, this.containerd]) continueLauncher(child);
    };
    nudge();
    if (this.namespace !== undefined) await this.namespace.kill(EXIT_TIMEOUT_MS, nudge).catch(note);
    for (const child of [this.kubelet, this.containerd]) child?.process.killNow();
    step('namespace gone');
    for (const child of [this.kubelet, this.containerd]) {
      if (child !== undefined && !(await waitForExit(child.process, EXIT_TIMEOUT_MS)))
        note(new RealNodeError(`${child.process.name} (guard ${child.process.pid}) still runs`));
    }
    step('kubelet and containerd gone');
    await removeCgroupRoot(this.cgroupRoot, this.hierarchies).catch(note);
    step('cgroups removed');
    if (this.kubeletEverStarted) {
      // Best effort: at Ctrl-C the control plane may already be gone, and then so is the Node.
      await deleteNodeObjects(this.core, this.coordination, this.nodeName).catch((error: unknown) => {
        this.progress(`${this.nodeName}: could not delete the Node object: ${(error as Error).message}`);
      });
    }
    step('Node deleted');
    try {
      rmSync(this.layout.nodeDir, { recursive: true, force: true });
    } catch (error) {
      note(error);
    }
    step('node folder removed');
    this.unregisterHooks?.();
    if (problems.length > 0) {
      throw new RealNodeError(
        `teardown of node ${this.nodeName} incomplete: ${problems.map((problem) => problem.message).join('; ')}`,
        { cause: problems[0] },
      );
    }
  }

  private async startInNamespace(
    program: 'containerd' | 'kubelet',
    command: string,
    args: string[],
    logFile: string,
  ): Promise<NodeProcess> {
    const entered = this.requireNamespace().enterCommand(command, args);
    const child = this.options.processes.start({
      name: `${program} of ${this.nodeName}`,
      command: entered.command,
      args: entered.args,
      logFile,
      cwd: this.layout.nodeDir,
      env: this.env,
    });
    // The runner's guard → nsenter → the program (nsenter forks it into the pid namespace).
    const pid = await waitForDescendant(child.pid, 2, program, this.timeoutMs);
    const nsenterPid = pid === undefined ? undefined : readProcessStat(pid)?.ppid;
    if (pid === undefined || nsenterPid === undefined) {
      child.killNow();
      await waitForExit(child, EXIT_TIMEOUT_MS);
      throw new RealNodeError(
        `${program} of ${this.nodeName} did not start; last log lines (${logFile}):\n${child.lastLogLines()}`,
      );
    }
    return { process: child, pid, nsenterPid };
  }

  private async killProgram(child: NodeProcess | undefined): Promise<void> {
    if (child === undefined || child.process.hasExited) return;
    signal(child.pid, 'SIGKILL');
    // A paused kubelet's nsenter is stopped too and would never reap it.
    continueLauncher(child);
    if (!(await waitForExit(child.process, EXIT_TIMEOUT_MS)))
      throw new RealNodeError(`${child.process.name} still runs ${EXIT_TIMEOUT_MS} ms after SIGKILL`);
  }

  private requireNamespace(): NodeNamespace {
    if (this.namespace === undefined || this.stopped !== undefined)
      throw new RealNodeError(`node ${this.nodeName} is not running`);
    return this.namespace;
  }
}

/** SIGCONT to the nsenter of a program (see resume()), while it is still there to receive it. */
function continueLauncher(child: NodeProcess | undefined): void {
  if (child !== undefined && !child.process.hasExited) signal(child.nsenterPid, 'SIGCONT');
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}
