import { quoted } from '../base/user-text.js';
import type { GpuDevice } from './inventory.js';
import { NUMA_BIND_ANNOTATION } from '../hami/wire.js';

/**
 * `nvidia.com/numa-bind` (hami-wire-contract.md §4.4): all of a container's GPUs on one NUMA node,
 * the node read from each GPU's `numa` field in hami.io/node-nvidia-register. Pure.
 *
 * HAMi (pkg/device/nvidia/device.go assertNuma) reads the value with Go's strconv.ParseBool and
 * silently ignores anything else; we refuse the pod instead, so `yes` does not quietly mean "no".
 * A GPU whose NUMA node the plugin could not read reports -1 (a host without NUMA): such GPUs form
 * one group of their own, as they do in HAMi's Fit.
 */

const GO_TRUE = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const GO_FALSE = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

export function parseNumaBind(annotations: Readonly<Record<string, string>>): boolean | { error: string } {
  const raw = annotations[NUMA_BIND_ANNOTATION];
  if (raw === undefined) return false;
  if (GO_TRUE.has(raw)) return true;
  if (GO_FALSE.has(raw)) return false;
  return { error: `invalid ${NUMA_BIND_ANNOTATION} ${quoted(raw)}: expected true or false` };
}

/** `devices` split by NUMA node, each group in the given order, groups in order of first appearance. */
export function groupByNuma(devices: readonly GpuDevice[]): GpuDevice[][] {
  const groups = new Map<number, GpuDevice[]>();
  for (const device of devices) {
    const group = groups.get(device.numa);
    if (group === undefined) groups.set(device.numa, [device]);
    else group.push(device);
  }
  return [...groups.values()];
}
