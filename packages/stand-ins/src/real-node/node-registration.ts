import {
  PatchStrategy,
  setHeaderOptions,
  type CoordinationV1Api,
  type CoreV1Api,
  type V1Node,
} from '@kubernetes/client-node';
import { isConflict, isNotFound, withSignal } from './kube-calls.js';
import { RealNodeError } from './real-node-error.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** The taint kubelet --cloud-provider=external registers with, until a cloud provider initializes the node. */
export const UNINITIALIZED_TAINT = 'node.cloudprovider.kubernetes.io/uninitialized';

const CALL_TIMEOUT_MS = 5000;
const POLL_MS = 100;

export interface NodeWaitOptions {
  timeoutMs: number;
  /** Fails the wait at once when it returns a reason (e.g. kubelet exited), instead of at the deadline. */
  abortReason?: () => string | undefined;
}

async function pollNode<T>(
  core: CoreV1Api,
  nodeName: string,
  what: string,
  options: NodeWaitOptions,
  check: (node: V1Node | undefined) => T | undefined,
): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  let last: string;
  for (;;) {
    const reason = options.abortReason?.();
    if (reason !== undefined) throw new RealNodeError(`node ${nodeName} never got ${what}: ${reason}`);
    let node: V1Node | undefined;
    try {
      node = await core.readNode({ name: nodeName }, withSignal(AbortSignal.timeout(CALL_TIMEOUT_MS)));
      last = describeReady(node);
    } catch (error) {
      if (!isNotFound(error)) last = (error as Error).message;
      else last = 'not registered';
    }
    const result = check(node);
    if (result !== undefined) return result;
    if (Date.now() >= deadline)
      throw new RealNodeError(`node ${nodeName} did not get ${what} within ${options.timeoutMs} ms (last: ${last})`);
    await sleep(POLL_MS);
  }
}

function describeReady(node: V1Node): string {
  const ready = node.status?.conditions?.find((condition) => condition.type === 'Ready');
  return ready === undefined
    ? 'no Ready condition'
    : `Ready=${ready.status} (${ready.reason ?? ''}: ${ready.message ?? ''})`;
}

export function waitForNodeRegistered(core: CoreV1Api, nodeName: string, options: NodeWaitOptions): Promise<V1Node> {
  return pollNode(core, nodeName, 'registered', options, (node) => node);
}

/**
 * Plays the external cloud provider for a node kubelet registered with --cloud-provider=external:
 * sets its addresses (kubelet refuses a loopback node IP, so it sets none, and without an address
 * kube-apiserver cannot reach it for logs/exec) and removes the "uninitialized" taint. kubelet
 * keeps addresses it did not set itself, across restarts too.
 */
export async function initializeNode(core: CoreV1Api, nodeName: string, options: { address: string }): Promise<void> {
  const signal = () =>
    withSignal(AbortSignal.timeout(CALL_TIMEOUT_MS), setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
  const addresses = [
    { type: 'InternalIP', address: options.address },
    { type: 'Hostname', address: nodeName },
  ];
  try {
    await core.patchNodeStatus({ name: nodeName, body: { status: { addresses } } }, signal());
  } catch (error) {
    throw new RealNodeError(`could not set the addresses of node ${nodeName}`, { cause: error });
  }
  for (let attempt = 1; ; attempt++) {
    try {
      const node = await core.readNode({ name: nodeName }, withSignal(AbortSignal.timeout(CALL_TIMEOUT_MS)));
      const taints = node.spec?.taints ?? [];
      if (!taints.some((taint) => taint.key === UNINITIALIZED_TAINT)) return;
      // A merge patch replaces the whole list; the resourceVersion makes a concurrent change a 409, not a loss.
      await core.patchNode(
        {
          name: nodeName,
          body: {
            metadata: { resourceVersion: node.metadata?.resourceVersion },
            spec: { taints: taints.filter((taint) => taint.key !== UNINITIALIZED_TAINT) },
          },
        },
        signal(),
      );
      return;
    } catch (error) {
      if (!isConflict(error) || attempt >= 5)
        throw new RealNodeError(`could not remove the ${UNINITIALIZED_TAINT} taint of node ${nodeName}`, {
          cause: error,
        });
    }
  }
}

/** Waits for Ready=True whose heartbeat is not older than `since` (whole seconds: the API's resolution). */
export function waitForNodeReady(
  core: CoreV1Api,
  nodeName: string,
  options: NodeWaitOptions & { since?: Date },
): Promise<V1Node> {
  const since = options.since === undefined ? 0 : Math.floor(options.since.getTime() / 1000) * 1000;
  return pollNode(core, nodeName, 'Ready', options, (node) => {
    const ready = node?.status?.conditions?.find((condition) => condition.type === 'Ready');
    if (ready?.status !== 'True') return undefined;
    const heartbeat = ready.lastHeartbeatTime === undefined ? 0 : new Date(ready.lastHeartbeatTime).getTime();
    return heartbeat >= since ? node : undefined;
  });
}

/** Deletes the Node and its Lease: nothing else would, and a Ready node left behind attracts pods. */
export async function deleteNodeObjects(
  core: CoreV1Api,
  coordination: CoordinationV1Api,
  nodeName: string,
): Promise<void> {
  const ignoreMissing = (error: unknown) => {
    if (!isNotFound(error)) throw error;
  };
  await core.deleteNode({ name: nodeName }, withSignal(AbortSignal.timeout(CALL_TIMEOUT_MS))).catch(ignoreMissing);
  await coordination
    .deleteNamespacedLease(
      { name: nodeName, namespace: 'kube-node-lease' },
      withSignal(AbortSignal.timeout(CALL_TIMEOUT_MS)),
    )
    .catch(ignoreMissing);
}
