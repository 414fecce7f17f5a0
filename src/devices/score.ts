import type { GpuPolicy } from './gpu-order.js';
import type { GpuDevice } from './inventory.js';
import { NO_USE, type GpuUse } from './usage.js';

/**
 * Scheduling policies and the node score for the extender's /prioritize (hami-wire-contract.md §3.4).
 * Pure.
 */
export type NodePolicy = 'binpack' | 'spread';

export const NODE_POLICY_ANNOTATION = 'hami.io/node-scheduler-policy';
export const GPU_POLICY_ANNOTATION = 'hami.io/gpu-scheduler-policy';

type Policy = 'binpack' | 'spread';

/**
 * `binpack` or `spread`, trimmed. HAMi's GPU policy may be a chain such as `binpack,numa`; its first
 * key decides the order, and the keys we do not implement (numa, mutex, topology-aware) are
 * dropped. Anything else is not a policy we know.
 */
function readPolicy(value: string | undefined): Policy | undefined {
  const first = value?.split(',')[0]?.trim();
  return first === 'binpack' || first === 'spread' ? first : undefined;
}

/** The pod's node and GPU policies; absent or unknown annotation values fall back to the defaults. */
export function policiesFor(
  podAnnotations: Readonly<Record<string, string>>,
  defaults: { node: NodePolicy; gpu: GpuPolicy },
): { node: NodePolicy; gpu: GpuPolicy } {
  return {
    node: readPolicy(podAnnotations[NODE_POLICY_ANNOTATION]) ?? defaults.node,
    gpu: readPolicy(podAnnotations[GPU_POLICY_ANNOTATION]) ?? defaults.gpu,
  };
}

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
  const mean = (ratio(used.slots, total.slots) + ratio(used.cores, total.cores) + ratio(used.memoryMiB, total.memoryMiB)) / 3;
  return Math.min(1, Math.max(0, mean));
}

/**
 * 0..10 for /prioritize, computed on the usage *after* placing the pod (HAMi scores the node before
 * it, which cannot tell a pod that fills a node from one that barely touches it). binpack favours
 * the fuller node, spread the emptier one.
 */
export function nodeScore(devices: readonly GpuDevice[], usageAfter: ReadonlyMap<string, GpuUse>, policy: NodePolicy): number {
  const binpack = Math.round(10 * nodeUtilization(devices, usageAfter));
  return policy === 'binpack' ? binpack : 10 - binpack;
}
