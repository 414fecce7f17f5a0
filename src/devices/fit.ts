import { NVIDIA_DEVICE_TYPE, type AllocatedDevice, type PodAllocation } from './allocation-codec.js';
import { cardFilters, checkCard, MIG_MODE, type CardFilters, type CardReason } from './card-checks.js';
import { orderGpus } from './gpu-order.js';
import { asChain, type GpuPolicy, type GpuPolicyChain } from './gpu-policy.js';
import {
  namespaceUseOf,
  quotaExceeded,
  RESOURCE_QUOTA_NOT_FIT,
  type NamespaceUse,
  type QuotaBudget,
} from './gpu-quota.js';
import { type GpuDevice, type LinkScores } from './inventory.js';
import { groupByNuma, parseNumaBind } from './numa.js';
import { initLayout, memoryOnGpu, type ContainerGpuRequest, type PodGpuRequests } from './requests.js';
import { parseScoringWeights, type ScoringWeights } from './scoring-weights.js';
import { bestLinkedSet, leastLinked } from './topology.js';
import { addUsage, NO_USE, podDeviceUsage, UsageOverlay, type GpuUse, type InitLayout } from './usage.js';
import { quoted } from '../base/user-text.js';
import { NODE_SCORE_ANNOTATION, VGPU_MODE_ANNOTATION } from '../hami/wire.js';

/**
 * Fitting a pod's GPU requests onto one node (hami-wire-contract.md §3.3 step 6 and §4.4,
 * hami-core mode; pkg/device/nvidia/device.go Fit): the GPU policy chain (sort keys, `mutex`,
 * `topology-aware`), `nvidia.com/numa-bind`, the namespace's GPU quota (gpu-quota.ts), no MIG.
 * Pure: the caller's usage is never modified.
 *
 * Invariant 4 (ARCHITECTURE.md §5): every share is checked against the GPU's slots, memory and
 * cores before it is taken, so for GPUs that started within capacity `usageAfter` stays within it.
 */
export type { GpuPolicy, GpuPolicyChain } from './gpu-policy.js';

export interface FitInput {
  devices: readonly GpuDevice[];
  /** Current usage per GPU UUID (bound plus assumed pods). */
  usage: ReadonlyMap<string, GpuUse>;
  requests: PodGpuRequests;
  /** use/nouse-gpuuuid, use/nouse-gputype, vgpu-mode, numa-bind and device-scoring-weights are honoured. */
  podAnnotations: Readonly<Record<string, string>>;
  gpuPolicy: GpuPolicy | GpuPolicyChain;
  /** The node's hami.io/node-nvidia-score, which `topology-aware` needs. */
  linkScores?: LinkScores;
  /** `prepareFit(podAnnotations)`, when the caller fits the same pod onto many nodes. */
  prepared?: PreparedFit;
  /** The pod's namespace GPU quota; absent when no ResourceQuota of the namespace limits GPUs. */
  quota?: QuotaBudget | undefined;
}

/** What a fit reads from the pod's annotations, parsed once per pod rather than once per node. */
export type PreparedFit =
  { filters: CardFilters; weights: ScoringWeights; numaBind: boolean } | { error: string; code: string };

/**
 * A vgpu-mode that no hami-core or mps GPU can satisfy but a MIG GPU could: the pod asks for MIG,
 * which we do not place. Named up front rather than as a CardTypeMismatch on every node.
 */
function migOnlyProblem(annotations: Readonly<Record<string, string>>): string | undefined {
  const mode = annotations[VGPU_MODE_ANNOTATION];
  if (mode === undefined || !mode.includes(MIG_MODE) || mode.includes('hami-core') || mode.includes('mps'))
    return undefined;
  return (
    `unsupported ${VGPU_MODE_ANNOTATION} ${quoted(mode)}: vgpu-warden does not place MIG instances (only ` +
    `hami-core and mps GPUs)`
  );
}

export function prepareFit(podAnnotations: Readonly<Record<string, string>>): PreparedFit {
  const weights = parseScoringWeights(podAnnotations);
  if ('error' in weights) return { ...weights, code: INVALID_SCORING_WEIGHTS };
  const numaBind = parseNumaBind(podAnnotations);
  if (typeof numaBind === 'object') return { ...numaBind, code: INVALID_NUMA_BIND };
  const mig = migOnlyProblem(podAnnotations);
  if (mig !== undefined) return { error: mig, code: MIG_UNSUPPORTED };
  return { filters: cardFilters(podAnnotations), weights, numaBind };
}

export type FitResult =
  | { fits: true; allocation: PodAllocation; usageAfter: Map<string, GpuUse> }
  | { fits: false; reason: string; reasonCounts: Record<string, number> };

export type FitFailure = Extract<FitResult, { fits: false }>;

export const NODE_INSUFFICIENT_DEVICE = 'NodeInsufficientDevice';
export const ALLOCATED_CARDS_INSUFFICIENT_REQUEST = 'AllocatedCardsInsufficientRequest';
/** The pod-level problems prepareFit finds; the extender's filter answers them with an Error. */
export const INVALID_SCORING_WEIGHTS = 'InvalidDeviceScoringWeights';
export const INVALID_NUMA_BIND = 'InvalidNumaBind';
export const MIG_UNSUPPORTED = 'MigModeUnsupported';
/** HAMi's reason when numa-bind finds enough GPUs on the node but not on one NUMA node. */
export const NUMA_NOT_FIT = 'NumaNotFit';
/** Ours: `topology-aware` on a node whose plugin reports no link scores (HAMi would pick blindly). */
export const NODE_TOPOLOGY_UNKNOWN = 'NodeTopologyUnknown';
const TOPOLOGY_UNKNOWN_REASON =
  `${NODE_TOPOLOGY_UNKNOWN}: topology-aware needs the node's ` +
  `${NODE_SCORE_ANNOTATION}, which the HAMi device plugin writes with ENABLE_TOPOLOGY_SCORE=true`;

/** `"<count>/<gpus> <Reason>"` entries sorted by reason name and joined by `", "`, as HAMi words them. */
export function formatReasons(reasonCounts: Readonly<Record<string, number>>, gpus: number): string {
  return Object.keys(reasonCounts)
    .sort()
    .map((reason) => `${reasonCounts[reason] ?? 0}/${gpus} ${reason}`)
    .join(', ');
}

interface FitContext {
  /** The GPUs an NVIDIA request may use: those whose model contains "NVIDIA". */
  gpus: readonly GpuDevice[];
  filters: CardFilters;
  policy: GpuPolicyChain;
  weights: ScoringWeights;
  numaBind: boolean;
  linkScores: LinkScores | undefined;
  /**
   * The quota limit the pod would break with this container holding `devices` (its earlier
   * containers included), or undefined; absent when no quota applies.
   */
  quotaBreak: ((devices: readonly AllocatedDevice[]) => string | undefined) | undefined;
}

type ReasonCounts = Partial<
  Record<
    CardReason | typeof ALLOCATED_CARDS_INSUFFICIENT_REQUEST | typeof NUMA_NOT_FIT | typeof RESOURCE_QUOTA_NOT_FIT,
    number
  >
>;

/**
 * Which `count` of the fitting GPUs (in policy order) to take, or undefined when no acceptable set
 * exists. Without numa-bind or topology-aware: the first `count`. numa-bind: only sets within one
 * NUMA node (HAMi's Fit restarts its count whenever the NUMA node changes); of the NUMA nodes with
 * enough, the one whose first `count` GPUs reach least far down the policy order, so spread takes
 * the emptiest NUMA node and binpack the fullest. topology-aware: the best-linked set (with
 * numa-bind, the best of each NUMA node's best), ties to the earlier.
 */
function selectGpus(candidates: readonly GpuDevice[], count: number, context: FitContext): GpuDevice[] | undefined {
  const position = new Map(candidates.map((device, index) => [device, index]));
  const reach = (group: readonly GpuDevice[]): number => position.get(group[count - 1] as GpuDevice) ?? Infinity;
  const groups = (context.numaBind ? groupByNuma(candidates) : [[...candidates]])
    .filter((group) => group.length >= count)
    .sort((a, b) => reach(a) - reach(b));
  const scores = context.linkScores;
  if (groups.length === 0) return undefined;
  if (!context.policy.topologyAware || scores === undefined) return groups[0]?.slice(0, count);
  if (count === 1) {
    // One GPU is always on one NUMA node: the least-linked of all the fitting GPUs.
    const least = leastLinked(candidates, scores);
    return least === undefined ? undefined : [least];
  }
  let best: { devices: GpuDevice[]; score: number } | undefined;
  for (const group of groups) {
    const set = bestLinkedSet(group, count, scores);
    if (best === undefined || set.score > best.score) best = set;
  }
  return best?.devices;
}

function failure(reason: string, reasonCounts: Record<string, number>): FitFailure {
  return { fits: false, reason, reasonCounts };
}

function shareOf(device: GpuDevice, request: ContainerGpuRequest): AllocatedDevice {
  return {
    uuid: device.uuid,
    type: NVIDIA_DEVICE_TYPE,
    memoryMiB: memoryOnGpu(request, device.memoryMiB),
    cores: request.cores,
  };
}

/** HAMi's "n/m Reason" list, followed by the quota sentence when a GPU was refused for the quota. */
function reasonText(reasonCounts: ReasonCounts, gpus: number, quotaDetail: string | undefined): string {
  const text = formatReasons(reasonCounts, gpus);
  return quotaDetail === undefined ? text : `${text} (${quotaDetail})`;
}

/**
 * Takes `request.count` distinct GPUs for one container, trying them in policy order, and adds the
 * shares to `usage` on success. Each GPU rejected counts once under its first failing reason.
 */
function fitContainer(
  context: FitContext,
  usage: UsageOverlay,
  request: ContainerGpuRequest,
): AllocatedDevice[] | FitFailure {
  const { gpus, policy } = context;
  if (request.count > gpus.length) {
    // HAMi reports this one bare, without a GPU count.
    return failure(NODE_INSUFFICIENT_DEVICE, { [NODE_INSUFFICIENT_DEVICE]: 1 });
  }
  if (policy.topologyAware && context.linkScores === undefined)
    return failure(TOPOLOGY_UNKNOWN_REASON, { [NODE_TOPOLOGY_UNKNOWN]: 1 });
  // numa-bind and topology-aware choose among every fitting GPU; otherwise the first ones will do.
  const needsAll = context.numaBind || policy.topologyAware;
  const { candidates, reasonCounts, quotaDetail } = fittingGpus(context, usage, request, needsAll);
  const chosen = selectGpus(candidates, request.count, context);
  if (chosen === undefined) {
    // Enough GPUs fit, but on no one NUMA node: they all count as NumaNotFit.
    if (candidates.length >= request.count) reasonCounts[NUMA_NOT_FIT] = candidates.length;
    else if (candidates.length > 0) reasonCounts[ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = candidates.length;
    return failure(reasonText(reasonCounts, gpus.length, quotaDetail), reasonCounts);
  }
  const taken = chosen.map((device) => shareOf(device, request));
  if (needsAll && context.quotaBreak !== undefined) {
    const broken = context.quotaBreak(taken);
    if (broken !== undefined) {
      reasonCounts[RESOURCE_QUOTA_NOT_FIT] = taken.length;
      return failure(reasonText(reasonCounts, gpus.length, broken), reasonCounts);
    }
  }
  for (const device of taken) {
    const current = usage.get(device.uuid) ?? NO_USE;
    usage.set(device.uuid, {
      slots: current.slots + 1,
      memoryMiB: current.memoryMiB + device.memoryMiB,
      cores: current.cores + device.cores,
    });
  }
  return taken;
}

/**
 * The GPUs that fit one container, in policy order, and why the others do not (each GPU once,
 * under its first failing reason). With `needsAll` every fitting GPU, else the first enough.
 */
function fittingGpus(
  context: FitContext,
  usage: UsageOverlay,
  request: ContainerGpuRequest,
  needsAll: boolean,
): { candidates: GpuDevice[]; reasonCounts: ReasonCounts; quotaDetail: string | undefined } {
  const { gpus, policy } = context;
  const candidates: GpuDevice[] = [];
  const reasonCounts: ReasonCounts = {};
  let quotaDetail: string | undefined;
  for (const device of orderGpus(gpus, usage, request, policy, context.weights)) {
    const reason = checkCard(device, usage.get(device.uuid) ?? NO_USE, request, context.filters, policy.mutex);
    if (reason !== undefined) {
      reasonCounts[reason] = (reasonCounts[reason] ?? 0) + 1;
      continue;
    }
    // As HAMi's Fit: a GPU whose share, with the shares taken so far, breaks the quota is skipped
    // (with a percentage request a smaller GPU may still fit). numa-bind and topology-aware check
    // the set they choose instead.
    if (!needsAll && context.quotaBreak !== undefined) {
      const broken = context.quotaBreak([...candidates, device].map((gpu) => shareOf(gpu, request)));
      if (broken !== undefined) {
        reasonCounts[RESOURCE_QUOTA_NOT_FIT] = (reasonCounts[RESOURCE_QUOTA_NOT_FIT] ?? 0) + 1;
        quotaDetail ??= broken;
        continue;
      }
    }
    candidates.push(device);
    if (!needsAll && candidates.length === request.count) break;
  }
  return { candidates, reasonCounts, quotaDetail };
}

const NVIDIA_IN_TYPE = new RegExp(NVIDIA_DEVICE_TYPE, 'i');

function isNvidiaGpu(device: GpuDevice): boolean {
  return NVIDIA_IN_TYPE.test(device.type);
}

const plus = (a: NamespaceUse, b: NamespaceUse): NamespaceUse => ({
  gpus: a.gpus + b.gpus,
  memoryMiB: a.memoryMiB + b.memoryMiB,
  cores: a.cores + b.cores,
});

/**
 * The least the pod adds to its namespace whatever GPUs it gets, field by field: kube-scheduler's
 * effective request with sidecars (KEP-753), the larger of the app containers plus every sidecar
 * and each plain init container plus the sidecars started before it. Without sidecars that is
 * HAMi's webhook pre-check (the larger of the app containers' sum and the biggest init container).
 * Memory given as a percentage is counted per GPU during the fit instead.
 */
export function leastQuotaUse(requests: PodGpuRequests): NamespaceUse {
  const use = (request: ContainerGpuRequest | undefined): NamespaceUse =>
    request === undefined
      ? { gpus: 0, memoryMiB: 0, cores: 0 }
      : { gpus: request.count, memoryMiB: request.memoryMiB * request.count, cores: request.cores * request.count };
  let sidecars: NamespaceUse = { gpus: 0, memoryMiB: 0, cores: 0 };
  const peak: NamespaceUse = { gpus: 0, memoryMiB: 0, cores: 0 };
  for (const [position, init] of requests.initContainers.entries()) {
    if (requests.sidecars?.[position] === true) {
      sidecars = plus(sidecars, use(init));
      continue;
    }
    const phase = plus(sidecars, use(init));
    peak.gpus = Math.max(peak.gpus, phase.gpus);
    peak.memoryMiB = Math.max(peak.memoryMiB, phase.memoryMiB);
    peak.cores = Math.max(peak.cores, phase.cores);
  }
  const running = requests.containers.map(use).reduce(plus, sidecars);
  return {
    gpus: Math.max(running.gpus, peak.gpus),
    memoryMiB: Math.max(running.memoryMiB, peak.memoryMiB),
    cores: Math.max(running.cores, peak.cores),
  };
}

/**
 * Whether every allocation of the pod adds exactly leastQuotaUse to its namespace, so the pre-check
 * has settled the quota and no GPU needs checking: no plain init container asks for a GPU (their
 * per-GPU peak can land beside the app containers' sum; a sidecar's share simply adds) and no share
 * is a percentage of a card's memory.
 */
function quotaUseIsFixed(requests: PodGpuRequests): boolean {
  return (
    requests.initContainers.every(
      (request, position) => request === undefined || requests.sidecars?.[position] === true,
    ) &&
    requests.containers.every(
      (request) => request === undefined || request.memoryMiB > 0 || request.memoryPercentage === undefined,
    )
  );
}

/**
 * The quota check of one fit: `allocation` holds the containers fitted so far when a container
 * asks. A function of its own, so fitPod's locals are not captured by a closure on every call.
 */
function quotaChecker(
  quota: QuotaBudget,
  allocation: PodAllocation,
  layout: InitLayout,
): (devices: readonly AllocatedDevice[]) => string | undefined {
  return (devices) => quotaExceeded(quota, namespaceUseOf(podDeviceUsage([...allocation, [...devices]], layout)));
}

/**
 * `ResourceQuotaNotFit (<the limit broken>)` when the pod is over its namespace's GPU quota whatever
 * GPUs it gets (the pre-check), else undefined.
 */
export function podOverQuota(requests: PodGpuRequests, quota: QuotaBudget | undefined): string | undefined {
  if (quota === undefined) return undefined;
  const broken = quotaExceeded(quota, leastQuotaUse(requests));
  return broken === undefined ? undefined : `${RESOURCE_QUOTA_NOT_FIT} (${broken})`;
}

export function fitPod(input: FitInput): FitResult {
  const prepared = input.prepared ?? prepareFit(input.podAnnotations);
  if ('error' in prepared) return failure(prepared.error, { [prepared.code]: 1 });
  const quota = input.quota;
  // A pod over its quota on every node says so once, not as a GPU count per node.
  const overQuota = podOverQuota(input.requests, quota);
  if (overQuota !== undefined) return failure(overQuota, { [RESOURCE_QUOTA_NOT_FIT]: 1 });
  const allocation: PodAllocation = [];
  const layout = initLayout(input.requests);
  const context: FitContext = {
    gpus: input.devices.filter(isNvidiaGpu),
    filters: prepared.filters,
    policy: asChain(input.gpuPolicy),
    weights: prepared.weights,
    numaBind: prepared.numaBind,
    linkScores: input.linkScores,
    quotaBreak:
      quota === undefined || quotaUseIsFixed(input.requests) ? undefined : quotaChecker(quota, allocation, layout),
  };

  // Init containers run one after another: each sees the node as it is, with the sidecars started
  // before it, not the other init containers' shares. A sidecar keeps running: its share stays
  // under every container after it (its segment stays in its init container's place).
  const running = new UsageOverlay(input.usage);
  for (const [position, request] of input.requests.initContainers.entries()) {
    if (request === undefined) {
      allocation.push([]);
      continue;
    }
    const sidecar = input.requests.sidecars?.[position] === true;
    const devices = fitContainer(context, sidecar ? running : new UsageOverlay(running), request);
    if (!Array.isArray(devices)) return devices;
    allocation.push(devices);
  }
  // App containers run together, beside the sidecars: their shares accumulate.
  const appUsage = new UsageOverlay(running);
  for (const request of input.requests.containers) {
    if (request === undefined) {
      allocation.push([]);
      continue;
    }
    const devices = fitContainer(context, appUsage, request);
    if (!Array.isArray(devices)) return devices;
    allocation.push(devices);
  }

  // A shallow copy is enough: addUsage replaces the entries it changes and never mutates them.
  const usageAfter = new Map(input.usage);
  addUsage(usageAfter, podDeviceUsage(allocation, layout));
  return { fits: true, allocation, usageAfter };
}
