import { open } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import {
  DEFAULT_RESOURCE_NAME,
  GrpcDevicePluginServer,
  HamiDevicePlugin,
  mockGpus,
  pluginApiFromCore,
  registerNode,
  type Admission,
  type AllocateAction,
  type AllocateRequest,
  type GrpcDevicePluginServerOptions,
  type MockGpu,
} from './hami-plugin/index.js';
import { TEST_IMAGE } from './real-node/node-image.js';
import { locateRealNodeTools } from './real-node/node-tools.js';
import { RealNodeFleet } from './real-node/real-node-fleet.js';
import type { ProcessHost, ShutdownRegistry } from './real-node/process-host.js';
import { RealNodeError } from './real-node/real-node-error.js';
import type { NodeClusterAccess, RealNode } from './real-node/real-node.js';

/**
 * GPU nodes that are real kubelets (real-node/: kubelet and containerd each, in
 * their own namespaces) with the HAMi device-plugin stand-in registered on each over kubelet's
 * device-plugin gRPC API, and mock GPUs registered as HAMi's plugin writes them. kubelet's own device
 * manager calls Allocate; the stand-in answers with HAMi's container environment. Local mode loads
 * this module (with import()) only on real nodes, so simulated runs never load gRPC; `serve` never
 * loads this package.
 */

/**
 * The container for GPU pods on these nodes: the busybox image every real node holds (imported, no
 * registry), printing the environment the device plugin gave it (so `kubectl logs` shows the GPUs),
 * then waiting; it exits at once on SIGTERM. The nodes have loopback networking only, so such pods
 * run with hostNetwork.
 */
export const REAL_NODE_CONTAINER: {
  readonly image: string;
  readonly imagePullPolicy: string;
  readonly command: readonly string[];
} = {
  image: TEST_IMAGE,
  imagePullPolicy: 'Never',
  command: ['sh', '-c', 'env | sort; trap "exit 0" TERM; sleep 3600 & wait'],
};

export interface RealGpuFleetOptions {
  names: readonly string[];
  gpusPerNode: number;
  gpuMemoryMiB: number;
  cluster: NodeClusterAccess;
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  /** Where the control plane's binaries are: kubelet is taken from here. */
  binaries: { readonly kubelet?: string | undefined };
  /** Starts the nodes' programs (the caller's process runner). */
  processes: ProcessHost;
  labels?: Readonly<Record<string, string>>;
  shutdownHooks?: ShutdownRegistry;
  progress?: (line: string) => void;
  /**
   * The stand-in to serve (one for all nodes, as it keeps the records); else one that allocates as
   * HAMi does, or as `allocation` says.
   */
  plugin?: HamiDevicePlugin<Admission>;
  /** What a stand-in made here does on each Allocate; allocate as HAMi does by default. */
  allocation?: (request: AllocateRequest<Admission>) => AllocateAction;
  /** How long to wait for each node's GPUs to show as allocatable. */
  allocatableTimeoutMs?: number;
}

export class RealGpuFleetError extends RealNodeError {}

/** kubelet's log lines about device-plugin registration and connections (kubelet runs at -v=2). */
const DEVICE_MANAGER_LINE =
  /device plugin|Registered client|Deregistered client|ListAndWatch|already connected|registration request/i;
const TRAIL_LINES = 15;
/** Only the end of kubelet's log is read: it grows for the node's whole life. */
const TRAIL_BYTES = 512 * 1024;

export class RealGpuFleet {
  private constructor(
    readonly fleet: RealNodeFleet,
    readonly plugin: HamiDevicePlugin<Admission>,
    private readonly core: CoreV1Api,
  ) {}

  /** Each node's plugin server (replacePlugin swaps one). */
  readonly servers = new Map<string, GrpcDevicePluginServer>();
  private unregisterHooks: (() => void) | undefined;
  /** Each node's mock GPUs, as registered. */
  readonly gpus = new Map<string, MockGpu[]>();

  static async start(options: RealGpuFleetOptions): Promise<RealGpuFleet> {
    const tools = locateRealNodeTools(options.binaries);
    const fleet = await RealNodeFleet.start({
      nodes: options.names.map((name) => ({
        name,
        ...(options.labels === undefined ? {} : { labels: options.labels }),
      })),
      cluster: options.cluster,
      kubeConfig: options.kubeConfig,
      tools,
      processes: options.processes,
      ...(options.shutdownHooks === undefined ? {} : { shutdownHooks: options.shutdownHooks }),
      ...(options.progress === undefined ? {} : { progress: options.progress }),
    });
    const allocation = options.allocation ?? (() => ({ kind: 'allocate' }) as const);
    const plugin =
      options.plugin ??
      new HamiDevicePlugin<Admission>({
        api: pluginApiFromCore(options.core),
        fallback: true,
        behaviour: (request) => allocation(request),
      });
    const nodes = new RealGpuFleet(fleet, plugin, options.core);
    // Registered after the nodes' hook, so on Ctrl-C (newest first) the plugins stop before their
    // kubelets: a plugin outliving its kubelet tries to serve again in a folder being removed.
    nodes.unregisterHooks = options.shutdownHooks?.register({
      name: 'device plugins',
      stop: () => nodes.stopPlugins(),
      killSync: () => undefined,
    });
    try {
      await Promise.all(
        fleet.nodes.map(async (node) => {
          const gpus = mockGpus(node.nodeName, options.gpusPerNode, { memoryMiB: options.gpuMemoryMiB });
          nodes.gpus.set(node.nodeName, gpus);
          await registerNode(options.core, node.nodeName, gpus);
          const server = new GrpcDevicePluginServer({ plugin, node: node.nodeName, pluginDir: node.devicePluginDir });
          nodes.servers.set(node.nodeName, server);
          await server.start();
          await nodes.allocatable(
            node.nodeName,
            gpus.length * (gpus[0]?.count ?? 0),
            options.allocatableTimeoutMs ?? 30_000,
          );
        }),
      );
    } catch (error) {
      await nodes.stop().catch(() => undefined);
      throw error;
    }
    return nodes;
  }

  node(name: string): RealNode {
    return this.fleet.node(name);
  }

  get nodeNames(): string[] {
    return this.fleet.nodes.map((node) => node.nodeName);
  }

  /** Stops the node's plugin and serves a new one with `options` (e.g. neverRegister, registerTwice). */
  async replacePlugin(
    node: string,
    options: Partial<Pick<GrpcDevicePluginServerOptions, 'neverRegister' | 'registerTwice' | 'onEvent'>>,
  ): Promise<GrpcDevicePluginServer> {
    const old = this.servers.get(node);
    await old?.stop();
    await old?.settled();
    const server = new GrpcDevicePluginServer({
      plugin: this.plugin,
      node,
      pluginDir: this.node(node).devicePluginDir,
      ...options,
    });
    this.servers.set(node, server);
    await server.start();
    return server;
  }

  /**
   * Until kubelet publishes `count` allocatable nvidia.com/gpu on the node (the plugin registered and
   * listed its devices).
   */
  async allocatable(node: string, count: number, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const seen = (await this.core.readNode({ name: node })).status?.allocatable?.[DEFAULT_RESOURCE_NAME];
      if (seen === String(count)) return;
      if (Date.now() > deadline) {
        throw new RealGpuFleetError(
          `${node} did not publish ${count} allocatable nvidia.com/gpu within ${timeoutMs} ms ` +
            `(last: ${seen ?? 'none'})\n${await this.devicePluginTrail(node)}`,
        );
      }
      await sleep(200);
    }
  }

  /**
   * What kubelet's device manager and the node's plugin said lately: why allocatable did not move
   * is in these lines (a Register refused, a client kubelet never dropped), and a failure on a CI
   * machine leaves nothing else behind.
   */
  private async devicePluginTrail(node: string): Promise<string> {
    const kubeletLog = this.node(node).logFiles.kubelet;
    const kubeletLines = (await lastLinesOf(kubeletLog, TRAIL_BYTES))
      .filter((line) => DEVICE_MANAGER_LINE.test(line))
      .slice(-TRAIL_LINES);
    const pluginLines = this.servers.get(node)?.recentLines().slice(-TRAIL_LINES) ?? [];
    return [
      `kubelet's device manager, last ${kubeletLines.length} lines (${kubeletLog}):`,
      ...kubeletLines.map((line) => `  ${line}`),
      `the device plugin, last ${pluginLines.length} lines:`,
      ...pluginLines.map((line) => `  ${line}`),
    ].join('\n');
  }

  /** Stops the plugins, then the nodes (every process, mount and cgroup; the run folder). */
  async stop(): Promise<void> {
    await this.stopPlugins();
    this.unregisterHooks?.();
    await this.fleet.stop();
  }

  private async stopPlugins(): Promise<void> {
    for (const server of this.servers.values()) await server.stop().catch(() => undefined);
  }
}

/** The whole lines in the last `bytes` of a file; none when it cannot be read. */
async function lastLinesOf(path: string, bytes: number): Promise<string[]> {
  const file = await open(path).catch(() => undefined);
  if (file === undefined) return [];
  try {
    const { size } = await file.stat();
    const start = Math.max(0, size - bytes);
    const { buffer, bytesRead } = await file.read({ buffer: Buffer.alloc(size - start), position: start });
    const lines = buffer.subarray(0, bytesRead).toString('utf8').split('\n');
    return (start > 0 ? lines.slice(1) : lines).filter((line) => line !== '');
  } finally {
    await file.close();
  }
}
