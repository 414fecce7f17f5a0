import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  loadYaml,
  type KubeConfig,
  type V1MutatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { type CommandContext, UsageError } from './cli.js';
import { loadConfig } from '../config/load.js';
import { ClusterCache } from '../cluster/cluster-cache.js';
import { kubeSchedulerConfiguration } from '../extender/scheduler-config.js';
import { loadKubeConfig } from '../kube/client.js';
import { KubeNodeLockApi } from '../lock/kube-node-lock-api.js';
import { ControlPlane } from '../local/control-plane.js';
import { DevicePluginSimulator } from '../local/device-plugin-simulator.js';
import { findFreePorts } from '../local/free-port.js';
import { locateBinaries } from '../local/k8s-binaries.js';
import { ShutdownHooks, type ShutdownResource, type ShutdownTarget } from '../local/shutdown-hooks.js';
import { simulatedGpuNode } from '../local/simulated-gpu-node.js';
import { NodeLocks } from '../lock/node-locks.js';
import type { LockRulesConfig } from '../lock/lock-rules.js';
import { EventFeed, kubeEventPages, liveEventSource } from '../local/event-feed.js';
import { LiveView, liveViewOffReason } from '../local/live-view-runner.js';
import { lineStream, logNoteText } from '../local/log-lines.js';
import { PendingPods } from '../local/pending-pods.js';
import { AlternateScreen, type TerminalOutput } from '../local/terminal-screen.js';
import { lockRowFromView } from '../local/view-lock-state.js';
import { runSeedDemo, SEED_VICTIM, type SeedDemoNode } from '../local/seed-demo.js';
import { chooseNodeMode, parseNodeMode, type NodeMode, type NodeModeChoice } from '../local/node-mode.js';
import { hostProcesses } from '../local/host-processes.js';
import type { ControlPlaneBinaries } from '../local/k8s-binaries.js';
import type { RealGpuFleet } from '@vgpu-warden/stand-ins/real-gpu-fleet';
import { describeError } from '../base/errors.js';
import { createLogger } from '../telemetry/logger.js';
import { startServer } from '../serve/start-server.js';
import { GPU_COUNT, GPU_MEMORY } from '../hami/wire.js';
import { sleep } from '../base/abort.js';
import { kubeSources } from '../cluster/kube-list-watch.js';

function positiveInteger(
  flag: string,
  value: string | boolean | string[] | undefined,
  fallback: number,
  max = 1000,
): number {
  if (value === undefined) return fallback;
  const text = String(value);
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > max) {
    throw new UsageError(`invalid --${flag}=${JSON.stringify(text)}: expected a whole number from 1 to ${max}`);
  }
  return Number(text);
}

/** The digest behind the view: the newest Events for "recent events", and pending reasons of this many pods. */
const EVENT_LIMITS = { recent: 200, pods: 1000 };

interface ViewInputs {
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  /** The server's state store: its lock first-seen times are the ones the sweeper judges by. */
  store: ClusterCache;
  pending: PendingPods;
  lockRules: LockRulesConfig;
  terminal: TerminalOutput;
  kubeconfigExport: string;
}

/** The live view over the local cluster, with the event feed it reads; nothing started yet. */
function liveViewOf(inputs: ViewInputs, log: (line: string) => void): { view: LiveView; feed: EventFeed } {
  const feed = new EventFeed({
    source: liveEventSource(inputs.kubeConfig, kubeEventPages(inputs.core), EVENT_LIMITS),
    limits: EVENT_LIMITS,
    log: (level, message) => {
      if (level === 'warn') log(`events: ${message}`);
    },
  });
  const view = new LiveView({
    screen: new AlternateScreen(inputs.terminal),
    kubeconfigExport: inputs.kubeconfigExport,
    sources: {
      nodes: (now) =>
        inputs.store
          .nodeNames()
          .sort()
          .map((name) => ({
            name,
            inventory: inputs.store.inventory(name),
            usage: inputs.store.usageOn(name),
            lock: lockRowFromView(inputs.store.lockView, name, now, inputs.lockRules),
          })),
      pending: () =>
        inputs.pending
          .list()
          .map((pod) => ({ ...pod, reason: feed.digest.reasonFor(pod.namespace, pod.name, pod.uid) })),
      events: () => feed.digest.recent(),
    },
  });
  return { view, feed };
}

/**
 * Why real nodes cannot run here (the stand-ins package not installed, as in the image, or a tool
 * missing), or undefined when they can. The package is reached only here and in startRealNodes,
 * by import(): `serve` never loads it (eslint.config.js, boundary rules).
 */
async function realNodeToolsProblem(binaries: ControlPlaneBinaries): Promise<string | undefined> {
  try {
    const { locateRealNodeTools } = await import('@vgpu-warden/stand-ins/real-node');
    locateRealNodeTools(binaries);
    return undefined;
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ERR_MODULE_NOT_FOUND')
      return (
        'real nodes need the workspace package @vgpu-warden/stand-ins, not installed here ' +
        `(${describeError(error)})`
      );
    return describeError(error);
  }
}

/** A GPU pod for the local nodes: on real nodes it must use the image they hold and the host network. */
function localGpuPod(
  mode: NodeMode,
  container: { image?: string; imagePullPolicy?: string; command: readonly string[] } | undefined,
) {
  return (name: string, node: string) => ({
    metadata: { name, labels: { app: 'seed-demo' } },
    spec: {
      nodeSelector: { 'kubernetes.io/hostname': node },
      ...(mode === 'real'
        ? { hostNetwork: true, automountServiceAccountToken: false, terminationGracePeriodSeconds: 5 }
        : {}),
      containers: [
        {
          name: 'cuda',
          ...(container === undefined
            ? { image: 'nvidia/cuda:12.4.0-base' }
            : { ...container, command: [...container.command] }),
          resources: { limits: { [GPU_COUNT]: '1', [GPU_MEMORY]: '4000' } },
        },
      ],
    },
  });
}

/** NVIDIA_VISIBLE_DEVICES as the container printed it (the real-node container prints its environment first). */
async function visibleDevicesOf(core: CoreV1Api, namespace: string, name: string): Promise<string | undefined> {
  for (let attempt = 0; attempt < 20; attempt++) {
    try {
      const log = await core.readNamespacedPodLog({ name, namespace });
      const found = /^NVIDIA_VISIBLE_DEVICES=(.*)$/m.exec(log)?.[1];
      if (found !== undefined) return found;
    } catch {
      // Running, but the log may not be there yet.
    }
    await sleep(100);
  }
  return undefined;
}

/** What `local` needs from its caller (main.ts): where the repository is, where signals come from, the terminal. */
export interface LocalDeps {
  repoRoot: string;
  shutdownTarget: ShutdownTarget;
  terminal?: TerminalOutput & { isTTY?: boolean };
}

/** The `local` command's flags, checked. */
interface LocalFlags {
  nodeCount: number;
  gpusPerNode: number;
  gpuMemoryMiB: number;
  demo: 'seed' | undefined;
  asked: NodeMode | undefined;
}

function localFlags(flags: CommandContext['flags']): LocalFlags {
  const demo = flags.demo;
  if (demo !== undefined && demo !== 'seed')
    throw new UsageError(`invalid --demo=${JSON.stringify(demo)}: the only demo is "seed"`);
  const askedNodes = flags.nodes;
  const asked = askedNodes === undefined ? undefined : parseNodeMode(String(askedNodes));
  if (askedNodes !== undefined && asked === undefined)
    throw new UsageError(
      `invalid --nodes=${JSON.stringify(String(askedNodes).slice(0, 40))}: expected "real" or "simulated"`,
    );
  return {
    nodeCount: positiveInteger('gpu-nodes', flags['gpu-nodes'], 2),
    gpusPerNode: positiveInteger('gpus-per-node', flags['gpus-per-node'], 4),
    gpuMemoryMiB:
      flags['gpu-memory'] === undefined ? 24576 : positiveInteger('gpu-memory', flags['gpu-memory'], 24576, 1_048_576),
    demo,
    asked,
  };
}

type Settings = ReturnType<CommandContext['config']>;

/** What the run was asked for, and what the machine allows. */
interface LocalPlan {
  options: LocalFlags;
  nodeMode: NodeModeChoice;
  binaries: ControlPlaneBinaries;
}
type RealContainer = Parameters<typeof localGpuPod>[1];

/** The vgpu-warden server of a local run, on free loopback ports. */
interface LocalWarden {
  server: Awaited<ReturnType<typeof startServer>>;
  webhookPort: number;
  extenderPort: number;
}

/**
 * One run of `vgpu-warden local`, step by step (run()): the control plane, vgpu-warden, its webhook
 * registration, the GPU nodes, the device-plugin simulator, kube-scheduler with the extender, then
 * the live view and the demo until Ctrl-C or a crash. What is up is stopped by the shutdown hooks.
 */
class LocalRun {
  private readonly hooks: ShutdownHooks;
  private readonly certDir = mkdtempSync(join(tmpdir(), 'vgpu-warden-local-certs-'));
  private live: { view: LiveView; feed: EventFeed } | undefined;
  /** Filled in as they start, so a stop at any point stops what is up. */
  private readonly started: { simulator?: DevicePluginSimulator; simulatorCache?: ClusterCache } = {};
  private fleet: RealGpuFleet | undefined;
  private realContainer: RealContainer;

  constructor(
    private readonly deps: LocalDeps,
    private readonly io: CommandContext['io'],
    private readonly settings: Settings,
  ) {
    this.hooks = new ShutdownHooks(deps.shutdownTarget, 20_000, (line) => {
      this.leaveView();
      io.stdout(`local: ${line}`);
    });
  }

  /** While the live view is up, what would be printed goes into it (and is printed again when it ends). */
  private readonly print = (line: string): void => {
    if (this.live?.view.isActive === true) this.live.view.note(line);
    else this.io.stdout(line);
  };

  readonly say = (line: string): void => {
    this.print(`local: ${line}`);
  };

  private leaveView(): void {
    for (const line of this.live?.view.stop() ?? []) this.io.stdout(line);
  }

  async run(flags: CommandContext['flags'], plan: LocalPlan): Promise<number> {
    const { options, nodeMode, binaries } = plan;
    this.say(nodeMode.why);
    const plane = await ControlPlane.start({ binaries, shutdownHooks: this.hooks, progress: this.say });
    try {
      const warden = await this.startWarden(plane);
      const wardenHook = this.wardenHook(warden.server);
      // Registered now, so a failure further on stops the server too; registered again once the
      // nodes are up, so that vgpu-warden, the newest, stops first and sees no node vanish.
      const unregisterWarden = this.hooks.register(wardenHook);
      const kubeConfig = loadKubeConfig(plane.kubeconfigPath);
      const core = kubeConfig.makeApiClient(CoreV1Api);
      const caPem = warden.server.keeper.current()?.caBundlePem ?? '';
      await this.registerWebhook(kubeConfig, warden.webhookPort, caPem);
      const nodeNames = Array.from({ length: options.nodeCount }, (_, index) => `gpu-node-${index + 1}`);
      if (nodeMode.mode === 'real') {
        await this.startRealNodes({ plane, kubeConfig, core, binaries, nodeNames, options });
        unregisterWarden();
        this.hooks.register(wardenHook);
      } else {
        for (const name of nodeNames)
          await core.createNode({
            body: simulatedGpuNode({ name, gpus: options.gpusPerNode, gpuMemoryMiB: options.gpuMemoryMiB }),
          });
      }
      const pending = await this.startSimulator(kubeConfig, core, nodeMode.mode);
      await this.startScheduler(plane, warden.extenderPort, caPem);
      const kubeconfigPath = this.announce(plane, flags, options, nodeMode.mode);
      return await this.runUntilDone(
        flags,
        { plane, kubeConfig, core, store: warden.server.cache, pending },
        {
          ...options,
          mode: nodeMode.mode,
          nodeNames,
          kubeconfigPath,
        },
      );
    } catch (error) {
      // A start that failed half-way (real nodes that cannot come up, a port taken, a demo that
      // failed): what is up stops, or the server's watches and the control plane's children
      // would keep this process alive after the error is reported.
      this.leaveView();
      await this.hooks.stopAll();
      rmSync(this.certDir, { recursive: true, force: true });
      throw error;
    }
  }

  /** vgpu-warden's webhook and extender on free loopback ports, against the local control plane. */
  private async startWarden(plane: ControlPlane): Promise<LocalWarden> {
    const { io, settings } = this;
    const [webhookPort = 0, extenderPort = 0, metricsPort = 0] = await findFreePorts(3);
    const config = loadConfig({
      ...io.env,
      KUBECONFIG: plane.kubeconfigPath,
      CERT_DIR: this.certDir,
      WEBHOOK_HOST: '127.0.0.1',
      WEBHOOK_PORT: String(webhookPort),
      EXTENDER_HOST: '127.0.0.1',
      EXTENDER_PORT: String(extenderPort),
      CERT_HOSTS: '127.0.0.1',
      SCHEDULER_NAME: settings.schedulerName,
      METRICS_HOST: '127.0.0.1',
      METRICS_PORT: String(metricsPort),
      POD_NAMESPACE: 'default',
      NODE_SCHEDULER_POLICY: settings.nodeSchedulerPolicy,
    });
    const logLines = lineStream((line) => {
      if (this.live?.view.isActive === true) this.live.view.note(logNoteText(line));
      else io.stdout(line);
    });
    const server = await startServer(
      config,
      createLogger(settings.logLevel === 'info' ? 'warn' : settings.logLevel, logLines),
    );
    this.say(`vgpu-warden webhook on https://127.0.0.1:${webhookPort}, extender on https://127.0.0.1:${extenderPort}`);
    return { server, webhookPort, extenderPort };
  }

  private wardenHook(server: LocalWarden['server']): ShutdownResource {
    return {
      name: 'vgpu-warden',
      stop: async () => {
        this.leaveView();
        await this.live?.feed.stop();
        this.started.simulator?.stop();
        await this.started.simulatorCache?.stop();
        await server.stop();
        rmSync(this.certDir, { recursive: true, force: true });
      },
      // The process is going: at least give the terminal back as it was.
      killSync: () => {
        this.leaveView();
        rmSync(this.certDir, { recursive: true, force: true });
      },
    };
  }

  /** The webhook configuration the project ships (manifests/webhook.yaml), pointed at the local server. */
  private async registerWebhook(kubeConfig: KubeConfig, webhookPort: number, caPem: string): Promise<void> {
    const shipped = loadYaml<V1MutatingWebhookConfiguration>(
      readFileSync(join(this.deps.repoRoot, 'manifests', 'webhook.yaml'), 'utf8'),
    );
    await kubeConfig.makeApiClient(AdmissionregistrationV1Api).createMutatingWebhookConfiguration({
      body: {
        metadata: { name: 'vgpu-warden' },
        webhooks: (shipped.webhooks ?? []).map((webhook) => ({
          ...webhook,
          clientConfig: {
            url: `https://127.0.0.1:${webhookPort}/mutate`,
            caBundle: Buffer.from(caPem).toString('base64'),
          },
        })),
      },
    });
  }

  /**
   * Real nodes with the HAMi stand-in, from the stand-ins package: loaded here only (simulated runs
   * never load gRPC).
   */
  private async startRealNodes(inputs: {
    plane: ControlPlane;
    kubeConfig: KubeConfig;
    core: CoreV1Api;
    binaries: ControlPlaneBinaries;
    nodeNames: string[];
    options: LocalFlags;
  }): Promise<void> {
    const real = await import('@vgpu-warden/stand-ins/real-gpu-fleet');
    this.fleet = await real.RealGpuFleet.start({
      names: inputs.nodeNames,
      gpusPerNode: inputs.options.gpusPerNode,
      gpuMemoryMiB: inputs.options.gpuMemoryMiB,
      cluster: inputs.plane,
      kubeConfig: inputs.kubeConfig,
      core: inputs.core,
      binaries: inputs.binaries,
      processes: hostProcesses,
      shutdownHooks: this.hooks,
      progress: this.say,
    });
    this.realContainer = real.REAL_NODE_CONTAINER;
  }

  /** The device-plugin simulator and the pending-pod list it feeds; the simulator allocates on simulated nodes only. */
  private async startSimulator(kubeConfig: KubeConfig, core: CoreV1Api, mode: NodeMode): Promise<PendingPods> {
    const { settings } = this;
    const simulatorCache = new ClusterCache({ sources: kubeSources(kubeConfig) });
    this.started.simulatorCache = simulatorCache;
    // Subscribed before the first LIST, so the pods already there count too.
    const pending = new PendingPods();
    simulatorCache.onPodChange((pod, change) => {
      pending.apply(pod, change);
    });
    await simulatorCache.start();
    const simulator = new DevicePluginSimulator({
      core,
      cache: simulatorCache,
      locks: new NodeLocks({
        api: new KubeNodeLockApi(core),
        config: { bindGraceMs: settings.bindGraceMs, expireMs: settings.nodeLockExpireMs },
      }),
      isSimulated: (node) => node.startsWith('gpu-node-'),
      // The seed demo's victims must hold their lock as a pod still waiting for Allocate would.
      behaviour: (pod) => (pod.metadata?.name?.startsWith(SEED_VICTIM) === true ? 'stall' : 'allocate'),
    });
    this.started.simulator = simulator;
    if (mode === 'simulated') simulator.start();
    return pending;
  }

  private async startScheduler(plane: ControlPlane, extenderPort: number, caPem: string): Promise<void> {
    const { schedulerName, nodeSchedulerPolicy } = this.settings;
    await plane.startScheduler(
      kubeSchedulerConfiguration({
        schedulerName,
        extenderUrl: `https://127.0.0.1:${extenderPort}`,
        caPem,
        includeDefaultProfile: true,
        nodePolicy: nodeSchedulerPolicy,
      }),
    );
    this.say(
      `kube-scheduler with profiles default-scheduler and ${schedulerName} (extender: filter, prioritize, bind)`,
    );
  }

  /** Says what is up and how to use it; the kubeconfig path the user is told to export. */
  private announce(plane: ControlPlane, flags: CommandContext['flags'], options: LocalFlags, mode: NodeMode): string {
    const { nodeCount, gpusPerNode } = options;
    this.say(
      mode === 'real'
        ? `${nodeCount} real GPU nodes (kubelet + containerd) with ${gpusPerNode} mock GPUs each, ` +
            'the HAMi device-plugin stand-in registered on each'
        : `${nodeCount} simulated GPU nodes with ${gpusPerNode} GPUs each, and a device-plugin simulator`,
    );
    let kubeconfigPath = plane.kubeconfigPath;
    const out = flags['kubeconfig-out'];
    if (typeof out === 'string') {
      copyFileSync(plane.kubeconfigPath, out);
      kubeconfigPath = out;
    }
    this.say(`ready; use it with: export KUBECONFIG=${kubeconfigPath}`);
    if (mode === 'real') {
      this.say(
        `the real nodes hold image ${this.realContainer?.image ?? ''} (no registry: imagePullPolicy Never) ` +
          'and have loopback networking only (hostNetwork: true)',
      );
      const example = join(this.deps.repoRoot, 'examples', 'real-node-gpu-pod.yaml');
      this.say(`try: kubectl apply -f ${example}; kubectl logs gpu-demo shows the GPU it was given`);
    } else {
      this.say(
        'try: a pod with limits nvidia.com/gpu: 1 and nvidia.com/gpumem: 4000 (the webhook sends it to the extender)',
      );
    }
    return kubeconfigPath;
  }

  /** The live view (when the terminal allows it) and the demo, then until Ctrl-C or a component's crash. */
  private async runUntilDone(
    flags: CommandContext['flags'],
    cluster: Omit<ViewInputs, 'lockRules' | 'terminal' | 'kubeconfigExport'> & { plane: ControlPlane },
    run: LocalFlags & { mode: NodeMode; nodeNames: string[]; kubeconfigPath: string },
  ): Promise<number> {
    const exitAfterDemo = flags['exit-after-demo'] === true;
    if (!exitAfterDemo) this.startView(flags, cluster, run.kubeconfigPath);
    if (run.demo === 'seed') {
      await this.runSeed(cluster.core, run);
      if (exitAfterDemo) {
        this.say('demo finished; stopping');
        await this.hooks.stopAll();
        return 0;
      }
    }
    this.say('press Ctrl-C to stop and remove everything');
    // Runs until a signal (the shutdown hooks then stop everything and exit) or until a component
    // dies. The interval keeps Node's event loop alive: child processes are deliberately unref'd.
    const keepAlive = setInterval(() => undefined, 60_000);
    const crashed = await cluster.plane.firstUnexpectedExit();
    clearInterval(keepAlive);
    this.leaveView();
    await this.live?.feed.stop();
    this.io.stderr(`local: ${crashed.name} exited unexpectedly; last log lines:\n${crashed.lastLogLines()}`);
    await this.hooks.stopAll();
    return 1;
  }

  private startView(
    flags: CommandContext['flags'],
    cluster: Omit<ViewInputs, 'lockRules' | 'terminal' | 'kubeconfigExport'>,
    kubeconfigPath: string,
  ): void {
    const terminal = this.deps.terminal ?? process.stdout;
    const offReason = liveViewOffReason({
      noViewFlag: flags['no-view'] === true,
      stdoutIsTTY: terminal.isTTY === true,
      term: this.io.env.TERM,
    });
    if (offReason !== undefined) {
      this.io.stderr(`local: live view off: ${offReason}; printing progress lines only`);
      return;
    }
    const { settings } = this;
    this.live = liveViewOf(
      {
        kubeConfig: cluster.kubeConfig,
        core: cluster.core,
        store: cluster.store,
        pending: cluster.pending,
        terminal,
        kubeconfigExport: `export KUBECONFIG=${kubeconfigPath}`,
        lockRules: {
          bindGraceMs: settings.bindGraceMs,
          expireMs: settings.nodeLockExpireMs,
          forceAfterMs: settings.nodeLockForceAfterMs,
        },
      },
      this.say,
    );
    this.live.feed.start();
    this.live.view.start();
  }

  private async runSeed(core: CoreV1Api, run: { mode: NodeMode; nodeNames: string[] }): Promise<void> {
    const demoSay = (line: string) => {
      if (this.live?.view.isActive === true) this.live.view.setDemo(line, `local: ${line}`);
      else this.say(line);
    };
    const demoNode = run.nodeNames[0] ?? 'gpu-node-1';
    const podFor = localGpuPod(run.mode, this.realContainer);
    const seedNode: SeedDemoNode = {
      mode: run.mode,
      name: demoNode,
      gpuPod: (name) => podFor(name, demoNode),
      freezeKubelet: () => {
        this.fleet?.node(demoNode).pause();
      },
      resumeKubelet: () => {
        this.fleet?.node(demoNode).resume();
      },
      visibleDevices: (pod) => visibleDevicesOf(core, 'default', pod.metadata?.name ?? ''),
    };
    await runSeedDemo({ core, namespace: 'default', node: seedNode, say: demoSay });
  }
}

/**
 * `vgpu-warden local`: the whole system on one machine. A real etcd, kube-apiserver and
 * kube-scheduler on loopback; vgpu-warden's webhook (registered from manifests/webhook.yaml) and
 * scheduler extender; GPU nodes with HAMi's inventory annotation: real ones (kubelet and containerd
 * each, with the HAMi device-plugin stand-in registered over gRPC) where the machine allows, else
 * simulated ones with a device-plugin simulator that allocates and frees the node locks. Runs
 * until Ctrl-C.
 *
 * Loaded only when `local` runs (local-command.ts): it is the one command that brings up the
 * control plane and the nodes, and `serve` must not load any of it.
 */
export async function runLocal(deps: LocalDeps, { io, flags, config }: CommandContext): Promise<number> {
  const options = localFlags(flags);
  const settings = config();
  const binaries = locateBinaries({ repoRoot: deps.repoRoot, env: io.env });
  const nodeMode = chooseNodeMode({
    asked: options.asked,
    isRoot: process.getuid?.() === 0,
    toolsProblem: options.asked === 'simulated' ? undefined : await realNodeToolsProblem(binaries),
  });
  return new LocalRun(deps, io, settings).run(flags, { options, nodeMode, binaries });
}
