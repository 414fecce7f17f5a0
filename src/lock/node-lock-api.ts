import type { PodRef } from './lock-value.js';
import type { OwnerPod } from './owner-pod.js';

/** The node as the lock service sees it: its resourceVersion and the lock annotation. */
export interface NodeSnapshot {
  name: string;
  resourceVersion: string;
  lock: string | undefined;
}

/**
 * The narrow Kubernetes surface the lock service needs. Implementations translate API errors:
 * 404 on the node → NodeNotFoundError, 409 → WriteConflictError, other definite refusals →
 * WriteRejectedError; anything else (timeouts, resets, 5xx) is thrown as is and means the write
 * may or may not have happened.
 */
export interface NodeLockApi {
  readNode(name: string): Promise<NodeSnapshot>;
  /** Merge-patches the lock annotation (null deletes it), guarded by `resourceVersion`. */
  writeLock(name: string, resourceVersion: string, value: string | null): Promise<NodeSnapshot>;
  /** The pod a lock names, or undefined when it does not exist. */
  readPod(pod: PodRef): Promise<OwnerPod | undefined>;
}
