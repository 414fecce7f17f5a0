import { PatchStrategy, setHeaderOptions, type CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { boundedSignal, withSignal } from '../kube/call-options.js';
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

interface Followed {
  readonly pod: BoundPod;
  readonly timer: NodeJS.Timeout;
}

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
  private readonly followed = new Map<string, Followed>();
  private unsubscribe: (() => void) | undefined;
  private readonly settleMs: number;
  private readonly maxFollowed: number;

  constructor(private readonly deps: BindingLabelFollowUpDeps) {
    this.settleMs = deps.settleMs ?? DEFAULT_SETTLE_MS;
    this.maxFollowed = deps.maxFollowed ?? DEFAULT_MAX_FOLLOWED;
  }

  start(): void {
    this.unsubscribe ??= this.deps.pods.onPodChange((pod, change) => {
      const uid = pod.metadata?.uid;
      if (uid === undefined) return;
      const entry = this.followed.get(uid);
      if (entry === undefined) return;
      // Gone: nothing left to label.
      if (change === 'delete') this.forget(entry);
      else this.settle(entry, pod);
    });
  }

  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    for (const entry of this.followed.values()) clearTimeout(entry.timer);
    this.followed.clear();
  }

  /** Pods whose label is not settled yet. */
  get size(): number {
    return this.followed.size;
  }

  /** Called once the Binding carrying the label succeeded. */
  follow(pod: BoundPod): void {
    if (this.unsubscribe === undefined || this.followed.size >= this.maxFollowed) {
      this.patch(pod);
      return;
    }
    const previous = this.followed.get(pod.uid);
    if (previous !== undefined) clearTimeout(previous.timer);
    const timer = setTimeout(() => {
      const entry = this.followed.get(pod.uid);
      if (entry?.timer !== timer) return;
      const current = this.deps.pods.pod(pod.namespace, pod.name);
      if (current !== undefined && this.settle(entry, current)) return;
      this.forget(entry);
      // Replaced under its name meanwhile: nothing of this incarnation to label.
      if (current !== undefined && current.metadata?.uid !== pod.uid) return;
      // The store has not shown it bound (a lagging watch): label it anyway; the uid guards the write.
      this.patch(pod);
    }, this.settleMs);
    timer.unref();
    const entry: Followed = { pod, timer };
    this.followed.set(pod.uid, entry);
    // The store may have seen the Binding before its answer reached us.
    const current = this.deps.pods.pod(pod.namespace, pod.name);
    if (current !== undefined) this.settle(entry, current);
  }

  /** Decides once the store shows this incarnation bound; true when decided. */
  private settle(entry: Followed, seen: V1Pod): boolean {
    const { pod } = entry;
    if (seen.metadata?.uid !== pod.uid) return false;
    const boundTo = seen.spec?.nodeName;
    if (boundTo === undefined || boundTo === '') return false;
    this.forget(entry);
    // Bound elsewhere cannot be this bind's doing; a label already there needs nothing.
    if (boundTo === pod.node && seen.metadata.labels?.[VGPU_NODE_LABEL] !== pod.node) this.patch(pod);
    return true;
  }

  private forget(entry: Followed): void {
    clearTimeout(entry.timer);
    if (this.followed.get(entry.pod.uid) === entry) this.followed.delete(entry.pod.uid);
  }

  private patch(pod: BoundPod): void {
    this.deps.patchLabel(pod).catch((error: unknown) => {
      this.deps.log?.(
        `could not label ${pod.namespace}/${pod.name} with ${VGPU_NODE_LABEL} (the bind stands): ${(error as Error).message}`,
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
