/**
 * HAMi's GetPendingPod(node) (wire contract §5 "Finding the pod"): kubelet's Allocate carries no pod
 * identity, so the plugin takes "the pod being allocated" to be the one the node lock names, read
 * by name with no phase, node or UID check. Only when the lock names no pod does HAMi fall back to
 * listing the node's pods; the stand-in does that only when asked (`fallback: true`), so a test
 * sees every Allocate the lock alone cannot explain.
 *
 * `lockOnly: true` is HAMi #3095 (an open PR against main, for #3076): GetPendingPod serves only the
 * pod the lock names and has no list fallback at all, because a pod can write its own `hami.io/`
 * annotations but not the node's lock. With no lock, a lock naming no pod (the legacy bare
 * timestamp) or a lock naming a pod that cannot be read, the lookup fails. That is what the
 * stand-in's default already does; the mode makes it a stated HAMi behaviour, refuses to be combined
 * with the fallback, and says in its errors which rule failed the call. Its texts are the stand-in's
 * (HAMi's `no binding pod found on node <node>` first, so a search for HAMi's text still finds them).
 */
import type { V1Pod } from '@kubernetes/client-node';
import { parseNodeLock } from './node-lock.js';
import type { PluginApi } from './plugin-api.js';
import { BIND_PHASE, BIND_PHASE_ALLOCATING, BIND_PHASE_SUCCESS, BIND_TIME, NODE_LOCK, VGPU_NODE } from './wire.js';

export class PendingPodError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PendingPodError';
  }
}

export interface PendingPod {
  pod: V1Pod;
  /** `lock`: named by the node lock; `fallback`: found by HAMi's list fallback. */
  via: 'lock' | 'fallback';
  /** The lock value read from the node (undefined when there was none). */
  lock: string | undefined;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The fallback's test: a Pending pod of this node whose bind is underway or just done. */
function isBindingPod(pod: V1Pod, node: string): boolean {
  const annotations = pod.metadata?.annotations ?? {};
  const phase = annotations[BIND_PHASE];
  return (
    pod.status?.phase === 'Pending' &&
    annotations[BIND_TIME] !== undefined &&
    (phase === BIND_PHASE_ALLOCATING || phase === BIND_PHASE_SUCCESS) &&
    annotations[VGPU_NODE] === node
  );
}

export interface PendingPodOptions {
  /** HAMi v2.10's list fallback when the lock names no pod. */
  fallback: boolean;
  /** HAMi #3095: only the pod the lock names, never the list (excludes `fallback`). */
  lockOnly?: boolean;
}

/** Suffix of the lock-only mode's errors: which rule failed the call. */
const LOCK_ONLY = 'the plugin serves only the pod the node lock names (HAMi #3095)';

export async function getPendingPod(api: PluginApi, node: string, options: PendingPodOptions): Promise<PendingPod> {
  if (options.lockOnly === true && options.fallback) {
    throw new PendingPodError(
      'the lock-only lookup (HAMi #3095) has no list fallback: fallback and lockOnly exclude each other',
    );
  }
  let lock: string | undefined;
  try {
    lock = (await api.readNode(node)).metadata?.annotations?.[NODE_LOCK];
  } catch (error) {
    throw new PendingPodError(`failed to get node ${node}: ${describe(error)}`, { cause: error });
  }
  if (lock !== undefined) {
    let parsed;
    try {
      parsed = parseNodeLock(lock);
    } catch (error) {
      throw new PendingPodError(describe(error), { cause: error });
    }
    if (parsed.format === 'current' && parsed.namespace !== '' && parsed.name !== '') {
      try {
        return { pod: await api.readPod(parsed.namespace, parsed.name), via: 'lock', lock };
      } catch (error) {
        const rule = options.lockOnly === true ? `; ${LOCK_ONLY}` : '';
        throw new PendingPodError(
          `failed to get pod ${parsed.namespace}/${parsed.name} named by the node lock: ${describe(error)}${rule}`,
          { cause: error },
        );
      }
    }
    if (options.lockOnly === true)
      throw new PendingPodError(`no binding pod found on node ${node}: its lock "${lock}" names no pod; ${LOCK_ONLY}`);
  }
  if (options.lockOnly === true)
    throw new PendingPodError(`no binding pod found on node ${node}: no node lock; ${LOCK_ONLY}`);
  if (options.fallback) {
    let pods: V1Pod[];
    try {
      pods = await api.listPodsOnNode(node);
    } catch (error) {
      throw new PendingPodError(`failed to list pods on node ${node}: ${describe(error)}`, { cause: error });
    }
    const pod = pods.find((candidate) => isBindingPod(candidate, node));
    if (pod !== undefined) return { pod, via: 'fallback', lock };
  }
  throw new PendingPodError(`no binding pod found on node ${node}`);
}
