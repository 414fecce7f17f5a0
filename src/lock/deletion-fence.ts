import { parseLockValue } from './lock-value.js';

/** What the fence knows of the deleted pod. */
export interface DeletedPod {
  uid: string | undefined;
  /** metadata.deletionTimestamp when the object carried one (apiserver clock, second precision). */
  deletionTimestamp: Date | undefined;
  /** When this process saw the deletion (its own clock): the "last-seen time" of the pod. */
  observedAt: Date;
}

/** What the state store can tell about a lock value and about the pod's name now. */
export interface FenceView {
  /** When this process first saw `value` on `node`; undefined when it has not seen it. */
  lockSeenAt(node: string, value: string): Date | undefined;
  /** UID of the live (not being deleted) pod of that name in the store, if any. */
  liveIncarnationUid(namespace: string, name: string): string | undefined;
}

/**
 * The time fence of a release made on behalf of a deleted pod (invariant 6): such a release may
 * touch a lock only if the lock is older than the deletion. A lock names only namespace/name, so
 * without the fence a late webhook call, watch event or retry could free the lock of a newer pod
 * with the same name that is waiting for its Allocate. A lock passes when
 * - its own stamp is not after the deletion (deletionTimestamp, else the time we saw the delete);
 * - this process did not first see it after the deletion (catches a same-second stamp);
 * - no other live incarnation of the name exists in the store (the lock may be that one's).
 * When in doubt the lock is kept; the sweeper's rules free it later if it is dead.
 */
export function deletionFence(pod: DeletedPod, view: FenceView): (node: string, value: string) => boolean {
  const fenceMs = (pod.deletionTimestamp ?? pod.observedAt).getTime();
  return (node, value) => {
    const lock = parseLockValue(value);
    if (lock.kind !== 'owned') return false;
    if (lock.time.getTime() > fenceMs) return false;
    const seenAt = view.lockSeenAt(node, value);
    if (seenAt !== undefined && seenAt.getTime() > pod.observedAt.getTime()) return false;
    const live = view.liveIncarnationUid(lock.owner.namespace, lock.owner.name);
    return live === undefined || live === pod.uid;
  };
}

/** metadata.deletionTimestamp as a Date (client-node gives a Date, raw JSON a string). */
export function deletionTimestampOf(metadata: { deletionTimestamp?: unknown } | undefined): Date | undefined {
  const value = metadata?.deletionTimestamp;
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? undefined : value;
  if (typeof value !== 'string') return undefined;
  const parsed = new Date(value);
  return Number.isNaN(parsed.getTime()) ? undefined : parsed;
}
