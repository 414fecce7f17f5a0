import { isAtLeastVersion, isNewerVersion } from '../base/resource-version.js';
import type { OwnerPod } from './owner-pod.js';

/**
 * Which incarnation of a pod name a lock was written for (ARCHITECTURE §5, invariant 9).
 *
 * A lock value names a pod only by `namespace/name` (HAMi's format), but a StatefulSet or a
 * training operator recreates a pod under the same name, so the pod carrying that name now may be
 * a later incarnation than the one the lock was written for. kubelet may still admit the earlier one
 * from its queue, and HAMi's plugin would serve it through this lock (issue #42: 4 of 4 runs on a
 * real kubelet handed the dead pod the new pod's GPUs when its bind adopted the old lock). So the
 * owner is decided by UID and by resourceVersion, never by the name alone:
 * - our own write: this process knows the UID it wrote the value for;
 * - the store's history: an incarnation of the name that was still there at or after the version at
 *   which the lock value was on the node (`lastVersion` ≥ `lockSeenVersion`) means the lock was
 *   written while it or an earlier incarnation held the name, never for a later one (a name is free
 *   for a new incarnation only once the previous one is gone from etcd);
 * - creation order: the pod carrying the name was created after the lock was on the node (its
 *   creation resourceVersion is newer), or, when no version is known, the apiserver recorded the
 *   lock's write (managedFields, whole seconds) in an earlier second than the pod's creation.
 * Without any of these the pod carrying the name is taken as the owner, as before: that is the case
 * of a process that saw nothing of the name's history, and the rules then decide by the pod's state.
 */

/** What the state store remembers of an incarnation of a pod name that is gone from the API. */
export interface GoneIncarnation {
  uid: string | undefined;
  /** spec.nodeName in its last known state. */
  boundTo: string | undefined;
  /** hami.io/bind-phase in its last known state. */
  bindPhase: string | undefined;
  /**
   * The resourceVersion of that state. For a watch DELETED event it is the delete itself; for a pod
   * that only vanished from a relist (`final` false) it is the last state the store had, and the pod
   * was still there at that version.
   */
  lastVersion: string | undefined;
  /** True when the state is the pod's very last (a DELETED event); false for a relist's synthesized delete. */
  final: boolean;
  /** When this process saw it go (its own clock; for logs only, never compared with another clock). */
  vanishedAt: Date;
}

export interface LockOwnerFacts {
  /** The pod carrying the lock's name now (from the store or the API); undefined when there is none. */
  named: OwnerPod | undefined;
  /** The UID this process wrote the lock value for, when it wrote it. */
  writtenFor?: string | undefined;
  /**
   * A resourceVersion at which the lock value was already on the node: the version at which the
   * store first saw it (exact for a watch event or our own write, an upper bound after a relist), or
   * the version of the node read from the API.
   */
  lockSeenVersion?: string | undefined;
  /** `lockSeenVersion` is the version of the write itself (a watch event or our own write's answer). */
  lockSeenExactly?: boolean;
  /** The apiserver's record of the lock's write (the node's managedFields time, whole seconds). */
  lockWrittenAt?: Date | undefined;
  /** The resourceVersion at which `named` was created, when the store saw its creation. */
  namedCreatedVersion?: string | undefined;
  /** A resourceVersion at which the store saw `named` exist (its creation, or the LIST it came in). */
  namedSeenVersion?: string | undefined;
  /** The incarnations of the name the store saw go, oldest first. */
  gone: readonly GoneIncarnation[];
}

export type LockOwner =
  /** The pod carrying the name may be the owner; `proven` when it certainly is. */
  | { kind: 'named'; owner: OwnerPod; proven: boolean }
  /**
   * Not the pod carrying the name (there may be none): an incarnation that is gone. `candidates`
   * are the gone incarnations that may be it (oldest first; empty when the store saw none go).
   */
  | { kind: 'gone'; replaced: boolean; candidates: GoneIncarnation[] };

export function resolveLockOwner(facts: LockOwnerFacts): LockOwner {
  const { named, writtenFor, gone } = facts;
  if (writtenFor !== undefined) {
    if (named !== undefined && named.uid === writtenFor) return { kind: 'named', owner: named, proven: true };
    return {
      kind: 'gone',
      replaced: named !== undefined,
      candidates: gone.filter((incarnation) => incarnation.uid === writtenFor),
    };
  }
  // Incarnations still there when the lock already was: the lock is one of theirs or older.
  const overlapping = gone.filter(
    (incarnation) => incarnation.uid !== named?.uid && isAtLeastVersion(incarnation.lastVersion, facts.lockSeenVersion),
  );
  if (overlapping.length > 0) return { kind: 'gone', replaced: named !== undefined, candidates: overlapping };
  if (named === undefined) {
    // Nobody carries the name. The store saw incarnations go, but none while this value was on the
    // node (or it cannot tell): the last one is the likeliest owner (a bind that wrote the lock
    // after its pod was gone), and every one that kubelet may still admit counts.
    return { kind: 'gone', replaced: false, candidates: [...gone] };
  }
  if (
    isNewerVersion(facts.namedCreatedVersion, facts.lockSeenVersion) ||
    wholeSecondBefore(facts.lockWrittenAt, named.createdAt)
  ) {
    return { kind: 'gone', replaced: true, candidates: [...gone] };
  }
  // Proven when the pod already existed when the lock was written: no other incarnation of the name
  // could be bound then, so none can be admitted through this lock.
  const existedBefore = facts.lockSeenExactly === true && isNewerVersion(facts.lockSeenVersion, facts.namedSeenVersion);
  return {
    kind: 'named',
    owner: named,
    proven: existedBefore || wholeSecondBefore(named.createdAt, facts.lockWrittenAt),
  };
}

/**
 * `earlier` is in an earlier whole second than `later`, both as the apiserver recorded them (cut
 * down to the second): then the real instants are ordered the same way, whatever their fractions.
 */
function wholeSecondBefore(earlier: Date | undefined, later: Date | undefined): boolean {
  if (earlier === undefined || later === undefined) return false;
  return Math.floor(earlier.getTime() / 1000) < Math.floor(later.getTime() / 1000);
}

/**
 * Whether kubelet may still admit `incarnation` on `node`: its last known state leaves it bound
 * there and waiting for Allocate. A relist's stale copy is not the last state: a pod it shows
 * unbound may have been bound there in the gap, so only what cannot change any more counts then
 * (bound to another node; bound here with the allocation over).
 */
export function mayBeAdmittedOn(incarnation: GoneIncarnation, node: string): boolean {
  const { boundTo, bindPhase } = incarnation;
  if (incarnation.final) return boundTo === node && bindPhase === 'allocating';
  if (boundTo !== undefined && boundTo !== node) return false;
  return !(boundTo === node && (bindPhase === 'success' || bindPhase === 'failed'));
}
