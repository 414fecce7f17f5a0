import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { ClusterCache } from '../cluster/cluster-cache.js';
import type { ListWatchSource } from '../cluster/reflector.js';

/** A source whose LIST answers with `items` and whose watch delivers nothing until it is stopped. */
export function listedSource<T>(items: readonly T[]): ListWatchSource<T> {
  return {
    list: () => Promise.resolve({ items: [...items], resourceVersion: '0' }),
    watch: (_resourceVersion, _handlers, signal) => new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      else signal.addEventListener('abort', () => { resolve(); }, { once: true });
    }),
  };
}

/**
 * The state store filled from one LIST of nodes and pods, synced and stopped: the same store
 * filter and bind fit pods against (inventory parsing, usage of bound pods, unreadable
 * allocations counted as the store counts them), without a watch. No I/O.
 */
export async function snapshotCache(nodes: readonly V1Node[], pods: readonly V1Pod[]): Promise<ClusterCache> {
  const cache = new ClusterCache({ sources: { nodes: listedSource(nodes), pods: listedSource(pods) } });
  await cache.start();
  await cache.stop();
  return cache;
}
