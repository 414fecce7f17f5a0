import { type PodRef } from '../../src/lock/lock-value.js';
import type { NodeLockApi, NodeSnapshot } from '../../src/lock/node-lock-api.js';
import type { OwnerPod } from '../../src/lock/owner-pod.js';
import { NODE_LOCK_ANNOTATION } from '../../src/hami/wire.js';

/**
 * The apiserver as NodeLocks sees it, for one node: its lock value, RV-guarded writes, and the one
 * pod every owner read returns (undefined: the owner is gone). Records each call, so a test can
 * assert what a decision cost.
 */
export class OneNodeLockApi implements NodeLockApi {
  readonly calls: string[] = [];
  private resourceVersion = 7;

  constructor(readonly node: string, public lock: string | undefined, public owner?: OwnerPod) {}

  snapshot(): NodeSnapshot {
    const annotations = this.lock === undefined ? {} : { [NODE_LOCK_ANNOTATION]: this.lock };
    return { name: this.node, resourceVersion: String(this.resourceVersion), lock: this.lock, object: { metadata: { name: this.node, annotations } } };
  }

  readNode(): Promise<NodeSnapshot> {
    this.calls.push('GET node');
    return Promise.resolve(this.snapshot());
  }

  writeLock(_name: string, resourceVersion: string, value: string | null): Promise<NodeSnapshot> {
    this.calls.push('PATCH node');
    if (resourceVersion !== String(this.resourceVersion)) return Promise.reject(new Error('unexpected conflict'));
    this.lock = value ?? undefined;
    this.resourceVersion++;
    return Promise.resolve(this.snapshot());
  }

  readPod(_pod: PodRef): Promise<OwnerPod | undefined> {
    this.calls.push('GET pod');
    return Promise.resolve(this.owner);
  }
}
