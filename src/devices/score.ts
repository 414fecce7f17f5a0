import type { NodePolicy } from './gpu-policy.js';
import type { GpuDevice } from './inventory.js';
import { NO_USE, type GpuUse } from './usage.js';

/**
 * The node score for the extender's /prioritize (hami-wire-contract.md §3.4). Pure. The policies
 * themselves are read in gpu-policy.ts; they are re-exported here for existing importers.
 */
export type { NodePolicy } from './gpu-policy.js';
export { policiesFor } from './gpu-policy.js';

function ratio(used: number, total: number): number {
  return total > 0 ? used / total : 0;
}

/**
 * HAMi's node base score divided by its 30 maximum: the mean of slot, core and memory utilisation
 * summed over the healthy GPUs, clamped to 0..1. A dimension with no capacity contributes 0 (HAMi
 * zeroes the whole score then, which would hide real usage on the other two).
 */
export function nodeUtilization(devices: readonly GpuDevice[], usage: ReadonlyMap<string, GpuUse>): number {
  const total = { slots: 0, memoryMiB: 0, cores: 0 };
  const used = { slots: 0, memoryMiB: 0, cores: 0 };
  for (const device of devices) {
    if (!device.healthy) continue;
    const use = usage.get(device.uuid) ?? NO_USE;
    total.slots += device.count;
    total.memoryMiB += device.memoryMiB;
    total.cores += device.cores;
    used.slots += use.slots;
    used.memoryMiB += use.memoryMiB;
    used.cores += use.cores;
  }
  const mean =
    (ratio(used.slots, total.slots) + ratio(used.cores, total.cores) + ratio(used.memoryMiB, total.memoryMiB)) / 3;
  return Math.min(1, Math.max(0, mean));
}

/**
 * 0..10 for /prioritize, computed on the usage *after* placing the pod (HAMi scores the node before
 * it, which cannot tell a pod that fills a node from one that barely touches it). binpack favours
 * the fuller node, spread the emptier one.
 */
export function nodeScore(
  devices: readonly GpuDevice[],
  usageAfter: ReadonlyMap<string, GpuUse>,
  policy: NodePolicy,
): number {
  return scoreOfUtilization(nodeUtilization(devices, usageAfter), policy);
}

/** nodeScore from a utilization already computed (0..1). */
export function scoreOfUtilization(utilization: number, policy: NodePolicy): number {
  const binpack = Math.round(10 * utilization);
  return policy === 'binpack' ? binpack : 10 - binpack;
}
