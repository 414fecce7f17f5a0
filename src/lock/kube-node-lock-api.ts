import { PatchStrategy, setHeaderOptions, type CoreV1Api, type V1Node } from '@kubernetes/client-node';
import { NodeNotFoundError, WriteConflictError, WriteRejectedError } from './lock-errors.js';
import { type PodRef } from './lock-value.js';
import type { NodeLockApi, NodeSnapshot } from './node-lock-api.js';
import { ownerPodFrom, type OwnerPod } from './owner-pod.js';
import { boundedSignal, withSignal } from '../kube/call-options.js';
import { apiStatusOf, httpStatusOf, isNotFound } from '../kube/errors.js';
import { NODE_LOCK_ANNOTATION } from '../hami/wire.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

function snapshotOf(node: V1Node, name: string): NodeSnapshot {
  return {
    name: node.metadata?.name ?? name,
    resourceVersion: node.metadata?.resourceVersion ?? '',
    lock: node.metadata?.annotations?.[NODE_LOCK_ANNOTATION],
    object: node,
  };
}

/** Maps a failed node call to the lock service's error vocabulary (see NodeLockApi). */
function translate(error: unknown, node: string): unknown {
  const status = httpStatusOf(error);
  const detail = apiStatusOf(error)?.message ?? (error instanceof Error ? error.message : String(error));
  if (status === 404) return new NodeNotFoundError(node, { cause: error });
  if (status === 409)
    return new WriteConflictError(`node ${node} changed since it was read: ${detail}`, { cause: error });
  // 408 and 429 say "try again"; every other 4xx is a definite refusal that nothing will fix.
  if (status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 429) {
    return new WriteRejectedError(`the API refused the lock write on node ${node} (HTTP ${status}): ${detail}`, {
      cause: error,
    });
  }
  return error;
}

/**
 * NodeLockApi on @kubernetes/client-node: reads, RV-guarded merge patches of the lock annotation.
 * Every call is bounded (`callTimeoutMs`, default 10 s, besides the caller's own signal): client-node
 * sets no timeout, and a call on a connection that went silent would otherwise hold the node's
 * mutex, and with it every release and bind on that node, for good (seen in the chaos suite with a
 * hung PATCH). A call cut off counts as an unknown outcome: NodeLocks re-reads and decides again.
 */
export class KubeNodeLockApi implements NodeLockApi {
  private readonly callTimeoutMs: number;

  constructor(
    private readonly core: CoreV1Api,
    options: { callTimeoutMs?: number } = {},
  ) {
    this.callTimeoutMs = options.callTimeoutMs ?? 10_000;
  }

  private bounded(signal: AbortSignal | undefined): AbortSignal {
    return boundedSignal(signal, this.callTimeoutMs);
  }

  async readNode(name: string, signal?: AbortSignal): Promise<NodeSnapshot> {
    try {
      return snapshotOf(await this.core.readNode({ name }, withSignal(this.bounded(signal))), name);
    } catch (error) {
      throw translate(error, name);
    }
  }

  async writeLock(
    name: string,
    resourceVersion: string,
    value: string | null,
    signal?: AbortSignal,
  ): Promise<NodeSnapshot> {
    const body = { metadata: { resourceVersion, annotations: { [NODE_LOCK_ANNOTATION]: value } } };
    try {
      return snapshotOf(await this.core.patchNode({ name, body }, withSignal(this.bounded(signal), mergePatch)), name);
    } catch (error) {
      throw translate(error, name);
    }
  }

  async readPod(pod: PodRef, signal?: AbortSignal): Promise<OwnerPod | undefined> {
    try {
      return ownerPodFrom(
        await this.core.readNamespacedPod(
          { name: pod.name, namespace: pod.namespace },
          withSignal(this.bounded(signal)),
        ),
      );
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }
}
