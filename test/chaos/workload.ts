import type { AppsV1Api, CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { isTerminal, type Snapshot } from './observed-state.js';
import type { Prng } from './prng.js';
import type { Timeline } from './timeline.js';

/** How the device-plugin stand-in treats a pod: the chaos workload marks it with this label. */
export const PLUGIN_BEHAVIOUR_LABEL = 'chaos.vgpu-warden.io/plugin';
export type PluginBehaviour = 'ok' | 'fail' | 'stall';

export type WorkloadOp =
  | 'gpu-pod'
  | 'plain-pod'
  | 'graceful-delete'
  | 'force-delete'
  | 'recreate'
  | 'deployment'
  | 'scale'
  | 'delete-deployment';

export interface WorkloadOptions {
  namespace: string;
  schedulerName: string;
  /** Label the chaos nodes carry; every pod selects them. */
  nodeSelector: Record<string, string>;
  /**
   * Most GPUs the live GPU pods may ask for in total. With shares of at most 1/4 of a GPU and
   * enough nodes, any pending pod then fits somewhere, so "every pod is eventually bound" is a
   * fair check (see the runner for the arithmetic).
   */
  maxGpuUnits: number;
  /** For real nodes: the container's image and command, and host networking (loopback CNI only). */
  container?: { image: string; imagePullPolicy: string; command: readonly string[] };
  hostNetwork?: boolean;
}

const MAX_SHARE_MIB = 6000;
const MAX_SHARE_CORES = 25;

/**
 * The random workload: GPU and non-GPU pods, Deployments created and scaled, graceful and forced
 * deletes, same-name recreates, and pods the device plugin fails or never answers (stalled pods are
 * deleted a little later, as an operator would). Every choice comes from the seeded generator.
 */
export class Workload {
  readonly counts: Record<WorkloadOp | 'errors' | 'skipped-full', number> = {
    'gpu-pod': 0,
    'plain-pod': 0,
    'graceful-delete': 0,
    'force-delete': 0,
    recreate: 0,
    deployment: 0,
    scale: 0,
    'delete-deployment': 0,
    errors: 0,
    'skipped-full': 0,
  };
  private serial = 0;
  private readonly deployments = new Map<string, { replicas: number; gpus: number }>();
  private readonly stalled = new Map<string, number>();

  constructor(
    private readonly deps: {
      core: CoreV1Api;
      apps: AppsV1Api;
      random: Prng;
      timeline: Timeline;
      options: WorkloadOptions;
    },
  ) {}

  /** One step: draws an operation and carries it out against the latest snapshot. */
  async step(snapshot: Snapshot | undefined): Promise<void> {
    const { random } = this.deps;
    await this.deleteOverdueStalls();
    const op = random.weighted<WorkloadOp>([
      ['gpu-pod', 30],
      ['plain-pod', 5],
      ['graceful-delete', 10],
      ['force-delete', 7],
      ['recreate', 6],
      ['deployment', 2],
      ['scale', 6],
      ['delete-deployment', 1],
    ]);
    try {
      await this.run(op, snapshot);
    } catch (error) {
      // Faults make calls fail; the workload just goes on (as users retry).
      this.counts.errors++;
      this.deps.timeline.add(['workload'], `${op} failed: ${(error as Error).message.slice(0, 200)}`);
    }
  }

  private async run(op: WorkloadOp, snapshot: Snapshot | undefined): Promise<void> {
    const { random, core, apps, options } = this.deps;
    const { namespace } = options;
    const ownPods = (snapshot?.pods ?? []).filter(
      (pod) => !pod.deleting && !isTerminal(pod) && !pod.name.startsWith('d-'),
    );
    switch (op) {
      case 'gpu-pod': {
        const gpus = random.chance(0.2) ? 2 : 1;
        if (this.unitsInUse(snapshot) + gpus > options.maxGpuUnits) {
          this.counts['skipped-full']++;
          return;
        }
        const behaviour = random.weighted<PluginBehaviour>([
          ['ok', 90],
          ['fail', 6],
          ['stall', 4],
        ]);
        await this.createGpuPod(`g-${this.serial++}`, gpus, behaviour);
        this.counts['gpu-pod']++;
        return;
      }
      case 'plain-pod': {
        const name = `p-${this.serial++}`;
        await core.createNamespacedPod({ namespace, body: this.podBody(name, {}, 'ok') });
        this.deps.timeline.add([`${namespace}/${name}`], 'workload: created (no GPU)');
        this.counts['plain-pod']++;
        return;
      }
      case 'graceful-delete':
      case 'force-delete': {
        if (ownPods.length === 0) return;
        const victim = random.pick(ownPods);
        await core.deleteNamespacedPod({
          namespace,
          name: victim.name,
          ...(op === 'force-delete' ? { gracePeriodSeconds: 0 } : {}),
        });
        this.deps.timeline.add([`${namespace}/${victim.name}`], `workload: ${op}`);
        this.counts[op]++;
        return;
      }
      case 'recreate': {
        const gpuPods = ownPods.filter((pod) => pod.gpuCount > 0);
        if (gpuPods.length === 0) return;
        // Mostly a pod bound and still awaiting its Allocate (issue #42: a StatefulSet replacing a pod
        // that a lagging or paused kubelet may still admit from its queue; the lock names both).
        const awaiting = gpuPods.filter(
          (pod) => pod.nodeName !== undefined && pod.annotations['hami.io/bind-phase'] === 'allocating',
        );
        const victim = random.pick(awaiting.length > 0 && random.chance(0.7) ? awaiting : gpuPods);
        await core.deleteNamespacedPod({ namespace, name: victim.name, gracePeriodSeconds: 0 });
        this.deps.timeline.add(
          [`${namespace}/${victim.name}`],
          'workload: force-deleted to recreate under the same name',
        );
        // The same name, a new UID: a StatefulSet replacing its pod. Retried while the old one is still there.
        for (let attempt = 0; attempt < 20; attempt++) {
          try {
            await this.createGpuPod(victim.name, Math.max(1, victim.gpuCount), 'ok');
            this.counts.recreate++;
            return;
          } catch (error) {
            // 409 AlreadyExists while the old incarnation is still being removed: try again.
            if ((error as { code?: number }).code !== 409) throw error;
            await new Promise((done) => setTimeout(done, 100));
          }
        }
        return;
      }
      case 'deployment': {
        const gpus = 1;
        const replicas = random.int(1, 3);
        if (this.unitsInUse(snapshot) + replicas * gpus > options.maxGpuUnits) {
          this.counts['skipped-full']++;
          return;
        }
        const name = `d-${this.serial++}`;
        const template = this.podBody(name, this.gpuLimits(random, gpus), 'ok');
        await apps.createNamespacedDeployment({
          namespace,
          body: {
            metadata: { name },
            spec: {
              replicas,
              selector: { matchLabels: { deployment: name } },
              template: {
                metadata: { labels: { ...template.metadata?.labels, deployment: name } },
                spec: template.spec ?? { containers: [] },
              },
            },
          },
        });
        this.deployments.set(name, { replicas, gpus });
        this.deps.timeline.add(['workload'], `deployment ${name} created with ${replicas} replicas`);
        this.counts.deployment++;
        return;
      }
      case 'scale': {
        if (this.deployments.size === 0) return;
        const name = random.pick([...this.deployments.keys()]);
        const deployment = this.deployments.get(name);
        if (deployment === undefined) return;
        const replicas = random.int(0, 4);
        if (
          replicas > deployment.replicas &&
          this.unitsInUse(snapshot) + (replicas - deployment.replicas) * deployment.gpus > options.maxGpuUnits
        ) {
          this.counts['skipped-full']++;
          return;
        }
        await apps.patchNamespacedDeploymentScale({
          namespace,
          name,
          body: [{ op: 'replace', path: '/spec/replicas', value: replicas }],
        });
        deployment.replicas = replicas;
        this.deps.timeline.add(['workload'], `deployment ${name} scaled to ${replicas}`);
        this.counts.scale++;
        return;
      }
      case 'delete-deployment': {
        if (this.deployments.size === 0) return;
        const name = random.pick([...this.deployments.keys()]);
        await apps.deleteNamespacedDeployment({ namespace, name, propagationPolicy: 'Foreground' });
        this.deployments.delete(name);
        this.deps.timeline.add(['workload'], `deployment ${name} deleted`);
        this.counts['delete-deployment']++;
        return;
      }
    }
  }

  /** GPUs asked for by live GPU pods plus Deployment replicas not created yet. */
  private unitsInUse(snapshot: Snapshot | undefined): number {
    const live = (snapshot?.pods ?? []).filter((pod) => !isTerminal(pod) && pod.gpuCount > 0);
    let units = live.reduce((sum, pod) => sum + pod.gpuCount, 0);
    for (const [name, deployment] of this.deployments) {
      const existing = live.filter((pod) => pod.name.startsWith(`${name}-`)).length;
      units += Math.max(0, deployment.replicas - existing) * deployment.gpus;
    }
    return units;
  }

  private gpuLimits(random: Prng, gpus: number): Record<string, string> {
    return {
      'nvidia.com/gpu': String(gpus),
      'nvidia.com/gpumem': String(random.int(500, MAX_SHARE_MIB)),
      'nvidia.com/gpucores': String(random.int(0, MAX_SHARE_CORES)),
    };
  }

  private async createGpuPod(name: string, gpus: number, behaviour: PluginBehaviour): Promise<void> {
    const { random, core, options } = this.deps;
    const annotations: Record<string, string> = random.chance(0.3)
      ? { 'hami.io/node-scheduler-policy': random.pick(['binpack', 'spread']) }
      : {};
    await core.createNamespacedPod({
      namespace: options.namespace,
      body: this.podBody(name, this.gpuLimits(random, gpus), behaviour, annotations),
    });
    if (behaviour === 'stall') this.stalled.set(name, Date.now() + random.int(5_000, 20_000));
    this.deps.timeline.add([`${options.namespace}/${name}`], `workload: created, ${gpus} GPU(s), plugin ${behaviour}`);
  }

  private podBody(
    name: string,
    limits: Record<string, string>,
    behaviour: PluginBehaviour,
    annotations: Record<string, string> = {},
  ): V1Pod {
    return {
      metadata: { name, labels: { [PLUGIN_BEHAVIOUR_LABEL]: behaviour }, annotations },
      spec: {
        schedulerName: this.deps.options.schedulerName,
        nodeSelector: this.deps.options.nodeSelector,
        terminationGracePeriodSeconds: 1,
        ...(this.deps.options.hostNetwork === true ? { hostNetwork: true, automountServiceAccountToken: false } : {}),
        containers: [
          {
            name: 'main',
            ...(this.deps.options.container === undefined
              ? { image: 'registry.invalid/chaos:1' }
              : { ...this.deps.options.container, command: [...this.deps.options.container.command] }),
            resources: { limits },
          },
        ],
      },
    };
  }

  /** Stalled pods are deleted after a while, as an operator would: their node is blocked meanwhile. */
  private async deleteOverdueStalls(): Promise<void> {
    const now = Date.now();
    for (const [name, due] of this.stalled) {
      if (due > now) continue;
      this.stalled.delete(name);
      try {
        await this.deps.core.deleteNamespacedPod({ namespace: this.deps.options.namespace, name });
        this.deps.timeline.add([`${this.deps.options.namespace}/${name}`], 'workload: deleted the stalled pod');
      } catch {
        // Already gone (deleted or recreated meanwhile).
      }
    }
  }

  /** At the end: every stalled pod goes, so the quiesce phase can expect every other pod bound. */
  async deleteAllStalls(): Promise<void> {
    for (const name of [...this.stalled.keys()]) this.stalled.set(name, 0);
    await this.deleteOverdueStalls();
  }
}
