import type { PodRef } from '../lock/lock-value.js';
import type { ConditionalReleaseResult, ReleasePath } from '../lock/lock-events.js';
import { BIND_PHASE_ANNOTATION } from '../hami/wire.js';
import { nodeOfPod } from '../hami/pod-node.js';
import { isRecord } from '../base/json.js';
import { timeoutSignal, until } from '../base/abort.js';
import { WardenError } from '../base/errors.js';

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
  | { kind: 'timed-out'; node: string }
  /** The review's signal aborted first: the apiserver stopped waiting (its timeoutSeconds, a closed connection). */
  | { kind: 'abandoned'; node: string };

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

/** The deleted pod's identity, UID included, from its oldObject (the request's names as a fallback). */
function deletedPodOf(
  oldObject: Record<string, unknown>,
  request: { name?: string; namespace?: string },
): (PodRef & { uid: string }) | undefined {
  const metadata = isRecord(oldObject.metadata) ? oldObject.metadata : {};
  const name = typeof metadata.name === 'string' ? metadata.name : request.name;
  const namespace = typeof metadata.namespace === 'string' ? metadata.namespace : request.namespace;
  const uid = typeof metadata.uid === 'string' ? metadata.uid : undefined;
  if (!name || !namespace || !uid) return undefined;
  return { namespace, name, uid };
}

/**
 * On pod DELETE, frees the node lock the pod holds, through the lock rules (NodeLocks
 * releaseIfReleasable) with this pod (its UID) counted as being deleted: the rules decide by UID
 * whom the lock was written for (lock/lock-owner.ts), so a delete never frees a lock written for
 * another incarnation of the name, before or after it, nor one kubelet may still use; idempotent for
 * the repeated DELETE calls of a graceful delete; bounded by `timeoutMs` and by the review's `signal`,
 * and its API calls are aborted then, so the delete is never held up (ARCHITECTURE invariant 5) and
 * the release never outlives its answer.
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
  deps: { locks: LockReleaser; timeoutMs: number; storedLocks?: StoredLocks; signal?: AbortSignal },
): Promise<DeleteOutcome> {
  if (request.dryRun === true) return { kind: 'skipped', reason: 'dry-run' };
  if (!isRecord(oldObject)) return { kind: 'skipped', reason: 'no-pod' };
  const pod = deletedPodOf(oldObject, request);
  // Without a UID the lock cannot be told apart from another incarnation's: the other paths free it.
  if (pod === undefined) return { kind: 'skipped', reason: 'no-pod' };
  const { namespace, name, uid } = pod;
  const node = nodeOfPod(oldObject);
  if (node === undefined) return { kind: 'skipped', reason: 'no-node' };
  if (mayStillBeAllocated(oldObject, node)) return { kind: 'skipped', reason: 'awaiting-allocation' };
  if (deps.storedLocks?.watching() === true) {
    if (!deps.storedLocks.lockHeldBy(node, { namespace, name })) return { kind: 'skipped', reason: 'not-holder' };
  }

  const deadline = timeoutSignal(
    deps.timeoutMs,
    () => new WardenError(`the lock release took longer than ${deps.timeoutMs} ms`),
  );
  // The request's signal too: a release the apiserver no longer waits for ends with the review, so
  // it neither outlives its answer nor holds the node's mutex for a review nobody reads.
  const signal = deps.signal === undefined ? deadline.signal : AbortSignal.any([deadline.signal, deps.signal]);
  try {
    const release = deps.locks.releaseIfReleasable(node, 'webhook', { signal, deleted: { namespace, name, uid } });
    // until: a release that ignores its signal still cannot hold the answer up.
    return { kind: 'done', node, result: await until(release, signal) };
  } catch (error) {
    if (deadline.signal.aborted) return { kind: 'timed-out', node };
    if (signal.aborted) return { kind: 'abandoned', node };
    return { kind: 'failed', node, error };
  } finally {
    deadline.clear();
  }
}
