import type { V1Pod } from '@kubernetes/client-node';
import { nodeOfPod } from '../admission/delete-release.js';
import type { ClusterCache } from '../cluster/cluster-cache.js';
import { describeError } from '../errors.js';
import { isOwnedBy, NODE_LOCK_ANNOTATION, parseLockValue } from '../lock/lock-value.js';
import { deletionFence, deletionTimestampOf } from '../lock/deletion-fence.js';
import type { ReleaseOptions, ReleasePath, ReleaseResult } from '../lock/node-locks.js';

export interface WatchReleaser {
  release(node: string, pod: { namespace: string; name: string }, path: ReleasePath, options?: ReleaseOptions): Promise<ReleaseResult>;
}

/**
 * Frees a pod's node lock when the pod watch shows it DELETED or with deletionTimestamp set, so locks
 * are freed even while the webhook is down. It checks the cached node first: a pod that holds no lock
 * costs no API call; the release itself is owner-checked and RV-guarded through NodeLocks.
 */
export function startPodWatchRelease(deps: { cache: ClusterCache; locks: WatchReleaser; log?: (message: string) => void }): () => void {
  return deps.cache.onPodChange((pod: V1Pod, change) => {
    const deleting = change === 'delete' || pod.metadata?.deletionTimestamp !== undefined;
    const name = pod.metadata?.name;
    const namespace = pod.metadata?.namespace;
    if (!deleting || name === undefined || namespace === undefined) return;
    const node = nodeOfPod(pod as unknown as Record<string, unknown>);
    if (node === undefined) return;
    const lock = deps.cache.node(node)?.metadata?.annotations?.[NODE_LOCK_ANNOTATION];
    if (lock === undefined || !isOwnedBy(parseLockValue(lock), { namespace, name })) return;
    const fence = deletionFence({ uid: pod.metadata?.uid, deletionTimestamp: deletionTimestampOf(pod.metadata), observedAt: new Date() }, deps.cache);
    void deps.locks.release(node, { namespace, name }, 'watch', { fence }).catch((error: unknown) => {
      deps.log?.(`could not release the lock of ${namespace}/${name} on ${node} after its deletion: ${describeError(error)}`);
    });
  });
}
