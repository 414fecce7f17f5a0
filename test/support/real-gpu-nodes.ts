import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { kubeSchedulerConfiguration } from '../../src/extender/scheduler-config.js';
import { loadKubeConfig } from '../../src/kube/client.js';
import type { RunningServer } from '../../src/serve/start-server.js';
import type { ControlPlane, SchedulerHandle } from '../../src/local/control-plane.js';
import { locateBinaries } from '../../src/local/k8s-binaries.js';
import { hostProcesses } from '../../src/local/host-processes.js';
import { REAL_NODE_CONTAINER, RealGpuFleet } from '@vgpu-warden/stand-ins/real-gpu-fleet';
import type { RealNode } from '@vgpu-warden/stand-ins/real-node';
import {
  type Admission,
  type AllocateAction,
  type AllocateRequest,
  decodePodDevices,
  type GrpcDevicePluginServer,
  type GrpcDevicePluginServerOptions,
  HamiDevicePlugin,
  type MockGpu,
  pluginApiFromCore,
  wire,
} from '@vgpu-warden/stand-ins/hami-plugin';
import { expect } from 'chai';
import { expectedGpuEnvironment, gpuEnvironment } from './gpu-environment.js';
import { eventually, notYet, testCluster, uniqueName } from './test-cluster.js';
import { startTestServer } from './test-server.js';
import { registerFixtureWebhook } from './fixture-webhook.js';

export const REAL_GROUP_LABEL = 'vgpu-warden.test/real-group';

export interface RealGpuNodesOptions {
  nodes?: number;
  gpusPerNode?: number;
  gpuMemoryMiB?: number;
  /** vgpu-warden settings for the server (e.g. SWEEP_ENABLED=false). */
  env?: Record<string, string>;
  /** HAMi v2.10's pod-list fallback in the plugin (default on, as v2.10 ships). */
  fallback?: boolean;
}

/**
 * vgpu-warden (webhook + extender, in-process), the real kube-scheduler with the shipped extender
 * configuration, and real nodes (kubelet + containerd each, src/local/real-node/) on which the
 * HAMi device-plugin stand-in is registered over kubelet's device-plugin gRPC API, so kubelet's own
 * device manager calls Allocate in its own order. The stand-in shares no code with src/.
 */
export class RealGpuNodes {
  server: RunningServer | undefined;
  scheduler: SchedulerHandle | undefined;
  fleet: RealGpuFleet | undefined;
  readonly plugin: HamiDevicePlugin<Admission>;
  readonly group = uniqueName('rg');
  readonly core: CoreV1Api;
  /** What the device-plugin stand-in does on each Allocate call. Default: allocate as HAMi does. */
  allocation: (request: AllocateRequest<Admission>) => AllocateAction = () => ({ kind: 'allocate' });
  private readonly certDir = mkdtempSync(join(tmpdir(), 'real-gpu-certs-'));

  constructor(
    private readonly plane: ControlPlane,
    private readonly options: RealGpuNodesOptions = {},
  ) {
    this.core = loadKubeConfig(plane.kubeconfigPath).makeApiClient(CoreV1Api);
    this.plugin = new HamiDevicePlugin<Admission>({
      api: pluginApiFromCore(this.core),
      fallback: options.fallback ?? true,
      behaviour: (request) => this.allocation(request),
    });
  }

  get nodeNames(): string[] {
    return this.fleet?.nodeNames ?? [];
  }

  /** Each node's plugin server (replacePlugin swaps one). */
  get pluginServers(): ReadonlyMap<string, GrpcDevicePluginServer> {
    return this.fleet?.servers ?? new Map<string, GrpcDevicePluginServer>();
  }

  get gpus(): ReadonlyMap<string, MockGpu[]> {
    return this.fleet?.gpus ?? new Map<string, MockGpu[]>();
  }

  node(name: string): RealNode {
    if (this.fleet === undefined) throw new Error('real nodes not started');
    return this.fleet.node(name);
  }

  async start(): Promise<void> {
    const { server, config } = await startTestServer(this.plane, this.certDir, this.options.env);
    this.server = server;

    const binaries = locateBinaries({ repoRoot: resolve(import.meta.dirname, '..', '..'), env: process.env });
    const count = this.options.nodes ?? 1;
    this.fleet = await RealGpuFleet.start({
      names: Array.from({ length: count }, (_, index) => `${this.group}-n${index}`),
      labels: { [REAL_GROUP_LABEL]: this.group },
      gpusPerNode: this.options.gpusPerNode ?? 2,
      gpuMemoryMiB: this.options.gpuMemoryMiB ?? 24576,
      cluster: this.plane,
      kubeConfig: loadKubeConfig(this.plane.kubeconfigPath),
      core: this.core,
      binaries,
      processes: hostProcesses,
      plugin: this.plugin,
    });
    this.scheduler = await this.plane.startScheduler(
      kubeSchedulerConfiguration({
        schedulerName: 'hami-scheduler',
        extenderUrl: `https://127.0.0.1:${this.server.extender.port}`,
        ...(this.server.keeper.current()?.caBundlePem === undefined
          ? {}
          : { caPem: this.server.keeper.current()?.caBundlePem }),
        nodePolicy: config.nodeSchedulerPolicy,
      }),
    );
  }

  /** Registers manifests/webhook.yaml against this server's webhook for `namespace`; returns its removal. */
  registerWebhook(namespace: string): Promise<() => Promise<void>> {
    return registerFixtureWebhook(this.plane, this.server, namespace);
  }

  /** Stops the node's plugin and starts a new one with `options` (e.g. neverRegister, registerTwice). */
  replacePlugin(
    node: string,
    options: Partial<Pick<GrpcDevicePluginServerOptions, 'neverRegister' | 'registerTwice' | 'onEvent'>>,
  ): Promise<GrpcDevicePluginServer> {
    if (this.fleet === undefined) throw new Error('real nodes not started');
    return this.fleet.replacePlugin(node, options);
  }

  /** Waits until kubelet publishes `count` allocatable nvidia.com/gpu on the node. */
  async allocatable(node: string, count: number, timeoutMs = 30_000): Promise<true> {
    if (this.fleet === undefined) throw new Error('real nodes not started');
    await this.fleet.allocatable(node, count, timeoutMs);
    return true;
  }

  async stop(): Promise<void> {
    await this.scheduler?.stop();
    await this.fleet?.stop();
    await this.server?.stop();
    rmSync(this.certDir, { recursive: true, force: true });
  }
}

export { REAL_NODE_CONTAINER };

/**
 * A GPU pod for the real nodes: hostNetwork (the nodes have loopback networking only), the local
 * busybox image, and a container that prints the GPU environment it was given, then waits and
 * exits at once on SIGTERM (so a graceful delete finishes in well under a second).
 */
export function realGpuPod(name: string, group: string, limits: Record<string, string>): V1Pod {
  return {
    metadata: { name },
    spec: {
      schedulerName: 'hami-scheduler',
      hostNetwork: true,
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 5,
      nodeSelector: { [REAL_GROUP_LABEL]: group },
      containers: [
        { name: 'main', ...REAL_NODE_CONTAINER, command: [...REAL_NODE_CONTAINER.command], resources: { limits } },
      ],
    },
  };
}

/** The pod of that name in the test's namespace, or undefined when there is none. */
export function podNamed(name: string): Promise<V1Pod | undefined> {
  const { core, namespace } = testCluster();
  return core.readNamespacedPod({ namespace, name }).catch(() => undefined);
}

export function boundPod(name: string, timeoutMs = 20_000): Promise<V1Pod> {
  return eventually(
    `${name} bound`,
    async () => {
      const found = await podNamed(name);
      return found?.spec?.nodeName !== undefined ? found : notYet(`phase ${found?.status?.phase ?? 'gone'}`);
    },
    timeoutMs,
    20,
  );
}

/** The pod once Running; a pod that Failed ends the wait with its reason. */
export function runningPod(name: string, timeoutMs = 30_000): Promise<V1Pod> {
  return eventually(
    `${name} Running`,
    async () => {
      const found = await podNamed(name);
      if (found?.status?.phase === 'Failed')
        throw new Error(`${name} Failed: ${found.status.reason ?? ''} ${found.status.message ?? ''}`);
      return found?.status?.phase === 'Running'
        ? found
        : notYet(`phase ${found?.status?.phase ?? 'gone'}, ${found?.status?.reason ?? ''}`);
    },
    timeoutMs,
    50,
  );
}

export function podGone(name: string, timeoutMs = 30_000): Promise<true> {
  return eventually(
    `${name} gone`,
    async () => ((await podNamed(name)) === undefined ? true : notYet('still there')),
    timeoutMs,
    50,
  );
}

export function nodeLock(core: CoreV1Api, node: string): Promise<string | undefined> {
  return core.readNode({ name: node }).then((found) => found.metadata?.annotations?.['hami.io/mutex.lock']);
}

export function nodeUnlocked(core: CoreV1Api, node: string, timeoutMs = 20_000): Promise<true> {
  return eventually(
    `${node} to be unlocked`,
    async () => {
      const lock = await nodeLock(core, node);
      return lock === undefined ? true : notYet(`locked: ${lock}`);
    },
    timeoutMs,
    50,
  );
}

/**
 * The container's GPU environment (its log) equals what its own pod's allocation names (wire
 * contract §5): all of it, or the container's `segment` (containers in order, init containers first).
 */
export async function expectOwnGpus(
  running: V1Pod,
  options: { container?: string; segment?: number } = {},
): Promise<void> {
  const { core, namespace } = testCluster();
  const name = running.metadata?.name ?? '';
  const container = options.container ?? 'main';
  const log = await eventually(
    `${name}/${container} to print its environment`,
    async () => {
      const text = await core.readNamespacedPodLog({ namespace, name, container });
      return text.includes('NVIDIA_VISIBLE_DEVICES') ? text : notYet(`log: ${text.slice(0, 200)}`);
    },
    20_000,
    200,
  );
  const segments = decodePodDevices(running.metadata?.annotations?.[wire.DEVICES_ALLOCATED] ?? '');
  const devices = options.segment === undefined ? segments.flat() : (segments[options.segment] ?? []);
  expect(devices, `${name}'s allocation`).to.have.length.greaterThan(0);
  expect(gpuEnvironment(log), `${name}/${container}'s environment`).to.deep.equal(expectedGpuEnvironment(devices));
}
