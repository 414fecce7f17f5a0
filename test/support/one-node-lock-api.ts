import { type PodRef } from '../../src/lock/lock-value.js';
import type { NodeLockApi, NodeSnapshot } from '../../src/lock/node-lock-api.js';
import type { OwnerPod } from '../../src/lock/owner-pod.js';
import { NODE_LOCK_ANNOTATION } from '../../src/hami/wire.js';

/**
 * The apiserver as NodeLocks sees it, for one node: its lock value, RV-guarded writes, and the pods
 * owner reads return: by namespace/name from `pods` when given, else the one `owner` for every read
 * (undefined: the owner is gone). Records each call and each pod looked up, so a test can assert
 * what a decision cost. Like the apiserver, it refuses a pod name no request line can carry.
 */
export class OneNodeLockApi implements NodeLockApi {
  readonly calls: string[] = [];
  readonly podReads: PodRef[] = [];
  /** The node's metadata.managedFields (the apiserver's record of who wrote what, and when). */
  managedFields: unknown[] = [];
  private resourceVersion = 7;

  constructor(
    readonly node: string,
    public lock: string | undefined,
    public owner?: OwnerPod,
    private readonly pods?: ReadonlyMap<string, OwnerPod>,
  ) {}

  snapshot(): NodeSnapshot {
    const annotations = this.lock === undefined ? {} : { [NODE_LOCK_ANNOTATION]: this.lock };
    return {
      name: this.node,
      resourceVersion: String(this.resourceVersion),
      lock: this.lock,
      object: { metadata: { name: this.node, annotations, managedFields: this.managedFields } },
    };
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

  readPod(pod: PodRef): Promise<OwnerPod | undefined> {
    this.calls.push('GET pod');
    this.podReads.push(pod);
    if (pod.name.length > 253) return Promise.reject(new Error('HTTP/2 frameError: the request line is too long'));
    return Promise.resolve(this.pods === undefined ? this.owner : this.pods.get(`${pod.namespace}/${pod.name}`));
  }
}
