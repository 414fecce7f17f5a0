import { PatchStrategy, setHeaderOptions, type CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { boundedSignal, withSignal } from '../kube/call-options.js';
import { WorkQueue } from '../base/work-queue.js';
// HAMi uses one key for the annotation and the label.
import { VGPU_NODE_ANNOTATION as VGPU_NODE_LABEL } from '../hami/wire.js';

/** A GPU pod our bind placed, with the node its `hami.io/vgpu-node` label must name. */
export interface BoundPod {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly node: string;
}

export interface BindingLabelFollowUpDeps {
  /** The state store's view of pods and its change feed (cluster-cache.ts). */
  pods: {
    pod(namespace: string, name: string): V1Pod | undefined;
    onPodChange(listener: (pod: V1Pod, change: 'add' | 'update' | 'delete') => void): () => void;
  };
  /** Adds the label with a merge patch carrying the pod's uid (it must not label another incarnation). */
  patchLabel(pod: BoundPod): Promise<void>;
  /** How long to wait for the store to show the pod bound before patching anyway; default 10 s. */
  settleMs?: number;
  /** Pods followed at once at most; past it a bind's label is patched at once, as before this follow-up. */
  maxFollowed?: number;
  log?: (message: string) => void;
}

const DEFAULT_SETTLE_MS = 10_000;
const DEFAULT_MAX_FOLLOWED = 5000;

/**
 * The `hami.io/vgpu-node` label (vGPUmonitor lists a node's pods by it) rides on the Binding:
 * kube-apiserver 1.35+ copies a Binding's labels onto the pod in the write that sets spec.nodeName
 * (PodTopologyLabelsAdmission, beta and on by default), so the bind needs no write of its own for it.
 * An older apiserver, or one with that gate off, drops them. This follows each bound pod in the state
 * store: once the store shows it bound, it is done when the label arrived with it, and otherwise one
 * merge patch adds it (the write every bind made before, now off the bind's path: kube-scheduler
 * gets its answer first). A pod the store does not show bound within `settleMs` is patched anyway;
 * a pod gone or recreated meanwhile needs nothing. Best effort, like the label always was: a failed
 * patch is logged, the bind stands.
 */
export class BindingLabelFollowUp {
  /** pod uid → the pod followed; its settle deadline waits in `deadlines` under the same uid. */
  private readonly followed = new Map<string, BoundPod>();
  private deadlines: WorkQueue<string> | undefined;
  private unsubscribe: (() => void) | undefined;
  private readonly settleMs: number;
  private readonly maxFollowed: number;

  constructor(private readonly deps: BindingLabelFollowUpDeps) {
    this.settleMs = deps.settleMs ?? DEFAULT_SETTLE_MS;
    this.maxFollowed = deps.maxFollowed ?? DEFAULT_MAX_FOLLOWED;
  }

  start(): void {
    this.deadlines ??= new WorkQueue({
      process: (uid) => {
        this.settleLate(uid);
      },
    });
    this.unsubscribe ??= this.deps.pods.onPodChange((pod, change) => {
      const uid = pod.metadata?.uid;
      if (uid === undefined) return;
      const followed = this.followed.get(uid);
      if (followed === undefined) return;
      // Gone: nothing left to label.
      if (change === 'delete') this.forget(uid);
      else this.settle(followed, pod);
    });
  }

  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    void this.deadlines?.shutDown();
    this.deadlines = undefined;
    this.followed.clear();
  }

  /** Pods whose label is not settled yet. */
  get size(): number {
    return this.followed.size;
  }

  /** Called once the Binding carrying the label succeeded. */
  follow(pod: BoundPod): void {
    const deadlines = this.deadlines;
    if (deadlines === undefined || this.followed.size >= this.maxFollowed) {
      this.patch(pod);
      return;
    }
    this.followed.set(pod.uid, pod);
    // Followed again: its deadline starts over.
    deadlines.remove(pod.uid);
    deadlines.addAfter(pod.uid, this.settleMs);
    // The store may have seen the Binding before its answer reached us.
    const current = this.deps.pods.pod(pod.namespace, pod.name);
    if (current !== undefined) this.settle(pod, current);
  }

  /** `settleMs` passed and the store has not shown the pod bound (or its change is yet to come). */
  private settleLate(uid: string): void {
    const pod = this.followed.get(uid);
    if (pod === undefined) return;
    const current = this.deps.pods.pod(pod.namespace, pod.name);
    if (current !== undefined && this.settle(pod, current)) return;
    this.forget(uid);
    // Replaced under its name meanwhile: nothing of this incarnation to label.
    if (current !== undefined && current.metadata?.uid !== pod.uid) return;
    // The store has not shown it bound (a lagging watch): label it anyway; the uid guards the write.
    this.patch(pod);
  }

  /** Decides once the store shows this incarnation bound; true when decided. */
  private settle(pod: BoundPod, seen: V1Pod): boolean {
    if (seen.metadata?.uid !== pod.uid) return false;
    const boundTo = seen.spec?.nodeName;
    if (boundTo === undefined || boundTo === '') return false;
    this.forget(pod.uid);
    // Bound elsewhere cannot be this bind's doing; a label already there needs nothing.
    if (boundTo === pod.node && seen.metadata.labels?.[VGPU_NODE_LABEL] !== pod.node) this.patch(pod);
    return true;
  }

  private forget(uid: string): void {
    this.deadlines?.remove(uid);
    this.followed.delete(uid);
  }

  private patch(pod: BoundPod): void {
    this.deps.patchLabel(pod).catch((error: unknown) => {
      this.deps.log?.(
        `could not label ${pod.namespace}/${pod.name} with ${VGPU_NODE_LABEL} (the bind stands): ` +
          (error as Error).message,
      );
    });
  }
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const LABEL_PATCH_TIMEOUT_MS = 10_000;

/** The label write of BindingLabelFollowUp: a merge patch whose uid makes it fail on another incarnation. */
export function kubeLabelPatch(core: Pick<CoreV1Api, 'patchNamespacedPod'>): (pod: BoundPod) => Promise<void> {
  return async (pod) => {
    await core.patchNamespacedPod(
      {
        name: pod.name,
        namespace: pod.namespace,
        body: { metadata: { uid: pod.uid, labels: { [VGPU_NODE_LABEL]: pod.node } } },
      },
      withSignal(boundedSignal(undefined, LABEL_PATCH_TIMEOUT_MS), mergePatch),
    );
  };
}
