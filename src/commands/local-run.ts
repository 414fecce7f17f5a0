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
import { ShutdownHooks, type ShutdownTarget } from '../local/shutdown-hooks.js';
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
import { chooseNodeMode, parseNodeMode, type NodeMode } from '../local/node-mode.js';
import { locateRealNodeTools } from '../local/real-node/node-tools.js';
import { TEST_IMAGE } from '../local/real-node/node-image.js';
import type { RealGpuFleet } from '../local/real-gpu-fleet.js';
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

/** Why real nodes cannot run here (a tool missing), or undefined when they can. */
function realNodeToolsProblem(binaries: Parameters<typeof locateRealNodeTools>[0]): string | undefined {
  try {
    locateRealNodeTools(binaries);
    return undefined;
  } catch (error) {
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

/**
 * `vgpu-warden local`: the whole system on one machine. A real etcd, kube-apiserver and
 * kube-scheduler on loopback; vgpu-warden's webhook (registered from manifests/webhook.yaml) and
 * scheduler extender; GPU nodes with HAMi's inventory annotation: real ones (kubelet and containerd
 * each, with the HAMi device-plugin stand-in registered over gRPC) where the machine allows, else
 * simulated ones with a device-plugin simulator that allocates and frees the node locks. Runs
 * until Ctrl-C.
 */

/** What `local` needs from its caller (main.ts): where the repository is, where signals come from, the terminal. */
export interface LocalDeps {
  repoRoot: string;
  shutdownTarget: ShutdownTarget;
  terminal?: TerminalOutput & { isTTY?: boolean };
}

/**
 * The `local` command's run, loaded only when `local` runs (local-command.ts): it is the one command
 * that brings up the control plane and the nodes, and `serve` must not load any of it.
 */
export async function runLocal(deps: LocalDeps, { io, flags, config }: CommandContext): Promise<number> {
  const nodeCount = positiveInteger('gpu-nodes', flags['gpu-nodes'], 2);
  const gpusPerNode = positiveInteger('gpus-per-node', flags['gpus-per-node'], 4);
  const gpuMemoryMiB =
    flags['gpu-memory'] === undefined ? 24576 : positiveInteger('gpu-memory', flags['gpu-memory'], 24576, 1_048_576);
  const demo = flags.demo;
  if (demo !== undefined && demo !== 'seed')
    throw new UsageError(`invalid --demo=${JSON.stringify(demo)}: the only demo is "seed"`);
  const askedNodes = flags.nodes;
  const asked = askedNodes === undefined ? undefined : parseNodeMode(String(askedNodes));
  if (askedNodes !== undefined && asked === undefined)
    throw new UsageError(
      `invalid --nodes=${JSON.stringify(String(askedNodes).slice(0, 40))}: expected "real" or "simulated"`,
    );
  const settings = config();
  const binaries = locateBinaries({ repoRoot: deps.repoRoot, env: io.env });
  const nodeMode = chooseNodeMode({
    asked,
    isRoot: process.getuid?.() === 0,
    toolsProblem: asked === 'simulated' ? undefined : realNodeToolsProblem(binaries),
  });
  const terminal = deps.terminal ?? process.stdout;
  // While the live view is up, what would be printed goes into it (and is printed again when it
  // ends); before and after, it is printed as usual.
  let live: { view: LiveView; feed: EventFeed } | undefined;
  const print = (line: string) => {
    if (live?.view.isActive === true) live.view.note(line);
    else io.stdout(line);
  };
  const leaveView = () => {
    for (const line of live?.view.stop() ?? []) io.stdout(line);
  };
  const say = (line: string) => {
    print(`local: ${line}`);
  };
  const hooks = new ShutdownHooks(deps.shutdownTarget, 20_000, (line) => {
    leaveView();
    io.stdout(`local: ${line}`);
  });
  say(nodeMode.why);
  const plane = await ControlPlane.start({ binaries, shutdownHooks: hooks, progress: say });
  const certDir = mkdtempSync(join(tmpdir(), 'vgpu-warden-local-certs-'));
  try {
    const [webhookPort = 0, extenderPort = 0, metricsPort = 0] = await findFreePorts(3);
    const server = await startServer(
      loadConfig({
        ...io.env,
        KUBECONFIG: plane.kubeconfigPath,
        CERT_DIR: certDir,
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
      }),
      createLogger(
        settings.logLevel === 'info' ? 'warn' : settings.logLevel,
        lineStream((line) => {
          if (live?.view.isActive === true) live.view.note(logNoteText(line));
          else io.stdout(line);
        }),
      ),
    );
    // Filled in as they start, so a stop at any point stops what is up.
    const started: { simulator?: DevicePluginSimulator; simulatorCache?: ClusterCache } = {};
    const wardenHook = {
      name: 'vgpu-warden',
      stop: async () => {
        leaveView();
        await live?.feed.stop();
        started.simulator?.stop();
        await started.simulatorCache?.stop();
        await server.stop();
        rmSync(certDir, { recursive: true, force: true });
      },
      // The process is going: at least give the terminal back as it was.
      killSync: () => {
        leaveView();
        rmSync(certDir, { recursive: true, force: true });
      },
    };
    // Registered now, so a failure further on stops the server too; registered again once the
    // nodes are up, so that vgpu-warden, the newest, stops first and sees no node vanish.
    const unregisterWarden = hooks.register(wardenHook);
    say(`vgpu-warden webhook on https://127.0.0.1:${webhookPort}, extender on https://127.0.0.1:${extenderPort}`);

    const kubeConfig = loadKubeConfig(plane.kubeconfigPath);
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const caPem = server.keeper.current()?.caBundlePem ?? '';
    const shipped = loadYaml<V1MutatingWebhookConfiguration>(
      readFileSync(join(deps.repoRoot, 'manifests', 'webhook.yaml'), 'utf8'),
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
    const nodeNames = Array.from({ length: nodeCount }, (_, index) => `gpu-node-${index + 1}`);
    let fleet: RealGpuFleet | undefined;
    let realContainer: Parameters<typeof localGpuPod>[1];
    if (nodeMode.mode === 'real') {
      // Loaded here only: `serve` and simulated runs never load gRPC.
      const real = await import('../local/real-gpu-fleet.js');
      fleet = await real.RealGpuFleet.start({
        names: nodeNames,
        gpusPerNode,
        gpuMemoryMiB,
        cluster: plane,
        kubeConfig,
        core,
        binaries,
        shutdownHooks: hooks,
        progress: say,
      });
      realContainer = real.REAL_NODE_CONTAINER;
      unregisterWarden();
      hooks.register(wardenHook);
    } else {
      for (const name of nodeNames)
        await core.createNode({ body: simulatedGpuNode({ name, gpus: gpusPerNode, gpuMemoryMiB }) });
    }
    const simulatorCache = new ClusterCache({ sources: kubeSources(kubeConfig) });
    started.simulatorCache = simulatorCache;
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
    started.simulator = simulator;
    if (nodeMode.mode === 'simulated') simulator.start();
    await plane.startScheduler(
      kubeSchedulerConfiguration({
        schedulerName: settings.schedulerName,
        extenderUrl: `https://127.0.0.1:${extenderPort}`,
        caPem,
        includeDefaultProfile: true,
        nodePolicy: settings.nodeSchedulerPolicy,
      }),
    );
    say(
      `kube-scheduler with profiles default-scheduler and ${settings.schedulerName} (extender: filter, prioritize, bind)`,
    );
    say(
      nodeMode.mode === 'real'
        ? `${nodeCount} real GPU nodes (kubelet + containerd) with ${gpusPerNode} mock GPUs each, the HAMi device-plugin stand-in registered on each`
        : `${nodeCount} simulated GPU nodes with ${gpusPerNode} GPUs each, and a device-plugin simulator`,
    );
    let kubeconfigPath = plane.kubeconfigPath;
    const out = flags['kubeconfig-out'];
    if (typeof out === 'string') {
      copyFileSync(plane.kubeconfigPath, out);
      kubeconfigPath = out;
    }
    say(`ready; use it with: export KUBECONFIG=${kubeconfigPath}`);
    if (nodeMode.mode === 'real') {
      say(
        `the real nodes hold image ${TEST_IMAGE} (no registry: imagePullPolicy Never) and have loopback networking only (hostNetwork: true)`,
      );
      say(
        `try: kubectl apply -f ${join(deps.repoRoot, 'examples', 'real-node-gpu-pod.yaml')}; kubectl logs gpu-demo shows the GPU it was given`,
      );
    } else {
      say(
        'try: a pod with limits nvidia.com/gpu: 1 and nvidia.com/gpumem: 4000 (the webhook sends it to the extender)',
      );
    }
    const exitAfterDemo = flags['exit-after-demo'] === true;
    const offReason = liveViewOffReason({
      noViewFlag: flags['no-view'] === true,
      stdoutIsTTY: terminal.isTTY === true,
      term: io.env.TERM,
    });
    if (offReason !== undefined && !exitAfterDemo)
      io.stderr(`local: live view off: ${offReason}; printing progress lines only`);
    if (offReason === undefined && !exitAfterDemo) {
      live = liveViewOf(
        {
          kubeConfig,
          core,
          store: server.cache,
          pending,
          terminal,
          kubeconfigExport: `export KUBECONFIG=${kubeconfigPath}`,
          lockRules: {
            bindGraceMs: settings.bindGraceMs,
            expireMs: settings.nodeLockExpireMs,
            forceAfterMs: settings.nodeLockForceAfterMs,
          },
        },
        say,
      );
      live.feed.start();
      live.view.start();
    }
    if (demo === 'seed') {
      const demoSay = (line: string) => {
        if (live?.view.isActive === true) live.view.setDemo(line, `local: ${line}`);
        else say(line);
      };
      const demoNode = nodeNames[0] ?? 'gpu-node-1';
      const podFor = localGpuPod(nodeMode.mode, realContainer);
      const seedNode: SeedDemoNode = {
        mode: nodeMode.mode,
        name: demoNode,
        gpuPod: (name) => podFor(name, demoNode),
        freezeKubelet: () => {
          fleet?.node(demoNode).pause();
        },
        resumeKubelet: () => {
          fleet?.node(demoNode).resume();
        },
        visibleDevices: (pod) => visibleDevicesOf(core, 'default', pod.metadata?.name ?? ''),
      };
      await runSeedDemo({ core, namespace: 'default', node: seedNode, say: demoSay });
      if (exitAfterDemo) {
        say('demo finished; stopping');
        await hooks.stopAll();
        return 0;
      }
    }
    say('press Ctrl-C to stop and remove everything');
    // Runs until a signal (the shutdown hooks then stop everything and exit) or until a component
    // dies. The interval keeps Node's event loop alive: child processes are deliberately unref'd.
    const keepAlive = setInterval(() => undefined, 60_000);
    const crashed = await plane.firstUnexpectedExit();
    clearInterval(keepAlive);
    leaveView();
    await live?.feed.stop();
    io.stderr(`local: ${crashed.name} exited unexpectedly; last log lines:\n${crashed.lastLogLines()}`);
    await hooks.stopAll();
    return 1;
  } catch (error) {
    // A start that failed half-way (real nodes that cannot come up, a port taken, a demo that
    // failed): what is up stops, or the server's watches and the control plane's children
    // would keep this process alive after the error is reported.
    leaveView();
    await hooks.stopAll();
    rmSync(certDir, { recursive: true, force: true });
    throw error;
  }
}
