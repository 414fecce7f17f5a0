import type { V1Pod } from '@kubernetes/client-node';
import type { ClusterCache, PodChange } from '../cluster/cluster-cache.js';
import { viewPod, type PlacementDefaults } from './gpu-placement.js';
import { burstKeyOf, shapeOf } from './pod-shape.js';

/**
 * GPU pods waiting for a node, by burst (pod-shape.ts `burstKeyOf`): how many more pods like the
 * one being placed are coming. Binpack sizes its packing plan by it (packing-plan.ts), so that a
 * burst of 200 opens the 5 nodes it needs at once instead of one at a time or all 100.
 *
 * Fed by the state store's pod changes; each change costs one map update, and a bound pod is
 * dropped before its key is computed (the key parses the pod's requests), so a store of 40,000
 * running pods costs nothing here.
 */
export class PendingBursts {
  private readonly byKey = new Map<string, Set<string>>();
  private readonly keyOfUid = new Map<string, string>();

  /** `keyOf` names the burst of a pending GPU pod, undefined for any other pod. */
  constructor(private readonly keyOf: (pod: V1Pod) => string | undefined) {}

  observe(pod: V1Pod, change: PodChange): void {
    const uid = pod.metadata?.uid;
    if (uid === undefined) return;
    const key = change === 'delete' || !isPending(pod) ? undefined : this.keyOf(pod);
    const known = this.keyOfUid.get(uid);
    if (known === key) return;
    if (known !== undefined) this.drop(uid, known);
    if (key === undefined) return;
    this.keyOfUid.set(uid, key);
    let members = this.byKey.get(key);
    if (members === undefined) {
      members = new Set();
      this.byKey.set(key, members);
    }
    members.add(uid);
  }

  /**
   * Pending pods of the burst, at least 1 (the pod being placed, which the store may not have
   * seen yet) and at most `limit`, leaving out those `placed` says already count as usage on a
   * node (assumed by a bind in flight). Stops at `limit`: cost bounded whatever the backlog.
   */
  count(key: string, placed: (uid: string) => boolean, limit: number): number {
    let count = 0;
    for (const uid of this.byKey.get(key) ?? []) {
      if (count >= limit) break;
      if (!placed(uid)) count += 1;
    }
    return Math.max(1, count);
  }

  /** Pods tracked, all bursts together (for tests and telemetry). */
  get size(): number {
    return this.keyOfUid.size;
  }

  private drop(uid: string, key: string): void {
    this.keyOfUid.delete(uid);
    const members = this.byKey.get(key);
    members?.delete(uid);
    if (members?.size === 0) this.byKey.delete(key);
  }
}

/** Unbound, not being deleted, not ended: kube-scheduler still has to place it. */
function isPending(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  return (
    !pod.spec?.nodeName && pod.metadata?.deletionTimestamp === undefined && phase !== 'Succeeded' && phase !== 'Failed'
  );
}

/** No namespace quota in a burst key: a pending pod's budget changes with every pod bound beside it. */
const NO_QUOTA = { quotaBudget: () => undefined };

/**
 * The burst a pending pod belongs to, keyed as prioritize keys the pod it places; undefined for a
 * pod that wants no GPU.
 */
export function pendingBurstKey(pod: V1Pod, defaults: PlacementDefaults): string | undefined {
  const view = viewPod(pod, defaults, NO_QUOTA);
  return view.wantsGpu && view.problem === undefined ? burstKeyOf(shapeOf(view), pod) : undefined;
}

/** Pending bursts kept current from the store's pod changes (and the pods it already has); `stop` unsubscribes. */
export function trackPendingBursts(
  cache: Pick<ClusterCache, 'onPodChange' | 'allPods'>,
  defaults: PlacementDefaults,
): { bursts: PendingBursts; stop: () => void } {
  const bursts = new PendingBursts((pod) => pendingBurstKey(pod, defaults));
  const stop = cache.onPodChange((pod, change) => {
    bursts.observe(pod, change);
  });
  for (const pod of cache.allPods()) bursts.observe(pod, 'add');
  return { bursts, stop };
}
