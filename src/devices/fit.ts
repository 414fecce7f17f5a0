import { NVIDIA_DEVICE_TYPE, type AllocatedDevice, type PodAllocation } from './allocation-codec.js';
import { cardFilters, checkCard, type CardFilters, type CardReason } from './card-checks.js';
import { orderGpus, type GpuPolicy } from './gpu-order.js';
import type { GpuDevice } from './inventory.js';
import { memoryOnGpu, type ContainerGpuRequest, type PodGpuRequests } from './requests.js';
import { parseScoringWeights, type ScoringWeights } from './scoring-weights.js';
import { addUsage, NO_USE, podDeviceUsage, UsageOverlay, type GpuUse } from './usage.js';

/**
 * Fitting a pod's GPU requests onto one node (hami-wire-contract.md §3.3 step 6 and §4.4,
 * hami-core mode: no MIG, NUMA binding, topology or quota). Pure: the caller's usage is never
 * modified.
 *
 * Invariant 4 (ARCHITECTURE.md §5): every share is checked against the GPU's slots, memory and
 * cores before it is taken, so for GPUs that started within capacity `usageAfter` stays within it.
 */
export type { GpuPolicy } from './gpu-order.js';

export interface FitInput {
  devices: readonly GpuDevice[];
  /** Current usage per GPU UUID (bound plus assumed pods). */
  usage: ReadonlyMap<string, GpuUse>;
  requests: PodGpuRequests;
  /** use/nouse-gpuuuid, use/nouse-gputype, vgpu-mode and device-scoring-weights are honoured. */
  podAnnotations: Readonly<Record<string, string>>;
  gpuPolicy: GpuPolicy;
  /** `prepareFit(podAnnotations)`, when the caller fits the same pod onto many nodes. */
  prepared?: PreparedFit;
}

/** What a fit reads from the pod's annotations, parsed once per pod rather than once per node. */
export type PreparedFit = { filters: CardFilters; weights: ScoringWeights } | { error: string };

export function prepareFit(podAnnotations: Readonly<Record<string, string>>): PreparedFit {
  const weights = parseScoringWeights(podAnnotations);
  return 'error' in weights ? weights : { filters: cardFilters(podAnnotations), weights };
}

export type FitResult =
  | { fits: true; allocation: PodAllocation; usageAfter: Map<string, GpuUse> }
  | { fits: false; reason: string; reasonCounts: Record<string, number> };

export type FitFailure = Extract<FitResult, { fits: false }>;

export const NODE_INSUFFICIENT_DEVICE = 'NodeInsufficientDevice';
export const ALLOCATED_CARDS_INSUFFICIENT_REQUEST = 'AllocatedCardsInsufficientRequest';
export const INVALID_SCORING_WEIGHTS = 'InvalidDeviceScoringWeights';

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
  policy: GpuPolicy;
  weights: ScoringWeights;
}

/**
 * Takes `request.count` distinct GPUs for one container, trying them in policy order, and adds the
 * shares to `usage` on success. Each GPU rejected counts once under its first failing reason.
 */
function fitContainer(context: FitContext, usage: UsageOverlay, request: ContainerGpuRequest): AllocatedDevice[] | FitFailure {
  const { gpus } = context;
  if (request.count > gpus.length) {
    // HAMi reports this one bare, without a GPU count.
    return { fits: false, reason: NODE_INSUFFICIENT_DEVICE, reasonCounts: { [NODE_INSUFFICIENT_DEVICE]: 1 } };
  }
  const taken: AllocatedDevice[] = [];
  const reasonCounts: Partial<Record<CardReason | typeof ALLOCATED_CARDS_INSUFFICIENT_REQUEST, number>> = {};
  for (const device of orderGpus(gpus, usage, request, context.policy, context.weights)) {
    const reason = checkCard(device, usage.get(device.uuid) ?? NO_USE, request, context.filters);
    if (reason !== undefined) {
      reasonCounts[reason] = (reasonCounts[reason] ?? 0) + 1;
      continue;
    }
    taken.push({ uuid: device.uuid, type: NVIDIA_DEVICE_TYPE, memoryMiB: memoryOnGpu(request, device.memoryMiB), cores: request.cores });
    if (taken.length === request.count) break;
  }
  if (taken.length < request.count) {
    if (taken.length > 0) reasonCounts[ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = taken.length;
    return { fits: false, reason: formatReasons(reasonCounts, gpus.length), reasonCounts };
  }
  for (const device of taken) {
    const current = usage.get(device.uuid) ?? NO_USE;
    usage.set(device.uuid, { slots: current.slots + 1, memoryMiB: current.memoryMiB + device.memoryMiB, cores: current.cores + device.cores });
  }
  return taken;
}

const NVIDIA_IN_TYPE = new RegExp(NVIDIA_DEVICE_TYPE, 'i');

function isNvidiaGpu(device: GpuDevice): boolean {
  return NVIDIA_IN_TYPE.test(device.type);
}

export function fitPod(input: FitInput): FitResult {
  const prepared = input.prepared ?? prepareFit(input.podAnnotations);
  if ('error' in prepared) return { fits: false, reason: prepared.error, reasonCounts: { [INVALID_SCORING_WEIGHTS]: 1 } };
  const context: FitContext = {
    gpus: input.devices.filter(isNvidiaGpu),
    filters: prepared.filters,
    policy: input.gpuPolicy,
    weights: prepared.weights,
  };

  const allocation: PodAllocation = [];
  // Init containers run one after another: each sees the node as it is, not the others' shares.
  for (const request of input.requests.initContainers) {
    if (request === undefined) {
      allocation.push([]);
      continue;
    }
    const devices = fitContainer(context, new UsageOverlay(input.usage), request);
    if (!Array.isArray(devices)) return devices;
    allocation.push(devices);
  }
  // App containers run together: their shares accumulate.
  const appUsage = new UsageOverlay(input.usage);
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
  addUsage(usageAfter, podDeviceUsage(allocation, input.requests.initContainers.length));
  return { fits: true, allocation, usageAfter };
}
