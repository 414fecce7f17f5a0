import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import type { RunningServer } from '../../src/serve/start-server.js';
import { decodeAllocation } from '../../src/devices/allocation-codec.js';
import type { NodePolicy } from '../../src/devices/score.js';
import { kubeSchedulerConfiguration } from '../../src/extender/scheduler-config.js';
import { loadKubeConfig } from '../../src/kube/client.js';
import type { ControlPlane, SchedulerHandle } from '../../src/local/control-plane.js';
import { simulatedGpuNode, simulatedGpus } from '../../src/local/simulated-gpu-node.js';
import {
  HamiDevicePlugin,
  pluginApiFromCore,
  type AllocateAction,
  type AllocateRequest,
  type HamiDevicePluginOptions,
} from '@vgpu-warden/stand-ins/hami-plugin';
import { KubeletSim, type KubeletSimOptions, type Random } from './kubelet-sim/index.js';
import { nonLoopbackAddress } from './mtls-request.js';
import { uniqueName } from './test-cluster.js';
import { startTestServer } from './test-server.js';
import { registerFixtureWebhook } from './fixture-webhook.js';
import { ALLOCATED_ANNOTATION } from '../../src/hami/wire.js';

export const SIMULATED_LABEL = 'vgpu-warden.test/simulated';
export const GROUP_LABEL = 'vgpu-warden.test/group';

/** Kubelet simulator settings a test may choose; the fixture supplies the clients, the plugin and the nodes. */
export type FixtureKubeletOptions = Partial<
  Pick<
    KubeletSimOptions,
    'seed' | 'order' | 'admitTerminating' | 'admitDeleted' | 'finishGracefulDeletes' | 'teardownDelayMs' | 'onRecord'
  >
>;

/** HAMi stand-in settings a test may choose. */
export type FixturePluginOptions = Partial<
  Pick<HamiDevicePluginOptions, 'fallback' | 'delayMs' | 'onRecord' | 'refuseOversized' | 'lockOnly'>
>;

export interface ExtenderFixtureOptions {
  /** NODE_SCHEDULER_POLICY for the server, and the matching kube-scheduler profile. */
  nodePolicy?: NodePolicy;
  /**
   * Run the extender as deployed: on all interfaces, serving only the client certificate
   * vgpu-warden issues into a Secret, which kube-scheduler reads from files (as from the mounted
   * Secret), dialling this machine's non-loopback address.
   */
  clientAuth?: boolean;
  kubelet?: FixtureKubeletOptions;
  plugin?: FixturePluginOptions;
}

/**
 * The whole bind-time path for e2e tests: vgpu-warden's server (webhook + extender) in-process, the
 * real kube-scheduler configured with the shipped KubeSchedulerConfiguration pointing at it, and on
 * the nodes this fixture creates a kubelet simulator that admits bound pods and calls the HAMi
 * device-plugin stand-in's Allocate for them (test/support/kubelet-sim, packages/stand-ins/src/hami-plugin:
 * neither shares code with src/).
 */
export class ExtenderFixture {
  server: RunningServer | undefined;
  scheduler: SchedulerHandle | undefined;
  plugin: HamiDevicePlugin | undefined;
  kubelet: KubeletSim | undefined;
  /**
   * When the kubelet admits each pod: this many ms after the bind it saw, or 'never' (the pod stays
   * bound and Pending, its lock held as for a pod still awaiting Allocate). Default: at once.
   */
  admission: (pod: V1Pod, random: Random) => number | 'never' = () => 0;
  /** What the device-plugin stand-in does on each Allocate call. Default: allocate as HAMi does. */
  allocation: (request: AllocateRequest) => AllocateAction = () => ({ kind: 'allocate' });
  private readonly certDir = mkdtempSync(join(tmpdir(), 'extender-certs-'));
  /** The nodes this fixture created: the only ones its kubelet simulator runs. */
  private readonly nodes = new Set<string>();
  readonly core: CoreV1Api;

  private readonly env: Record<string, string>;
  /** With client authentication: the Secrets (in default) and the address kube-scheduler dials. */
  private readonly clientAuth: { caSecret: string; clientSecret: string; address: string } | undefined;

  /** `env` overrides vgpu-warden settings (e.g. SWEEP_ENABLED=false) for this fixture's server. */
  constructor(
    private readonly plane: ControlPlane,
    env: Record<string, string> = {},
    private readonly options: ExtenderFixtureOptions = {},
  ) {
    this.core = loadKubeConfig(plane.kubeconfigPath).makeApiClient(CoreV1Api);
    this.clientAuth =
      options.clientAuth === true
        ? {
            caSecret: uniqueName('e2e-tls'),
            clientSecret: uniqueName('e2e-scheduler-client'),
            address: nonLoopbackAddress(),
          }
        : undefined;
    const clientAuthEnv: Record<string, string> =
      this.clientAuth === undefined
        ? {}
        : {
            EXTENDER_HOST: '0.0.0.0',
            EXTENDER_CLIENT_AUTH: 'true',
            CERT_SECRET_NAME: this.clientAuth.caSecret,
            EXTENDER_CLIENT_SECRET_NAME: this.clientAuth.clientSecret,
            CERT_HOSTS: `127.0.0.1,${this.clientAuth.address}`,
          };
    this.env = {
      ...clientAuthEnv,
      ...env,
      ...(options.nodePolicy === undefined ? {} : { NODE_SCHEDULER_POLICY: options.nodePolicy }),
    };
  }

  async start(): Promise<void> {
    const { server, config } = await startTestServer(this.plane, this.certDir, this.env);
    this.server = server;

    this.plugin = new HamiDevicePlugin({
      api: pluginApiFromCore(this.core),
      ...this.options.plugin,
      behaviour: (request) => this.allocation(request),
    });
    this.kubelet = new KubeletSim({
      kubeConfig: loadKubeConfig(this.plane.kubeconfigPath),
      core: this.core,
      plugin: this.plugin,
      servesNode: (node) => this.nodes.has(node),
      ...this.options.kubelet,
      admitDelayMs: (pod, random) => this.admission(pod, random),
    });
    await this.kubelet.start();

    const caPem = this.server.keeper.current()?.caBundlePem;
    const extenderTls =
      this.clientAuth === undefined
        ? { extenderUrl: `https://127.0.0.1:${this.server.extender.port}`, ...(caPem ? { caPem } : {}) }
        : {
            extenderUrl: `https://${this.clientAuth.address}:${this.server.extender.port}`,
            clientTls: await this.mountClientSecret(this.clientAuth.clientSecret),
          };
    this.scheduler = await this.plane.startScheduler(
      kubeSchedulerConfiguration({
        schedulerName: 'hami-scheduler',
        ...extenderTls,
        nodePolicy: config.nodeSchedulerPolicy,
      }),
    );
  }

  /** Writes the client-certificate Secret into files, as the kubelet mounts it for kube-scheduler. */
  private async mountClientSecret(name: string): Promise<{ certFile: string; keyFile: string; caFile: string }> {
    const secret = await this.core.readNamespacedSecret({ name, namespace: 'default' });
    const dir = join(this.certDir, 'extender-client');
    mkdirSync(dir, { mode: 0o700 });
    for (const [key, value] of Object.entries(secret.data ?? {}))
      writeFileSync(join(dir, key), Buffer.from(value, 'base64'), { mode: 0o600 });
    return { certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key'), caFile: join(dir, 'ca.crt') };
  }

  /**
   * Registers manifests/webhook.yaml against this fixture's webhook (url + caBundle, failurePolicy
   * Fail) for namespaces labelled with the returned selector; returns a function removing it.
   */
  registerWebhook(namespace: string): Promise<() => Promise<void>> {
    return registerFixtureWebhook(this.plane, this.server, namespace);
  }

  async stop(): Promise<void> {
    await this.scheduler?.stop();
    await this.kubelet?.stop();
    this.plugin?.stop();
    await this.server?.stop();
    for (const name of this.clientAuth === undefined ? [] : [this.clientAuth.caSecret, this.clientAuth.clientSecret]) {
      await this.core.deleteNamespacedSecret({ name, namespace: 'default' }).catch(() => undefined);
    }
    rmSync(this.certDir, { recursive: true, force: true });
  }

  /**
   * The HAMi device plugin on `node` dies: kubelet publishes allocatable nvidia.com/gpu 0 and
   * Allocate there fails; the node's register annotation stays. Resolves once the status is written.
   */
  async stopPlugin(node: string): Promise<void> {
    this.plugin?.stopReporting(node);
    await this.kubelet?.publishDevices(node);
  }

  /** The plugin on `node` is back: kubelet publishes its devices again. */
  async revivePlugin(node: string): Promise<void> {
    this.plugin?.reportAgain(node);
    await this.kubelet?.publishDevices(node);
  }

  /** Creates `count` simulated GPU nodes in a fresh group; pods select the group by label. */
  async createNodes(count: number, gpus = 4, gpuMemoryMiB = 24576): Promise<{ group: string; nodes: string[] }> {
    const group = uniqueName('grp');
    const nodes = Array.from({ length: count }, (_, index) => `${group}-n${index}`);
    // A few at a time: the large-cluster tests create hundreds.
    for (let start = 0; start < nodes.length; start += NODE_CREATE_BATCH) {
      await Promise.all(
        nodes.slice(start, start + NODE_CREATE_BATCH).map(async (name) => {
          this.nodes.add(name);
          await this.core.createNode({
            body: simulatedGpuNode({
              name,
              gpus,
              gpuMemoryMiB,
              labels: { [SIMULATED_LABEL]: 'true', [GROUP_LABEL]: group },
            }),
          });
        }),
      );
    }
    return { group, nodes };
  }
}

const NODE_CREATE_BATCH = 16;

export function gpuUuids(node: string, gpus = 4): string[] {
  return simulatedGpus({ name: node, gpus }).map((device) => device.uuid);
}

export function gpuPodSpec(
  name: string,
  group: string,
  limits: Record<string, string>,
  annotations: Record<string, string> = {},
): V1Pod {
  return {
    metadata: { name, annotations },
    spec: {
      schedulerName: 'hami-scheduler',
      nodeSelector: { [GROUP_LABEL]: group },
      containers: [{ name: 'main', image: 'cuda', resources: { limits } }],
    },
  };
}

export interface GpuLoad {
  slots: number;
  memoryMiB: number;
  cores: number;
}

/** Sums the allocated annotation of every bound pod per GPU: what invariant 4 bounds. */
export function loadPerGpu(pods: V1Pod[]): Map<string, GpuLoad> {
  const load = new Map<string, GpuLoad>();
  for (const pod of pods) {
    const encoded = pod.metadata?.annotations?.[ALLOCATED_ANNOTATION];
    if (encoded === undefined || pod.spec?.nodeName === undefined) continue;
    const allocation = decodeAllocation(encoded);
    if ('error' in allocation) throw new Error(`pod ${pod.metadata?.name ?? ''}: ${allocation.error}`);
    for (const device of allocation.flat()) {
      const current = load.get(device.uuid) ?? { slots: 0, memoryMiB: 0, cores: 0 };
      load.set(device.uuid, {
        slots: current.slots + 1,
        memoryMiB: current.memoryMiB + device.memoryMiB,
        cores: current.cores + device.cores,
      });
    }
  }
  return load;
}

/**
 * Registers the enclosing suite's hooks: before, builds the fixture with `make`, hands it to `use`
 * and starts it; after, stops it. The e2e suites share this instead of repeating the hooks.
 */
export function fixtureForSuite(make: () => ExtenderFixture, use: (fixture: ExtenderFixture) => void): void {
  let started: ExtenderFixture | undefined;
  before(async function () {
    this.timeout(120_000);
    started = make();
    use(started);
    await started.start();
  });
  after(async function () {
    this.timeout(60_000);
    await started?.stop();
  });
}
