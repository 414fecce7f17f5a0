import type { GpuPolicy, GpuPolicyChain, GpuSortKey } from './gpu-policy.js';
import type { GpuDevice } from './inventory.js';
import { memoryOnGpu, type ContainerGpuRequest } from './requests.js';
import type { ScoringWeights } from './scoring-weights.js';
import { NO_USE, type GpuUse, type UsageLookup } from './usage.js';

/**
 * The order in which a container's request tries GPUs (hami-wire-contract.md §3.4). Pure.
 *
 * The score is HAMi's GPU score, but it counts the incoming share (one slot, the request's cores
 * and its memory on that GPU). HAMi's production score compares the request type `NVIDIA` with the
 * model name and so always adds nothing; counting it makes binpack prefer the GPU that ends up
 * fullest, which matters when GPUs differ in size.
 */
export type { GpuPolicy } from './gpu-policy.js';

function ratio(used: number, total: number): number {
  return total > 0 ? used / total : 0;
}

/** 10 × weighted utilisation of the GPU once this container's share is on it. */
export function gpuScore(
  device: GpuDevice,
  use: GpuUse,
  request: ContainerGpuRequest,
  weights: ScoringWeights,
): number {
  const slots = ratio(use.slots + 1, device.count);
  const cores = ratio(use.cores + request.cores, device.cores);
  const memory = ratio(use.memoryMiB + memoryOnGpu(request, device.memoryMiB), device.memoryMiB);
  return 10 * (weights.slot * slots + weights.core * cores + weights.memory * memory);
}

/**
 * The sort keys of the pod's chain in the order written (pkg/scheduler/policy/gpu_policy.go
 * lessByChain): binpack puts the fullest GPU first, spread the emptiest, numa the lower NUMA node
 * first (HAMi walks its sorted list from the end, so it tries the higher NUMA node first; which
 * node comes first is incidental there, and lower-first matches our index tie-break). A chain
 * without a sort key sorts as spread. When every key ties: the lower index, then the UUID, so the
 * same cluster state always gives the same placement (HAMi tries the higher index first).
 */
export function orderGpus(
  devices: readonly GpuDevice[],
  usage: UsageLookup,
  request: ContainerGpuRequest,
  policy: GpuPolicy | GpuPolicyChain,
  weights: ScoringWeights,
): GpuDevice[] {
  const keys: readonly GpuSortKey[] =
    typeof policy === 'string' ? [policy] : policy.keys.length > 0 ? policy.keys : ['spread'];
  const scored = devices.map((device) => ({
    device,
    score: gpuScore(device, usage.get(device.uuid) ?? NO_USE, request, weights),
  }));
  const compareKey = (key: GpuSortKey, a: (typeof scored)[number], b: (typeof scored)[number]): number => {
    if (key === 'numa') return a.device.numa - b.device.numa;
    return key === 'binpack' ? b.score - a.score : a.score - b.score;
  };
  scored.sort((a, b) => {
    for (const key of keys) {
      const order = compareKey(key, a, b);
      if (order !== 0) return order;
    }
    if (a.device.index !== b.device.index) return a.device.index - b.device.index;
    return a.device.uuid < b.device.uuid ? -1 : a.device.uuid > b.device.uuid ? 1 : 0;
  });
  return scored.map(({ device }) => device);
}
