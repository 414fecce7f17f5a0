import type { LockOwnerFacts } from './lock-owner.js';
import type { PodRef } from './lock-value.js';
import type { OwnerPod } from './owner-pod.js';

/** The node as the lock service sees it: its resourceVersion and the lock annotation. */
export interface NodeSnapshot {
  name: string;
  resourceVersion: string;
  lock: string | undefined;
  /** The whole Node object the API returned, when there is one (fed back into the state store). */
  object?: unknown;
}

/**
 * The narrow Kubernetes surface the lock service needs. Implementations translate API errors:
 * 404 on the node → NodeNotFoundError, 409 → WriteConflictError, other definite refusals →
 * WriteRejectedError; anything else (timeouts, resets, 5xx) is thrown as is and means the write
 * may or may not have happened.
 */
export interface NodeLockApi {
  readNode(name: string, signal?: AbortSignal): Promise<NodeSnapshot>;
  /** Merge-patches the lock annotation (null deletes it), guarded by `resourceVersion`. */
  writeLock(name: string, resourceVersion: string, value: string | null, signal?: AbortSignal): Promise<NodeSnapshot>;
  /** The pod a lock names, or undefined when it does not exist. */
  readPod(pod: PodRef, signal?: AbortSignal): Promise<OwnerPod | undefined>;
}

/**
 * What the cluster state store already knows, so lock decisions that are safe to make from a
 * possibly lagging view cost no API call: a lock that looks held is waited for, a node that looks
 * free is written with the cached resourceVersion (a stale one only costs a 409 and a re-read).
 * Anything that would free another pod's lock is confirmed by API reads first.
 */
export interface LockView {
  /** The node as last seen; undefined when the store does not know it. */
  node(name: string): NodeSnapshot | undefined;
  /** The pod as last seen; undefined when the store has no such pod. */
  ownerPod(pod: PodRef): OwnerPod | undefined;
  /**
   * What the store knows of who the lock value `value` on `node` was written for (lock-owner.ts):
   * our own write's UID, the version at which it saw the value, the creation of the pod carrying the
   * name now (`namedUid`), and the incarnations of the name it saw go.
   */
  lockOwnerFacts?(
    node: string,
    value: string,
    pod: PodRef,
    namedUid: string | undefined,
  ): Omit<LockOwnerFacts, 'named' | 'lockWrittenAt'>;
  /** When this process first saw `value` as the lock of `node`; undefined when it has not. */
  lockSeenAt(node: string, value: string): Date | undefined;
  /**
   * Our own write's result, so readers of the view see it before its watch event arrives;
   * `writtenFor`: the UID of the pod a lock value was written for.
   */
  observeWrite(snapshot: NodeSnapshot, writtenFor?: string): void;
  /**
   * False while the view may be behind by more than a watch event: a watch is down or relisting.
   * A lock is then read from the API (its "held" verdict could rest on a pod that is long gone).
   */
  current?(): boolean;
}
