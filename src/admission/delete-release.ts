import type { PodRef } from '../lock/lock-value.js';
import type { ConditionalReleaseResult, ReleasePath } from '../lock/lock-events.js';
import { BIND_PHASE_ANNOTATION } from '../hami/wire.js';
import { nodeOfPod } from '../hami/pod-node.js';
import { isRecord } from '../base/json.js';

export interface LockReleaser {
  /**
   * Frees the node's lock only if the rules say nobody will use it; `deleted` is the pod whose DELETE
   * is being admitted, which counts as being deleted (lock/node-locks.ts).
   */
  releaseIfReleasable(
    node: string,
    path: ReleasePath,
    options: { signal?: AbortSignal; deleted?: PodRef & { uid: string } },
  ): Promise<ConditionalReleaseResult>;
}

/** The state store's node locks, for a DELETE answered without an API call. */
export interface StoredLocks {
  /** Whether the node's lock names the pod (from the store's parse of it). */
  lockHeldBy(node: string, pod: PodRef): boolean;
  /** Synced and every watch up: a lock the store does not show was not there a moment ago. */
  watching(): boolean;
}

export type DeleteOutcome =
  | { kind: 'skipped'; reason: 'dry-run' | 'no-pod' | 'no-node' | 'awaiting-allocation' | 'not-holder' }
  | { kind: 'done'; node: string; result: ConditionalReleaseResult }
  | { kind: 'failed'; node: string; error: unknown }
  | { kind: 'timed-out'; node: string };

/**
 * Whether kubelet may still admit and allocate the pod: bound to its node with
 * bind-phase=allocating. kubelet admits pods that arrive already marked for deletion, and the device
 * plugin finds the pod to serve through the node lock. Even a DELETE with gracePeriodSeconds 0 leaves
 * the pod in place until the call completes (and a later admission plugin may still refuse it), so
 * the lock stays until the pod is gone (the pod watch's DELETED event and the sweeper free it then)
 * or allocated (the plugin frees it).
 */
function mayStillBeAllocated(pod: Record<string, unknown>, node: string): boolean {
  const spec = isRecord(pod.spec) ? pod.spec : {};
  const annotations = isRecord(pod.metadata) && isRecord(pod.metadata.annotations) ? pod.metadata.annotations : {};
  return spec.nodeName === node && annotations[BIND_PHASE_ANNOTATION] === 'allocating';
}

/**
 * On pod DELETE, frees the node lock the pod holds, through the lock rules (NodeLocks
 * releaseIfReleasable) with this pod (its UID) counted as being deleted: the rules decide by UID
 * whom the lock was written for (lock/lock-owner.ts), so a delete never frees a lock written for
 * another incarnation of the name, before or after it, nor one kubelet may still use; idempotent for
 * the repeated DELETE calls of a graceful delete; bounded by `timeoutMs`, and its API calls are
 * aborted then, so the delete is never held up (ARCHITECTURE invariant 5).
 * An unbound pod with no chosen node costs no API call, nor does a pod that kubelet may still
 * allocate (mayStillBeAllocated), nor, with `storedLocks` watching, a pod the store shows holding no
 * lock on its node: the usual DELETE (a scale-down of running pods) then reads nothing and is not
 * serialised with the other releases of its node. A lock written for the pod that the store has not
 * seen yet is freed by the other release paths (the failed Binding of a deleted pod, the pod watch's
 * DELETED event, the sweeper), as after a webhook outage.
 */
export async function releaseLockOfDeletedPod(
  oldObject: unknown,
  request: { name?: string; namespace?: string; dryRun?: boolean },
  deps: { locks: LockReleaser; timeoutMs: number; storedLocks?: StoredLocks },
): Promise<DeleteOutcome> {
  if (request.dryRun === true) return { kind: 'skipped', reason: 'dry-run' };
  if (!isRecord(oldObject)) return { kind: 'skipped', reason: 'no-pod' };
  const metadata = isRecord(oldObject.metadata) ? oldObject.metadata : {};
  const name = typeof metadata.name === 'string' ? metadata.name : request.name;
  const namespace = typeof metadata.namespace === 'string' ? metadata.namespace : request.namespace;
  const uid = typeof metadata.uid === 'string' ? metadata.uid : undefined;
  // Without a UID the lock cannot be told apart from another incarnation's: the other paths free it.
  if (
    name === undefined ||
    name === '' ||
    namespace === undefined ||
    namespace === '' ||
    uid === undefined ||
    uid === ''
  )
    return { kind: 'skipped', reason: 'no-pod' };
  const node = nodeOfPod(oldObject);
  if (node === undefined) return { kind: 'skipped', reason: 'no-node' };
  if (mayStillBeAllocated(oldObject, node)) return { kind: 'skipped', reason: 'awaiting-allocation' };
  if (deps.storedLocks?.watching() === true) {
    if (!deps.storedLocks.lockHeldBy(node, { namespace, name })) return { kind: 'skipped', reason: 'not-holder' };
  }

  let timer: NodeJS.Timeout | undefined;
  const abort = new AbortController();
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => {
      abort.abort(new Error(`the lock release took longer than ${deps.timeoutMs} ms`));
      resolve('timeout');
    }, deps.timeoutMs);
  });
  try {
    const release = deps.locks.releaseIfReleasable(node, 'webhook', {
      signal: abort.signal,
      deleted: { namespace, name, uid },
    });
    const outcome = await Promise.race([release, timeout]);
    if (outcome === 'timeout') {
      release.catch(() => undefined);
      return { kind: 'timed-out', node };
    }
    return { kind: 'done', node, result: outcome };
  } catch (error) {
    return { kind: 'failed', node, error };
  } finally {
    clearTimeout(timer);
  }
}
