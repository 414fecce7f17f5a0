import type { V1Pod } from '@kubernetes/client-node';
import { nodeOfPod } from '../hami/pod-node.js';
import type { ClusterCache } from '../cluster/cluster-cache.js';
import { failureText } from '../telemetry/api-failure.js';
import type { ReleasePath } from '../lock/lock-events.js';
import { ownerPodFrom } from '../lock/owner-pod.js';
import { BIND_PHASE_ANNOTATION } from '../hami/wire.js';
import { WorkQueue } from '../base/work-queue.js';

export interface WatchReleaser {
  /** Classifies the node's lock (store first, confirmed by the API) and frees it only if releasable. */
  releaseIfReleasable(
    node: string,
    path: ReleasePath,
  ): Promise<{ outcome: 'released' | 'kept' | 'not-locked' | 'not-owner' }>;
}

/**
 * Frees a pod's node lock when the pod watch shows it DELETED or with deletionTimestamp set, so locks
 * are freed even while the webhook is down: every node whose lock the store shows naming the pod.
 * It checks the cached node first: a pod that holds no lock costs no API call. The release goes
 * through the lock rules (NodeLocks releaseIfReleasable, RV-guarded), which decide by UID and
 * resourceVersion whom the lock was written for (lock/lock-owner.ts): a delete seen late (a lagging
 * watch) never frees the lock of a later incarnation of the name, and a pod that vanished from a
 * relist is judged with what kubelet may still admit, not by its stale copy (issue #42).
 *
 * It also frees, at once, a lock left on one node by a pod that the watch shows bound to another
 * (a replica killed mid-bind, then kube-scheduler placed the pod elsewhere): no bind to the first
 * node can still succeed, and its waiters should not wait for BIND_GRACE or the next sweep.
 */
export interface PodWatchReleaseDeps {
  cache: ClusterCache;
  locks: WatchReleaser;
  log?: (message: string) => void;
  /** Pause between two checks of a lock whose owner vanished before Allocate; grows to 4×. Default 250 ms. */
  followIntervalMs?: number;
  /** How long such a lock is followed before the sweeper is left to it; default 5 minutes (NODELOCK_EXPIRE). */
  followForMs?: number;
  /** The pause between two checks of a followed lock (the work queue's). */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  clock?: () => number;
}

/** Followed nodes whose lock is checked at once at most; the checks of one node never overlap. */
const FOLLOW_WORKERS = 16;

/** The deleted owners (namespace/name) whose lock on a node is followed, and until when. */
interface Follower {
  readonly owners: Set<string>;
  readonly until: number;
}

export function startPodWatchRelease(deps: PodWatchReleaseDeps): () => void {
  // One check per node at a time: a burst of updates of the same pod must not queue API reads.
  const checking = new Set<string>();
  /** node → its follower: one per node, whatever deleted owner its lock names now. */
  const following = new Map<string, Follower>();
  const clock = deps.clock ?? Date.now;
  const intervalMs = deps.followIntervalMs ?? 250;
  const followForMs = deps.followForMs ?? 300_000;
  /** Whether the lock on `node` still names a followed owner and the rules keep it. */
  const stillKept = async (node: string, owners: Set<string>): Promise<boolean> => {
    const lock = deps.cache.lockOf(node)?.value;
    if (lock?.kind !== 'owned' || !owners.has(`${lock.owner.namespace}/${lock.owner.name}`)) return false;
    try {
      return (await deps.locks.releaseIfReleasable(node, 'watch')).outcome === 'kept';
    } catch (error) {
      deps.log?.(
        `could not check the lock of ${lock.owner.namespace}/${lock.owner.name} on ${node} after its deletion: ` +
          failureText(error),
      );
      return true;
    }
  };
  /**
   * Frees the lock naming a deleted pod on `node` once the rules allow. A pod that vanished while
   * bound there and waiting for Allocate may still be admitted by kubelet from the watch event it
   * queued, and the plugin would resolve its Allocate through the lock: such a lock is freed only
   * once the rules (lock/kubelet-admission.ts) say kubelet is past the pod; until then it is checked
   * again, at most every `intervalMs`..4×`intervalMs`. One follower per node, whatever deleted owner
   * its lock names now (a same-name recreate or the next pod's delete joins it): the checks of a
   * node, each a few API reads while kubelet may still admit the owner, are rate limited per node.
   */
  const followers = new WorkQueue<string>({
    workers: FOLLOW_WORKERS,
    backoff: { initialMs: intervalMs, factor: 2, capMs: intervalMs * 4 },
    ...(deps.sleep ? { sleep: deps.sleep } : {}),
    clock,
    process: async (node) => {
      const follower = following.get(node);
      if (follower === undefined) return;
      if (clock() < follower.until && (await stillKept(node, follower.owners))) {
        followers.addRateLimited(node);
        return;
      }
      unfollow(node);
    },
    // Not a failed check (stillKept answers those): the follower ends, and a later delete starts another.
    onError: (node, error) => {
      unfollow(node);
      deps.log?.(`stopped following the lock on ${node}: ${failureText(error)}`);
    },
  });
  const unfollow = (node: string): void => {
    following.delete(node);
    followers.forget(node);
  };
  const follow = (node: string, namespace: string, name: string): void => {
    const follower = following.get(node);
    if (follower !== undefined) {
      follower.owners.add(`${namespace}/${name}`);
      return;
    }
    following.set(node, { owners: new Set([`${namespace}/${name}`]), until: clock() + followForMs });
    followers.add(node);
  };
  const releaseLeftBehind = (pod: V1Pod, namespace: string, name: string): void => {
    const boundTo = pod.spec?.nodeName;
    if (boundTo === undefined || boundTo === '') return;
    // On its own node the lock is the device plugin's to release, unless kubelet has admitted the pod
    // (its Allocate answered) while bind-phase still says allocating: the plugin left it behind.
    const admittedHere =
      pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION] === 'allocating' && ownerPodFrom(pod).admitted === true;
    for (const node of deps.cache.nodesLockedBy(namespace, name)) {
      if ((node === boundTo && !admittedHere) || checking.has(node)) continue;
      checking.add(node);
      void deps.locks
        .releaseIfReleasable(node, 'watch')
        .catch((error: unknown) => {
          deps.log?.(
            `could not release the lock ${namespace}/${name} left on ${node} ` +
              `(the pod is bound to ${boundTo}): ${failureText(error)}`,
          );
        })
        .finally(() => {
          checking.delete(node);
        });
    }
  };
  const unsubscribe = deps.cache.onPodChange((pod: V1Pod, change) => {
    const deleting = change === 'delete' || pod.metadata?.deletionTimestamp !== undefined;
    const name = pod.metadata?.name;
    const namespace = pod.metadata?.namespace;
    if (name === undefined || namespace === undefined) return;
    if (!deleting) {
      releaseLeftBehind(pod, namespace, name);
      return;
    }
    const node = nodeOfPod(pod as unknown as Record<string, unknown>);
    const awaitingAllocation =
      node !== undefined &&
      pod.spec?.nodeName === node &&
      pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION] === 'allocating';
    // Still there, bound here and not yet allocated: kubelet may still admit it and the plugin find it
    // through the lock. Its DELETED event (or its allocation) frees the lock.
    if (awaitingAllocation && change !== 'delete') return;
    // Every node whose lock names it: a pod never bound has no node to name, but a bind may have
    // locked a node for it and died before its Binding (a replica killed mid-bind); no bind of it can
    // succeed any more (kube-apiserver refuses to bind a pod being deleted). Gone while bound here
    // and waiting for Allocate, its lock is followed until kubelet is past it.
    for (const locked of deps.cache.nodesLockedBy(namespace, name)) follow(locked, namespace, name);
  });
  return () => {
    void followers.shutDown();
    unsubscribe();
  };
}
