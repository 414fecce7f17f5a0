import type { CoreV1Api, V1Node, V1Pod } from '@kubernetes/client-node';
import type { ObservedGpu, ObservedNode, ObservedPod, Snapshot } from './observed-state.js';
import type { Timeline } from './timeline.js';

const GPU_RESOURCES = ['nvidia.com/gpu'];
const REGISTER_ANNOTATION = 'hami.io/node-nvidia-register';
const LOCK_ANNOTATION = 'hami.io/mutex.lock';
const BIND_PHASE = 'hami.io/bind-phase';

/** GPUs from HAMi's v2.8+ JSON inventory (hami-wire-contract §4.2), read on our own. */
function gpusOf(node: V1Node): ObservedGpu[] {
  const raw = node.metadata?.annotations?.[REGISTER_ANNOTATION];
  if (raw === undefined) return [];
  try {
    const devices = JSON.parse(raw) as { id?: string; count?: number; devmem?: number; devcore?: number }[];
    return devices.map((device) => ({
      uuid: device.id ?? '',
      memoryMiB: device.devmem ?? 0,
      cores: device.devcore ?? 0,
      slots: device.count ?? 0,
    }));
  } catch {
    return [];
  }
}

function gpuCount(pod: V1Pod): number {
  let total = 0;
  for (const container of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
    for (const resource of GPU_RESOURCES) {
      const value = container.resources?.limits?.[resource] ?? container.resources?.requests?.[resource];
      if (value !== undefined) total += Number(value) || 0;
    }
  }
  return total;
}

function observePod(pod: V1Pod): ObservedPod {
  return {
    namespace: pod.metadata?.namespace ?? '',
    name: pod.metadata?.name ?? '',
    uid: pod.metadata?.uid ?? '',
    nodeName: pod.spec?.nodeName || undefined,
    phase: pod.status?.phase,
    deleting: pod.metadata?.deletionTimestamp != null,
    annotations: pod.metadata?.annotations ?? {},
    gpuCount: gpuCount(pod),
  };
}

/**
 * Reads the chaos namespace's pods and the chaos nodes from the API (directly, never through the
 * fault proxies) and writes what changed to the time line. A failed read (the apiserver is being
 * restarted) yields no snapshot; the checker simply skips that tick.
 */
export class ClusterObserver {
  private previousPods = new Map<string, string>();
  private previousLocks = new Map<string, string | undefined>();

  constructor(
    private readonly deps: { core: CoreV1Api; namespace: string; nodeSelector: string; timeline: Timeline },
  ) {}

  /**
   * Nodes and pods as of one etcd revision: the pods are listed at exactly the nodes' list
   * resourceVersion. Two lists taken side by side could show a lock already freed beside its owner
   * not yet deleted (a false released-while-awaiting, seen in a 30-minute run).
   */
  async snapshot(): Promise<Snapshot | undefined> {
    try {
      const nodes = await this.deps.core.listNode({ labelSelector: this.deps.nodeSelector });
      const revision = nodes.metadata?.resourceVersion;
      if (revision === undefined) return undefined;
      const pods = await this.deps.core.listNamespacedPod({
        namespace: this.deps.namespace,
        resourceVersion: revision,
        resourceVersionMatch: 'Exact',
      });
      const at = Date.now();
      const observedPods = pods.items.map(observePod);
      const observedNodes: ObservedNode[] = nodes.items.map((node) => ({
        name: node.metadata?.name ?? '',
        gpus: gpusOf(node),
        lock: node.metadata?.annotations?.[LOCK_ANNOTATION],
      }));
      this.record(observedPods, observedNodes, at);
      return { at, pods: observedPods, nodes: observedNodes };
    } catch {
      return undefined;
    }
  }

  private record(pods: ObservedPod[], nodes: ObservedNode[], at: number): void {
    const seen = new Map<string, string>();
    for (const pod of pods) {
      const key = `${pod.namespace}/${pod.name}`;
      const state = `uid=${pod.uid.slice(0, 8)} node=${pod.nodeName ?? '-'} phase=${pod.phase ?? '-'} bind-phase=${pod.annotations[BIND_PHASE] ?? '-'}${pod.deleting ? ' deleting' : ''}`;
      seen.set(key, state);
      if (this.previousPods.get(key) !== state) this.deps.timeline.add([key], state, at);
    }
    for (const key of this.previousPods.keys()) if (!seen.has(key)) this.deps.timeline.add([key], 'gone', at);
    this.previousPods = seen;
    for (const node of nodes) {
      if (this.previousLocks.get(node.name) !== node.lock) {
        const owner = node.lock?.split(',').slice(1).join('/');
        this.deps.timeline.add(
          [`node/${node.name}`, ...(owner ? [owner] : [])],
          `lock on ${node.name}: ${node.lock ?? '(free)'}`,
          at,
        );
      }
      this.previousLocks.set(node.name, node.lock);
    }
  }
}
