import {
  ALLOCATED_ANNOTATION,
  BIND_PHASE_ANNOTATION,
  BIND_TIME_ANNOTATION,
  TO_ALLOCATE_ANNOTATION,
  VGPU_NODE_ANNOTATION,
} from '../hami/wire.js';
import { decodeAllocation } from '../devices/allocation-codec.js';
import { containerName } from '../devices/requests.js';
import { clip, LABEL_CHARS } from '../base/user-text.js';
import { VALUE_CHARS, type BindReport, type DecodedAnnotation } from './explanation.js';

interface PodLike {
  metadata?: { annotations?: Record<string, string> };
  spec?: { initContainers?: unknown[]; containers?: unknown[] };
}

/** Container names in the allocation annotation's order: init containers first, then app containers. */
function containerNames(pod: PodLike): string[] {
  const names = (list: unknown[] | undefined, init: boolean): string[] =>
    (list ?? []).map(
      (container, position) => `${init ? 'init ' : ''}${containerName(container as Record<string, unknown>, position)}`,
    );
  return [...names(pod.spec?.initContainers, true), ...names(pod.spec?.containers, false)];
}

/** One allocation annotation decoded by the codec bind and the device plugin use; null when absent. */
function decoded(value: string | undefined, names: readonly string[]): DecodedAnnotation | null {
  if (value === undefined) return null;
  const allocation = decodeAllocation(value);
  if ('error' in allocation) return { error: allocation.error, value: clip(value, VALUE_CHARS) };
  return {
    containers: allocation.map((devices, index) => ({
      container: names[index] ?? `#${index}`,
      gpus: devices.map((device) => ({
        uuid: clip(device.uuid, LABEL_CHARS),
        memoryMiB: device.memoryMiB,
        cores: device.cores,
      })),
    })),
  };
}

/**
 * The device plugin's progress: of the containers bind gave GPUs to (hami.io/vgpu-devices-allocated),
 * those whose share of hami.io/vgpu-devices-to-allocate it has consumed (blanked). bind-phase
 * success means all of them.
 */
function progressOf(
  phase: string | undefined,
  allocated: DecodedAnnotation | null,
  toAllocate: DecodedAnnotation | null,
): BindReport['progress'] {
  if (allocated === null || 'error' in allocated) return null;
  const withGpus = allocated.containers
    .map((container, index) => ({ index, count: container.gpus.length }))
    .filter((entry) => entry.count > 0);
  if (phase === 'success') return { done: withGpus.length, total: withGpus.length };
  if (toAllocate === null || 'error' in toAllocate) return null;
  const done = withGpus.filter((entry) => (toAllocate.containers[entry.index]?.gpus.length ?? 0) === 0).length;
  return { done, total: withGpus.length };
}

function bindTimeOf(seconds: string | undefined): string | null {
  if (seconds === undefined || !/^\d{1,12}$/.test(seconds)) return null;
  return new Date(Number(seconds) * 1000).toISOString();
}

/** What bind wrote onto the pod and how far the device plugin got with it. Pure. */
export function bindReport(pod: PodLike): BindReport {
  const annotations = pod.metadata?.annotations ?? {};
  const names = containerNames(pod);
  const phase = annotations[BIND_PHASE_ANNOTATION];
  const allocated = decoded(annotations[ALLOCATED_ANNOTATION], names);
  const toAllocate = decoded(annotations[TO_ALLOCATE_ANNOTATION], names);
  const vgpuNode = annotations[VGPU_NODE_ANNOTATION];
  return {
    phase: phase === undefined ? null : clip(phase, LABEL_CHARS),
    vgpuNode: vgpuNode === undefined ? null : clip(vgpuNode),
    bindTime: bindTimeOf(annotations[BIND_TIME_ANNOTATION]),
    allocated,
    toAllocate,
    progress: progressOf(phase, allocated, toAllocate),
  };
}
