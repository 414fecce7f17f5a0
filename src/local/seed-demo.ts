import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { NODE_LOCK_ANNOTATION, parseLockValue } from '../lock/lock-value.js';
import { BIND_PHASE_ANNOTATION } from '../lock/owner-pod.js';

export const SEED_VICTIM = 'seed-victim';
export const SEED_REPLACEMENT = 'seed-replacement';

export interface SeedDemoResult {
  /** From the victim's delete to its lock being gone (undefined if the replacement's bind took it over). */
  releasedAfterMs: number | undefined;
  /** From the victim's delete to the replacement bound and allocated. */
  boundAfterMs: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function gpuPod(name: string, node: string): V1Pod {
  return {
    metadata: { name, labels: { app: 'seed-demo' } },
    spec: {
      nodeSelector: { 'kubernetes.io/hostname': node },
      containers: [{ name: 'cuda', image: 'nvidia/cuda:12.4.0-base', resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '4000' } } }],
    },
  };
}

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`seed demo: timed out waiting for ${what}`);
    await sleep(5);
  }
}

/**
 * The seed scenario on the local cluster: a GPU pod is deleted the moment its node lock appears
 * (the simulated device plugin is told to never allocate it), then a replacement GPU pod for the
 * same node is created. Here the DELETE webhook, the pod watch, the sweeper or the next bind frees
 * it. HAMi v2.10 frees such a lock only when its next bind to that node finds the owner gone (1.8 s
 * and 3.2 s measured); it keeps a lock for the whole NODELOCK_EXPIRE (5 minutes) only when its pod
 * was deleted gracefully after the bind, which needs a kubelet to finish the delete (real nodes).
 */
export async function runSeedDemo(deps: { core: CoreV1Api; namespace: string; node: string; say: (line: string) => void }): Promise<SeedDemoResult> {
  const { core, namespace, node, say } = deps;
  const lockOf = async () => (await core.readNode({ name: node })).metadata?.annotations?.[NODE_LOCK_ANNOTATION];
  say(`seed demo: creating GPU pod ${namespace}/${SEED_VICTIM} for ${node}; it will be deleted the moment its lock appears`);
  await core.createNamespacedPod({ namespace, body: gpuPod(SEED_VICTIM, node) });
  const lock = await until('the victim\'s lock', async () => {
    const value = await lockOf();
    const parsed = value === undefined ? undefined : parseLockValue(value);
    return parsed?.kind === 'owned' && parsed.owner.name === SEED_VICTIM ? value : undefined;
  }, 60_000);
  say(`seed demo: ${node} locked: ${lock}; deleting ${SEED_VICTIM} now`);
  const deleted = Date.now();
  await core.deleteNamespacedPod({ name: SEED_VICTIM, namespace, gracePeriodSeconds: 0 });
  await core.createNamespacedPod({ namespace, body: gpuPod(SEED_REPLACEMENT, node) });
  let releasedAfterMs: number | undefined;
  const bound = await until('the replacement to bind', async () => {
    if (releasedAfterMs === undefined) {
      const value = await lockOf();
      if (value === undefined || !value.endsWith(`,${SEED_VICTIM}`)) releasedAfterMs = Date.now() - deleted;
    }
    const pod = await core.readNamespacedPod({ name: SEED_REPLACEMENT, namespace });
    return pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION] === 'success' ? pod : undefined;
  }, 60_000);
  const boundAfterMs = Date.now() - deleted;
  say(`seed demo: the victim's lock was freed ${releasedAfterMs ?? boundAfterMs} ms after its delete`);
  say(`seed demo: replacement pod ${SEED_REPLACEMENT} bound to ${bound.spec?.nodeName ?? '?'} and allocated ${boundAfterMs} ms after the delete (HAMi v2.10: its next bind to the node takes the lock over, 1.8-3.2 s measured; it waits the 5m expiry only for a pod deleted gracefully after its bind)`);
  return { releasedAfterMs, boundAfterMs };
}
