import { PatchStrategy, setHeaderOptions, type CoreV1Api, type V1Node, type V1Pod } from '@kubernetes/client-node';
import type { ClusterCache } from '../cluster/cluster-cache.js';
import { decodeAllocation, encodeAllocation } from '../devices/allocation-codec.js';
import { describeError } from '../base/errors.js';
import { parseLockValue, type PodRef } from '../lock/lock-value.js';
import type { NodeLocks } from '../lock/node-locks.js';
import { BIND_PHASE_ANNOTATION, NODE_LOCK_ANNOTATION, TO_ALLOCATE_ANNOTATION } from '../hami/wire.js';
import { sleep } from '../base/abort.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const MAX_SERVED = 10_000;

/** What the simulated plugin does for a pod: allocate it, fail its Allocate, or never be called (stall). */
export type SimulatedOutcome = 'allocate' | 'fail' | 'stall';

export interface DevicePluginSimulatorDeps {
  core: CoreV1Api;
  /** A cache of its own (nodes and pods), as the real plugin has its own view. */
  cache: ClusterCache;
  /** Used for the owner-checked, RV-guarded lock release HAMi's plugin does. */
  locks: NodeLocks;
  /** Nodes this simulator serves (each real node runs its own plugin). */
  isSimulated: (node: string) => boolean;
  /** Time between the pod being bound and each container's Allocate. */
  allocationDelayMs?: number;
  behaviour?: (pod: V1Pod) => SimulatedOutcome;
  log?: (message: string) => void;
}

/**
 * Acts like HAMi's NVIDIA device plugin on the lock and the annotations (hami-wire-contract §5), for
 * kubelet-less nodes: when a node's lock names a pod that is bound to that node, it "allocates"
 * container by container — blanking each consumed segment of hami.io/vgpu-devices-to-allocate —
 * then sets hami.io/bind-phase=success and deletes the lock (owner-checked). A failing Allocate sets
 * bind-phase=failed and deletes the lock, as PodAllocationFailed does.
 */
export class DevicePluginSimulator {
  private readonly busy = new Set<string>();
  /**
   * Pod incarnations already served on a node (`uid@node`), oldest first, stalled ones included
   * (never looked at again: kubelet would not retry either). kubelet admits a pod once, so it calls
   * Allocate once; the lock can still name the pod here after the release (this cache has not seen
   * it yet), and serving it again wrote its annotations and read the node a second time (about half
   * the pods of a 200-pod burst in bench:extender). Bounded: the oldest are forgotten.
   */
  private readonly served = new Set<string>();
  private readonly stopListening: (() => void)[] = [];
  private stopped = false;
  readonly allocated: string[] = [];

  constructor(private readonly deps: DevicePluginSimulatorDeps) {}

  start(): void {
    this.stopListening.push(
      this.deps.cache.onNodeChange((node) => {
        this.consider(node);
      }),
    );
    this.stopListening.push(
      this.deps.cache.onPodChange((pod) => {
        const node = pod.spec?.nodeName;
        const current = node === undefined ? undefined : this.deps.cache.node(node);
        if (current) this.consider(current);
      }),
    );
    for (const name of this.deps.cache.nodeNames()) {
      const node = this.deps.cache.node(name);
      if (node) this.consider(node);
    }
  }

  stop(): void {
    this.stopped = true;
    for (const stop of this.stopListening.splice(0)) stop();
  }

  private consider(node: V1Node): void {
    const name = node.metadata?.name;
    const lock = node.metadata?.annotations?.[NODE_LOCK_ANNOTATION];
    if (this.stopped || name === undefined || lock === undefined || !this.deps.isSimulated(name) || this.busy.has(name))
      return;
    const value = parseLockValue(lock);
    if (value.kind !== 'owned') return;
    const pod = this.deps.cache.pod(value.owner.namespace, value.owner.name);
    // kubelet calls Allocate only once the pod is bound to its node.
    const incarnation = `${pod?.metadata?.uid ?? ''}@${name}`;
    if (pod?.spec?.nodeName !== name || this.served.has(incarnation)) return;
    this.served.add(incarnation);
    if (this.served.size > MAX_SERVED) this.served.delete(this.served.values().next().value ?? '');
    this.busy.add(name);
    void this.allocate(name, value.owner, pod)
      .catch((error: unknown) => {
        this.deps.log?.(
          `simulated Allocate on ${name} for ${value.owner.namespace}/${value.owner.name} failed: ` +
            describeError(error),
        );
      })
      .finally(() => {
        this.busy.delete(name);
        // A macrotask, not a microtask: a lock that stays in place must not become a hot loop.
        setImmediate(() => {
          const latest = this.deps.cache.node(name);
          if (latest && !this.stopped) this.consider(latest);
        });
      });
  }

  private async allocate(node: string, owner: PodRef, pod: V1Pod): Promise<void> {
    const outcome = this.deps.behaviour?.(pod) ?? 'allocate';
    // Stalled: consider() already counts it served, so it is never looked at again.
    if (outcome === 'stall') return;
    const encoded = pod.metadata?.annotations?.[TO_ALLOCATE_ANNOTATION];
    const allocation = encoded === undefined ? { error: 'device request not found' } : decodeAllocation(encoded);
    if (outcome === 'fail' || 'error' in allocation) {
      await this.finish(node, owner, 'failed');
      return;
    }
    const remaining = allocation.map((devices) => [...devices]);
    for (const [index, devices] of allocation.entries()) {
      if (devices.length === 0) continue;
      await sleep(this.deps.allocationDelayMs ?? 20);
      remaining[index] = [];
      await this.deps.core.patchNamespacedPod(
        {
          name: owner.name,
          namespace: owner.namespace,
          body: { metadata: { annotations: { [TO_ALLOCATE_ANNOTATION]: encodeAllocation(remaining) } } },
        },
        mergePatch,
      );
    }
    this.allocated.push(`${owner.namespace}/${owner.name}@${node}`);
    await this.finish(node, owner, 'success');
  }

  private async finish(node: string, owner: PodRef, phase: 'success' | 'failed'): Promise<void> {
    await this.deps.core.patchNamespacedPod(
      {
        name: owner.name,
        namespace: owner.namespace,
        body: { metadata: { annotations: { [BIND_PHASE_ANNOTATION]: phase } } },
      },
      mergePatch,
    );
    await this.deps.locks.release(node, owner, 'owner');
  }
}
