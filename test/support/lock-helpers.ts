import { PatchStrategy, setHeaderOptions, type CoreV1Api } from '@kubernetes/client-node';
import { KubeNodeLockApi } from '../../src/lock/kube-node-lock-api.js';
import { type PodRef } from '../../src/lock/lock-value.js';
import type { NodeLockApi, NodeSnapshot } from '../../src/lock/node-lock-api.js';
import type { OwnerPod } from '../../src/lock/owner-pod.js';
import { BIND_PHASE_ANNOTATION, NODE_LOCK_ANNOTATION } from '../../src/hami/wire.js';
import { simulatedGpuNode } from '../../src/local/simulated-gpu-node.js';
import { uniqueName } from './test-cluster.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export async function createGpuNode(core: CoreV1Api, gpus = 4): Promise<string> {
  const name = uniqueName('gpu-node');
  await core.createNode({ body: simulatedGpuNode({ name, gpus }) });
  return name;
}

/** A pod no scheduler will touch; optionally bound to `nodeName` and annotated with a bind-phase. */
export async function createPod(
  core: CoreV1Api,
  namespace: string,
  name: string,
  options: { nodeName?: string; bindPhase?: string; gpus?: number } = {},
): Promise<PodRef> {
  const created = await core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name },
      spec: {
        schedulerName: 'nobody-schedules-this',
        containers: [
          {
            name: 'main',
            image: 'registry.invalid/none:1',
            ...(options.gpus === undefined
              ? {}
              : { resources: { limits: { 'nvidia.com/gpu': String(options.gpus) } } }),
          },
        ],
      },
    },
  });
  // Set afterwards, as the scheduler does: the webhook denies pods created with scheduler-owned annotations.
  if (options.bindPhase !== undefined) {
    await core.patchNamespacedPod(
      { name, namespace, body: { metadata: { annotations: { [BIND_PHASE_ANNOTATION]: options.bindPhase } } } },
      mergePatch,
    );
  }
  if (options.nodeName !== undefined) {
    await core.createNamespacedPodBinding({
      name,
      namespace,
      body: { metadata: { name, uid: created.metadata?.uid }, target: { kind: 'Node', name: options.nodeName } },
    });
  }
  return { namespace, name };
}

/** Writes the lock annotation directly (no RV guard): "another component" in the tests. */
export async function setLock(core: CoreV1Api, node: string, value: string | null): Promise<void> {
  await core.patchNode(
    { name: node, body: { metadata: { annotations: { [NODE_LOCK_ANNOTATION]: value } } } },
    mergePatch,
  );
}

export async function readLock(core: CoreV1Api, node: string): Promise<string | undefined> {
  return (await core.readNode({ name: node })).metadata?.annotations?.[NODE_LOCK_ANNOTATION];
}

export interface WriteHooks {
  /** Runs before the Nth write (1-based) reaches the API: lets a test make a real concurrent write. */
  beforeWrite?: (call: number) => Promise<void>;
  /** When true for the Nth write, the write is applied but its answer is "lost" (an error is thrown). */
  loseResponse?: (call: number) => boolean;
}

/**
 * The real KubeNodeLockApi, recording every owner lookup and with fault injection around writes.
 * Every call still goes to the real apiserver (with the caller's signal); only the timing of other
 * writers and the loss of an answer are staged. Without hooks it is the real API plus the record.
 */
export class InstrumentedLockApi implements NodeLockApi {
  writes = 0;
  /** Each pod a lock named that was looked up, in order. */
  readonly podReads: PodRef[] = [];
  private readonly real: KubeNodeLockApi;

  constructor(
    core: CoreV1Api,
    private readonly hooks: WriteHooks = {},
  ) {
    this.real = new KubeNodeLockApi(core);
  }

  readNode(name: string, signal?: AbortSignal): Promise<NodeSnapshot> {
    return this.real.readNode(name, signal);
  }

  readPod(pod: PodRef, signal?: AbortSignal): Promise<OwnerPod | undefined> {
    this.podReads.push(pod);
    return this.real.readPod(pod, signal);
  }

  async writeLock(
    name: string,
    resourceVersion: string,
    value: string | null,
    signal?: AbortSignal,
  ): Promise<NodeSnapshot> {
    const call = ++this.writes;
    await this.hooks.beforeWrite?.(call);
    const written = await this.real.writeLock(name, resourceVersion, value, signal);
    if (this.hooks.loseResponse?.(call) === true)
      throw new Error('socket hang up (answer lost after the write was applied)');
    return written;
  }
}
