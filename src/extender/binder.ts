import { PatchStrategy, setHeaderOptions, type CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import type { ClusterCache } from '../cluster/cluster-cache.js';
import { VGPU_NODE_ANNOTATION } from '../cluster/pod-usage-index.js';
import { ALLOCATED_ANNOTATION, encodeAllocation, TO_ALLOCATE_ANNOTATION } from '../devices/allocation-codec.js';
import { podDeviceUsage } from '../devices/usage.js';
import { describeError, WardenError } from '../errors.js';
import { apiStatusOf, httpStatusOf } from '../kube/errors.js';
import { LockContentionError } from '../lock/lock-errors.js';
import type { PodRef } from '../lock/lock-value.js';
import type { AcquireResult, NodeLocks } from '../lock/node-locks.js';
import { BIND_PHASE_ANNOTATION } from '../lock/owner-pod.js';
import type { EventRecorder } from '../telemetry/events.js';
import { evaluateNode, viewPod, type PlacementDefaults } from './gpu-placement.js';
import type { BindingArgs } from './protocol.js';

export const VGPU_TIME_ANNOTATION = 'hami.io/vgpu-time';
export const BIND_TIME_ANNOTATION = 'hami.io/bind-time';
const SCHEDULER_ANNOTATIONS = [VGPU_NODE_ANNOTATION, VGPU_TIME_ANNOTATION, TO_ALLOCATE_ANNOTATION, ALLOCATED_ANNOTATION, BIND_PHASE_ANNOTATION, BIND_TIME_ANNOTATION];

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export class BindError extends WardenError {}

export interface BinderDeps {
  core: CoreV1Api;
  cache: ClusterCache;
  locks: NodeLocks;
  events: EventRecorder;
  defaults: PlacementDefaults;
  /** How long a bind waits for a held lock on the node; keep it below the extender httpTimeout. */
  lockWaitMs: number;
  clock?: () => Date;
  log?: (message: string) => void;
}

function apiMessage(error: unknown): string {
  return apiStatusOf(error)?.message ?? describeError(error);
}

/**
 * The extender's bind (ARCHITECTURE §6): choose GPUs, take the node lock (waiting a bounded time
 * for a busy node, taking over a releasable lock), write HAMi's annotations, create the Binding with
 * the pod UID as precondition, and assume the usage until the informer sees it. Every failure after
 * the lock was taken releases it and undoes the annotations (invariant 3).
 */
export class Binder {
  private readonly clock: () => Date;

  constructor(private readonly deps: BinderDeps) {
    this.clock = deps.clock ?? (() => new Date());
  }

  async bind(args: BindingArgs): Promise<{ error?: string }> {
    const ref: PodRef = { namespace: args.podNamespace, name: args.podName };
    let pod: V1Pod;
    try {
      pod = await this.deps.core.readNamespacedPod({ name: args.podName, namespace: args.podNamespace });
    } catch (error) {
      return { error: httpStatusOf(error) === 404 ? `pod ${args.podNamespace}/${args.podName} not found` : `reading pod ${args.podNamespace}/${args.podName}: ${apiMessage(error)}` };
    }
    const target = { kind: 'Pod' as const, name: args.podName, namespace: args.podNamespace, uid: args.podUid };
    if (pod.metadata?.uid !== args.podUid) {
      return { error: `pod ${args.podNamespace}/${args.podName} was recreated (uid ${pod.metadata?.uid ?? 'none'}, bind asked for ${args.podUid})` };
    }
    const view = viewPod(pod, this.deps.defaults);
    if (!view.wantsGpu) return this.plainBind(args, target);

    let lock: AcquireResult;
    try {
      lock = await this.acquireWithWait(args.node, ref, target);
    } catch (error) {
      const message = error instanceof LockContentionError ? `${error.message} (waited ${Math.round(this.deps.lockWaitMs / 1000)}s)` : describeError(error);
      this.deps.events.record(target, 'Warning', 'BindingFailed', message);
      return { error: message };
    }

    let annotated = false;
    try {
      const evaluation = evaluateNode(this.deps.cache, args.node, view);
      if (!evaluation.fits) throw new BindError(`pod no longer fits on node ${args.node}: ${evaluation.reason}`);
      this.deps.cache.usage.assume(args.podUid, args.node, podDeviceUsage(evaluation.allocation, view.requests.initContainers.length));
      const encoded = encodeAllocation(evaluation.allocation);
      const seconds = String(Math.floor(this.clock().getTime() / 1000));
      annotated = true;
      await this.deps.core.patchNamespacedPod({
        name: args.podName,
        namespace: args.podNamespace,
        body: {
          metadata: {
            labels: { [VGPU_NODE_ANNOTATION]: args.node },
            annotations: {
              [VGPU_NODE_ANNOTATION]: args.node,
              [VGPU_TIME_ANNOTATION]: seconds,
              [TO_ALLOCATE_ANNOTATION]: encoded,
              [ALLOCATED_ANNOTATION]: encoded,
              [BIND_PHASE_ANNOTATION]: 'allocating',
              [BIND_TIME_ANNOTATION]: seconds,
            },
          },
        },
      }, mergePatch);
      await this.deps.core.createNamespacedPodBinding({
        name: args.podName,
        namespace: args.podNamespace,
        body: { metadata: { name: args.podName, uid: args.podUid }, target: { apiVersion: 'v1', kind: 'Node', name: args.node } },
      });
      this.deps.events.record(target, 'Normal', 'BindingSucceeded', `Successfully bound ${args.podNamespace}/${args.podName} to ${args.node} with GPUs ${encoded} (lock ${lock.outcome})`);
      return {};
    } catch (error) {
      const message = `binding ${args.podNamespace}/${args.podName} to ${args.node} failed: ${apiMessage(error)}`;
      await this.undo(args, ref, annotated);
      this.deps.events.record(target, 'Warning', 'BindingFailed', message);
      return { error: message };
    }
  }

  private async plainBind(args: BindingArgs, target: { kind: 'Pod'; name: string; namespace: string; uid: string }): Promise<{ error?: string }> {
    try {
      await this.deps.core.createNamespacedPodBinding({
        name: args.podName,
        namespace: args.podNamespace,
        body: { metadata: { name: args.podName, uid: args.podUid }, target: { apiVersion: 'v1', kind: 'Node', name: args.node } },
      });
      return {};
    } catch (error) {
      const message = `binding ${args.podNamespace}/${args.podName} to ${args.node} failed: ${apiMessage(error)}`;
      this.deps.events.record(target, 'Warning', 'BindingFailed', message);
      return { error: message };
    }
  }

  /** Release, forget and un-annotate, each step on its own so one failure does not skip the others. */
  private async undo(args: BindingArgs, ref: PodRef, annotated: boolean): Promise<void> {
    this.deps.cache.usage.forget(args.podUid);
    try {
      await this.deps.locks.release(args.node, ref, 'bind-failure');
    } catch (error) {
      this.deps.log?.(`could not release the lock on ${args.node} after a failed bind of ${ref.namespace}/${ref.name} (the sweeper will): ${describeError(error)}`);
    }
    if (!annotated) return;
    try {
      const annotations = Object.fromEntries(SCHEDULER_ANNOTATIONS.map((key) => [key, null]));
      await this.deps.core.patchNamespacedPod({ name: args.podName, namespace: args.podNamespace, body: { metadata: { annotations, labels: { [VGPU_NODE_ANNOTATION]: null } } } }, mergePatch);
    } catch (error) {
      this.deps.log?.(`could not remove the scheduler annotations of ${ref.namespace}/${ref.name}: ${apiMessage(error)}`);
    }
  }

  /** acquire(), retried while the lock is held, until lockWaitMs; woken by node changes. */
  private async acquireWithWait(node: string, ref: PodRef, target: { kind: 'Pod'; name: string; namespace: string; uid: string }): Promise<AcquireResult> {
    const deadline = Date.now() + this.deps.lockWaitMs;
    let announced = false;
    for (;;) {
      try {
        return await this.deps.locks.acquire(node, ref);
      } catch (error) {
        if (!(error instanceof LockContentionError) || Date.now() >= deadline) throw error;
        if (!announced) {
          announced = true;
          this.deps.events.record(target, 'Normal', 'NodeLockWait', `waiting for the lock on node ${node}: ${error.message}`);
        }
        await this.nodeChangeOrTimeout(node, Math.min(1000, deadline - Date.now()));
      }
    }
  }

  private nodeChangeOrTimeout(node: string, timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => { clearTimeout(timer); stop(); resolve(); };
      const timer = setTimeout(done, Math.max(10, timeoutMs));
      const stop = this.deps.cache.onNodeChange((changed) => { if (changed.metadata?.name === node) done(); });
    });
  }
}
