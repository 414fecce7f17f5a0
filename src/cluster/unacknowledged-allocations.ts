import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { nodeAwaitingAcknowledgement } from '../lock/kubelet-acknowledgement.js';
import type { DerivedIndex, IndexEffects } from './derived-index.js';
import type { ObjectChange } from './object-store.js';

/**
 * Allocations the node's kubelet has not acknowledged yet, and why the next bind there waits.
 *
 * HAMi's device plugin serves "the pod the node lock names", then marks it allocated and releases
 * the lock; kubelet writes the answer into its device checkpoint when the Allocate call returns.
 * A kubelet that dies between the two (the plugin's side effects done, the answer not persisted)
 * has no record of the allocation, so after its restart it admits the pod again and calls Allocate
 * again. If the lock names the next pod by then, the plugin hands the next pod's GPUs to the old one,
 * whose container then runs with them (chaos on real nodes, seed 23: kubelet restarted right after
 * an Allocate). So a bind waits while a pod on the node is past the lock but not yet acknowledged.
 *
 * The acknowledgement is `status.startTime`: kubelet sets it in the first status it writes for a
 * pod, after admission (so after the device checkpoint, kubelet v1.34 devicemanager) or in its
 * rejection. A terminal phase needs nothing more (kubelet never admits such a pod). A pod being
 * deleted still counts: a restarted kubelet admits a terminating pod it has not synced yet.
 * Only pods a HAMi-style bind placed (they carry hami.io/bind-phase) are asked about, and only on
 * nodes a kubelet registered (status.nodeInfo.kubeletVersion): a node without one (a node object
 * made by hand, a simulated node) has nobody to restart.
 */

/** Whether a kubelet ever registered this node (it reports its version from the first status on). Pure. */
export function kubeletRegistered(node: V1Node | undefined): boolean {
  return (node?.status?.nodeInfo?.kubeletVersion ?? '') !== '';
}

export interface UnacknowledgedPod {
  namespace: string;
  name: string;
  uid: string;
  /** When this process first saw the pod waiting (not the pod's own stamps, which its owner may write). */
  sinceMs: number;
}

/**
 * The pods awaiting acknowledgement, per node, as the state store's pod watch shows them. Each
 * entry is dropped on the update that acknowledges it or on the pod's deletion; `waiting` leaves out
 * entries older than the caller's bound, so a kubelet that never answers holds a node no longer
 * than a lock awaiting allocation would (NODELOCK_EXPIRE).
 */
export class UnacknowledgedAllocations implements DerivedIndex {
  private readonly byNode = new Map<string, Map<string, UnacknowledgedPod>>();
  private readonly nodeOfUid = new Map<string, string>();

  constructor(private readonly clock: () => number) {}

  /** A bind waiting for kubelet to acknowledge a pod parks with the node's lock waiters: wakes them when it is. */
  onPod(change: ObjectChange<V1Pod>, _delivery: unknown, effects: IndexEffects): void {
    const uid = change.object.metadata?.uid;
    const left =
      change.type !== 'delete' ? this.upsert(change.object) : uid === undefined ? undefined : this.remove(uid);
    if (left !== undefined) effects.wake(left);
  }

  /** Records the pod's current state; returns the node whose set lost an entry, if any. */
  upsert(pod: V1Pod): string | undefined {
    const uid = pod.metadata?.uid;
    if (uid === undefined) return undefined;
    const node = nodeAwaitingAcknowledgement(pod);
    const before = this.nodeOfUid.get(uid);
    if (node === before) return undefined;
    const left = before === undefined ? undefined : this.drop(uid, before);
    if (node !== undefined) {
      let pods = this.byNode.get(node);
      if (!pods) this.byNode.set(node, (pods = new Map<string, UnacknowledgedPod>()));
      pods.set(uid, {
        namespace: pod.metadata?.namespace ?? '',
        name: pod.metadata?.name ?? '',
        uid,
        sinceMs: this.clock(),
      });
      this.nodeOfUid.set(uid, node);
    }
    return left;
  }

  /** Forgets a deleted pod; returns the node whose set lost it, if any. */
  remove(uid: string): string | undefined {
    const node = this.nodeOfUid.get(uid);
    return node === undefined ? undefined : this.drop(uid, node);
  }

  /** Pods on `node` awaiting acknowledgement for at most `maxAgeMs`, without `excludeUid`, oldest first. */
  waiting(node: string, maxAgeMs: number, excludeUid?: string): UnacknowledgedPod[] {
    const now = this.clock();
    const found: UnacknowledgedPod[] = [];
    for (const entry of this.byNode.get(node)?.values() ?? []) {
      if (entry.uid !== excludeUid && now - entry.sinceMs <= maxAgeMs) found.push(entry);
    }
    return found.sort((a, b) => a.sinceMs - b.sinceMs);
  }

  /** When this process first saw the pod waiting, if it is waiting. */
  sinceMs(uid: string): number | undefined {
    const node = this.nodeOfUid.get(uid);
    return node === undefined ? undefined : this.byNode.get(node)?.get(uid)?.sinceMs;
  }

  private drop(uid: string, node: string): string {
    this.nodeOfUid.delete(uid);
    const pods = this.byNode.get(node);
    pods?.delete(uid);
    if (pods?.size === 0) this.byNode.delete(node);
    return node;
  }
}
