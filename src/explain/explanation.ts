import type { LockRow } from '../lock/lock-report.js';

/**
 * What `vgpu-warden explain <namespace>/<pod>` reports about one pod, as plain data: the text and
 * the JSON output are both rendered from it. Times are ISO strings, ages whole seconds; every
 * string someone else wrote (event messages, annotation values, lock values) is clipped and every
 * list is capped, so the whole object stays one screen's worth whatever the cluster holds.
 */
export interface Explanation {
  /** One line, first on screen: where the pod is and why. */
  verdict: string;
  situation: Situation;
  pod: PodSummary;
  webhook: WebhookReport;
  /** Filter's verdict per node; null when the pod is bound or asks for no GPU (nothing to place). */
  placement: PlacementReport | null;
  /** Locks this pod holds, waits for, or finds on the nodes it fits. */
  locks: LockEntry[];
  bind: BindReport;
  events: EventReport;
}

export type Situation =
  | 'not-a-gpu-pod'
  | 'other-scheduler'
  | 'unreadable-request'
  | 'fits-nowhere'
  | 'waiting-for-lock'
  | 'waiting-for-kubelet'
  | 'bind-failed'
  | 'schedulable'
  | 'bound-allocating'
  | 'allocation-stalled'
  | 'allocated'
  | 'allocation-failed'
  | 'bound-without-allocation'
  | 'finished';

export interface ContainerRequest {
  container: string;
  init: boolean;
  gpus: number;
  /** MiB per GPU; null when a percentage of each GPU's memory is asked for. */
  memoryMiB: number | null;
  memoryPercentage: number | null;
  cores: number;
}

export interface PodSummary {
  namespace: string;
  name: string;
  uid: string | null;
  phase: string | null;
  schedulerName: string | null;
  node: string | null;
  deleting: boolean;
  createdAt: string | null;
  /** GPU requests as filter and bind read them (containers without a GPU are left out). */
  requests: ContainerRequest[];
  /** Why a GPU request cannot be read (filter then answers with an Error); capped. */
  requestProblems: string[];
}

export interface WebhookReport {
  /**
   * applied: the pod is as the webhook leaves it (our schedulerName, nothing left to add);
   * not-applied: the webhook would still change it (it was down, or the namespace opted out);
   * would-deny: the webhook refuses such a pod, so it got in without it; skipped: another
   * scheduler's pod, or no GPU asked for.
   */
  state: 'applied' | 'not-applied' | 'would-deny' | 'skipped';
  detail: string;
  /** What the webhook would still add, as `path: value`; capped. */
  missing: string[];
}

export interface ReasonGroup {
  /** HAMi's reason name (CardInsufficientMemory, NodeInsufficientDevice, NoGpuInventory, ...). */
  reason: string;
  /** Nodes failing for it (a node whose GPUs fail for several reasons counts under each). */
  count: number;
  /** The first nodes by name, each with filter's whole reason for it. */
  nodes: { node: string; detail: string }[];
}

export interface PlacementReport {
  /** filter answers with this Error instead of per-node verdicts (unreadable request). */
  error: string | null;
  evaluated: number;
  fitting: { count: number; nodes: string[] };
  failing: ReasonGroup[];
  /** Reasons beyond the ones listed. */
  moreReasons: number;
  /** Fitting nodes (first few by name) whose lock names another pod: a bind there would wait. */
  lockedFitting: string[];
}

export interface LockEntry extends LockRow {
  relation: 'held-by-this-pod' | 'waited-for' | 'on-a-fitting-node';
}

export interface AllocatedGpu {
  uuid: string;
  memoryMiB: number;
  cores: number;
}

export type DecodedAnnotation =
  { containers: { container: string; gpus: AllocatedGpu[] }[] } | { error: string; value: string };

export interface BindReport {
  /** hami.io/bind-phase: allocating, success or failed; null when absent. */
  phase: string | null;
  /** hami.io/vgpu-node: the node bind chose. */
  vgpuNode: string | null;
  /** hami.io/bind-time as an ISO time. */
  bindTime: string | null;
  allocated: DecodedAnnotation | null;
  toAllocate: DecodedAnnotation | null;
  /** Containers with GPUs whose devices the device plugin has handed out, of all such containers. */
  progress: { done: number; total: number } | null;
}

export interface EventLine {
  time: string | null;
  ageSeconds: number | null;
  type: string;
  reason: string;
  message: string;
  count: number;
  source: string;
}

export interface EventReport {
  /** The most recent events, oldest first. */
  items: EventLine[];
  /** Older events not shown. */
  omitted: number;
}

/** How much is spelled out; the rest is counted. */
export interface ExplainLimits {
  reasons: number;
  namesPerReason: number;
  fittingNames: number;
  lockedFitting: number;
  events: number;
  missing: number;
  problems: number;
}

export const DEFAULT_LIMITS: ExplainLimits = Object.freeze({
  reasons: 6,
  namesPerReason: 3,
  fittingNames: 5,
  lockedFitting: 3,
  events: 8,
  missing: 5,
  problems: 3,
});

/** Event messages, lock values and annotation values are shown up to this many characters. */
export const MESSAGE_CHARS = 240;
export const VALUE_CHARS = 100;
