import type { PodAllocation } from './allocation-codec.js';
import { int32Quantity } from './quantity.js';
import { GPU_COUNT } from '../hami/wire.js';

/**
 * Which container each segment of a pod's allocation annotation goes to, the way HAMi v2.10's
 * device plugin hands them out. Pure.
 *
 * kubelet calls the plugin's Allocate once for every container that asks for nvidia.com/gpu, init
 * containers first, each list in spec order. The plugin (popNextContainerDevices,
 * pkg/device-plugin/nvidiadevice/nvinternal/plugin/util.go) answers each call with the first
 * segment that still has devices and blanks it; the segment's position only names the container
 * in its log. So the k-th segment with devices goes to the k-th container asking for GPUs,
 * whatever the empty segments around it. HAMi v2.10 on nodes registering a model-specific type
 * wrote values without the empty segment of a GPU-less init container (HAMi #2899:
 * `GPU-A,…:;GPU-B,…:;` for [init, app, app]); read by position, GPU-A would be the init
 * container's and dropped once init containers are done, while the plugin gave it to the first app
 * container.
 */
export interface ContainerSegments {
  /** One entry per container, init containers first; [] for a container given no GPU. */
  containers: PodAllocation;
  /** True when this is not "segment i is container i": the value was realigned onto the spec. */
  realigned: boolean;
}

type Json = Record<string, unknown>;

function asRecord(value: unknown): Json | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : undefined;
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? (value as unknown[]) : [];
}

/**
 * Does kubelet call the device plugin for this container? It does when the container asks for
 * nvidia.com/gpu (limits; requests when limits do not name it), whatever HAMi makes of the rest.
 */
function asksForGpus(container: unknown): boolean {
  const resources = asRecord(asRecord(container)?.resources);
  const count = asRecord(resources?.limits)?.[GPU_COUNT] ?? asRecord(resources?.requests)?.[GPU_COUNT];
  const value = int32Quantity(count);
  return value !== undefined && value > 0;
}

/**
 * The pod's allocation by container. When the segments with devices are as many as the containers
 * asking for GPUs, they go to those containers in order (what the plugin does). Otherwise the
 * plugin would fail an Allocate or leave segments unconsumed, and no order is provable: the value
 * is read by position, as HAMi's scheduler reads it.
 */
export function segmentsByContainer(allocation: PodAllocation, pod: unknown): ContainerSegments {
  const spec = asRecord(asRecord(pod)?.spec);
  const all = [...list(spec?.initContainers), ...list(spec?.containers)];
  const askers = all.flatMap((container, position) => (asksForGpus(container) ? [position] : []));
  const filled = allocation.flatMap((devices, position) => (devices.length > 0 ? [position] : []));
  const positional = { containers: allocation, realigned: false };
  if (askers.length === 0 || askers.length !== filled.length) return positional;
  if (askers.every((position, k) => filled[k] === position)) return positional;
  const containers: PodAllocation = all.map(() => []);
  askers.forEach((position, k) => {
    containers[position] = allocation[filled[k] ?? -1] ?? [];
  });
  return { containers, realigned: true };
}
