import type { V1Node, V1Pod, V1ResourceQuota } from '@kubernetes/client-node';
import { ClusterCache } from '../cluster/cluster-cache.js';
import type { ListWatchSource } from '../cluster/reflector.js';
import { untilAborted } from '../base/abort.js';

/** A source whose LIST answers with `items` and whose watch delivers nothing until it is stopped. */
export function listedSource<T>(items: readonly T[]): ListWatchSource<T> {
  return {
    list: () => Promise.resolve({ items: [...items], resourceVersion: '0' }),
    watch: (_resourceVersion, _handlers, signal) => untilAborted(signal),
  };
}

/**
 * The state store filled from one LIST of nodes and pods (and ResourceQuotas, when given), synced
 * and stopped: the same store filter and bind fit pods against (inventory parsing, usage of bound
 * pods, unreadable allocations counted as the store counts them, namespace GPU quotas), without a
 * watch. No I/O.
 */
export async function snapshotCache(
  nodes: readonly V1Node[],
  pods: readonly V1Pod[],
  quotas?: readonly V1ResourceQuota[],
): Promise<ClusterCache> {
  const cache = new ClusterCache({
    sources: {
      nodes: listedSource(nodes),
      pods: listedSource(pods),
      ...(quotas === undefined ? {} : { quotas: listedSource(quotas) }),
    },
  });
  await cache.start();
  await cache.stop();
  return cache;
}
