/**
 * HAMi's per-container and resource-quota scheduler metric families (cmd/scheduler/metrics.go):
 * the samples they are built from and the family definitions, with HAMi's names, label names and
 * values. Pure; WardenMetrics writes them from its sources at every scrape (gauge-exposition.ts).
 */
import { decodeAllocation } from '../devices/allocation-codec.js';
import type { QuotaUse } from '../devices/gpu-quota.js';
import { ALLOCATED_ANNOTATION } from '../hami/wire.js';
import { allocationNodeOf } from '../hami/pod-node.js';

/**
 * One family as HAMi's collector registers it. HAMi wraps its registry with the constant label
 * zone="vGPU"; WardenMetrics adds it, so queries written for HAMi match.
 */
export interface HamiFamily<S> {
  name: string;
  help: string;
  labels: readonly string[];
  /** Label values in `labels` order, then the value; undefined leaves the sample out. */
  sample: (sample: S) => { values: string[]; value: number } | undefined;
  /** One of HAMi's legacy names (its --legacy-metrics; LEGACY_METRICS here). */
  legacy?: true;
}

export const MIB = 1024 * 1024;

/**
 * A GPU's capacity as 100, an allocation as a rounded-up percentage of it. At HAMi's default
 * deviceCoreScaling 1 (a GPU has 100 cores) this is the raw core count HAMi publishes for NVIDIA.
 * Integer arithmetic: (7 / 100) * 100 is 7.000000000000001 in floating point, which ceil made 8.
 */
export function coreRatio(totalCores: number, usedCores: number): { limit: number; allocated: number } {
  if (totalCores <= 0) return { limit: 0, allocated: 0 };
  return { limit: 100, allocated: Math.ceil((usedCores * 100) / totalCores) };
}

/** One GPU share of one container of a pod holding GPUs. */
export interface ContainerAllocationSample {
  namespace: string;
  node: string;
  pod: string;
  /** Position in hami.io/vgpu-devices-allocated: init containers first, as HAMi counts. */
  containerIndex: number;
  uuid: string;
  memoryMiB: number;
  /** The share's cores in HAMi's units (the annotation's value). */
  cores: number;
  /** The GPU's core capacity from the node's inventory; 0 when the inventory does not list it. */
  gpuCores: number;
}

/** Called on every scrape; undefined means "not known here" (the families are left out). */
export type ContainerAllocationSource = () => readonly ContainerAllocationSample[] | undefined;

/** The parts of a pod containerAllocationSamples() reads (V1Pod has them). */
export interface AllocationPod {
  metadata?: { namespace?: string; name?: string; annotations?: Record<string, string> };
  spec?: { nodeName?: string };
  status?: { phase?: string };
}

/** What containerAllocationSamples() reads: the state store's pods and inventory (ClusterCache has both). */
export interface ContainerAllocationView {
  allPods(): Iterable<AllocationPod>;
  inventory(node: string): { devices: readonly { uuid: string; cores: number }[] } | undefined;
}

/**
 * Every GPU share of every container of every pod holding GPUs, the way HAMi's collector walks its
 * scheduled pods. Pods that have finished hold nothing; a pod whose annotation cannot be decoded is
 * left out (it is counted by vgpu_warden_unreadable_allocations). That includes a device with an
 * empty UUID, which the decoder refuses: HAMi skips just that device. Bounded by the pods and GPUs
 * of the cluster.
 */
export function containerAllocationSamples(view: ContainerAllocationView): ContainerAllocationSample[] {
  const samples: ContainerAllocationSample[] = [];
  for (const pod of view.allPods()) {
    const annotations = pod.metadata?.annotations ?? {};
    const encoded = annotations[ALLOCATED_ANNOTATION];
    const node = allocationNodeOf(pod);
    const phase = pod.status?.phase;
    if (encoded === undefined || node === undefined || node === '' || phase === 'Succeeded' || phase === 'Failed')
      continue;
    const allocation = decodeAllocation(encoded);
    if ('error' in allocation) continue;
    const gpuCores = new Map((view.inventory(node)?.devices ?? []).map((device) => [device.uuid, device.cores]));
    const [namespace, name] = [pod.metadata?.namespace ?? '', pod.metadata?.name ?? ''];
    allocation.forEach((devices, containerIndex) => {
      for (const device of devices) {
        samples.push({
          namespace,
          node,
          pod: name,
          containerIndex,
          uuid: device.uuid,
          memoryMiB: device.memoryMiB,
          cores: device.cores,
          gpuCores: gpuCores.get(device.uuid) ?? 0,
        });
      }
    });
  }
  return samples;
}

const containerLabels = (share: ContainerAllocationSample): string[] => [
  share.namespace,
  share.node,
  share.pod,
  String(share.containerIndex),
  share.uuid,
];

export const HAMI_CONTAINER_FAMILIES: readonly HamiFamily<ContainerAllocationSample>[] = [
  {
    name: 'hami_vgpu_memory_allocated_bytes',
    help: 'vGPU memory allocated from a container',
    labels: ['namespace', 'node', 'pod', 'container_index', 'device_uuid'],
    sample: (share) => ({ values: containerLabels(share), value: share.memoryMiB * MIB }),
  },
  {
    name: 'hami_vgpu_core_allocated_ratio',
    help: 'vGPU core allocated from a container',
    labels: ['namespace', 'node', 'pod', 'container_index', 'device_uuid'],
    sample: (share) => ({ values: containerLabels(share), value: coreRatio(share.gpuCores, share.cores).allocated }),
  },
  // Legacy names: raw core units rather than a ratio, as HAMi's legacy collector reports them.
  {
    name: 'vGPUMemoryAllocated',
    legacy: true,
    help: 'vGPU memory allocated from a container',
    labels: ['podnamespace', 'nodename', 'podname', 'containeridx', 'deviceuuid'],
    sample: (share) => ({ values: containerLabels(share), value: share.memoryMiB * MIB }),
  },
  {
    name: 'vGPUCoreAllocated',
    legacy: true,
    help: 'vGPU core allocated from a container',
    labels: ['podnamespace', 'nodename', 'podname', 'containeridx', 'deviceuuid'],
    sample: (share) => ({ values: containerLabels(share), value: share.cores }),
  },
];

/** One namespace's use of one quota-limited resource (what the state store's quotaUses() gives). */
export type QuotaSample = QuotaUse;

/** Called on every scrape; undefined means "not known here" (the quota families are left out). */
export type QuotaSource = () => readonly QuotaSample[] | undefined;

export const HAMI_QUOTA_FAMILIES: readonly HamiFamily<QuotaSample>[] = [
  {
    name: 'hami_resource_quota_used',
    help: 'resourcequota usage for a certain device',
    labels: ['namespace', 'quota_name', 'limit'],
    sample: (quota) => ({ values: [quota.namespace, quota.resource, String(quota.limit)], value: quota.used }),
  },
  {
    name: 'hami_resource_quota_limit',
    help: 'resourcequota limit for a certain device',
    labels: ['namespace', 'quota_name'],
    sample: (quota) => ({ values: [quota.namespace, quota.resource], value: quota.limit }),
  },
  {
    name: 'QuotaUsed',
    legacy: true,
    help: 'resourcequota usage for a certain device',
    labels: ['quotanamespace', 'quotaName', 'limit'],
    sample: (quota) => ({ values: [quota.namespace, quota.resource, String(quota.limit)], value: quota.used }),
  },
];
