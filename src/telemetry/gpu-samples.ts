import { coreRatio, MIB, type HamiFamily } from './hami-pod-metrics.js';

/** One GPU as HAMi's scheduler collector sees it: the inventory entry and what is allocated on it now. */
export interface GpuSample {
  node: string;
  uuid: string;
  index: number;
  type: string;
  memoryMiB: number;
  /** Core capacity in HAMi's units (100 × core scaling). */
  cores: number;
  usedMemoryMiB: number;
  usedCores: number;
  /** Containers sharing the GPU (HAMi's DeviceUsage.Used). */
  shared: number;
}

/** Called on every scrape; undefined means "not known here" (the HAMi GPU families are left out). */
export type GpuSource = () => readonly GpuSample[] | undefined;

/** What gpuSamples() reads: the state store's inventory and usage, nothing else. */
export interface GpuView {
  nodeNames(): readonly string[];
  inventory(
    node: string,
  ):
    { devices: readonly { uuid: string; index: number; memoryMiB: number; cores: number; type: string }[] } | undefined;
  usageOn(node: string): ReadonlyMap<string, { slots: number; memoryMiB: number; cores: number }>;
}

/** Every GPU of every node with an inventory, with its usage; bounded by the node and GPU count. */
export function gpuSamples(view: GpuView): GpuSample[] {
  const samples: GpuSample[] = [];
  for (const node of view.nodeNames()) {
    const inventory = view.inventory(node);
    if (inventory === undefined) continue;
    const usage = view.usageOn(node);
    for (const device of inventory.devices) {
      const use = usage.get(device.uuid);
      samples.push({
        node,
        uuid: device.uuid,
        index: device.index,
        type: device.type,
        memoryMiB: device.memoryMiB,
        cores: device.cores,
        usedMemoryMiB: use?.memoryMiB ?? 0,
        usedCores: use?.cores ?? 0,
        shared: use?.slots ?? 0,
      });
    }
  }
  return samples;
}

export const gpuLabels = (gpu: GpuSample): string[] => [gpu.node, gpu.uuid, String(gpu.index), gpu.type];

export const always = (values: string[], value: number) => ({ values, value });

/**
 * What a GPU family reports of one GPU, each kept once: HAMi reports the same value under its
 * current name and its legacy one (only the label names differ).
 */
const report = {
  memoryLimit: (gpu: GpuSample) => always(gpuLabels(gpu), gpu.memoryMiB * MIB),
  memoryAllocated: (gpu: GpuSample) =>
    always([gpu.node, gpu.uuid, String(gpu.index), String(gpu.cores), gpu.type], gpu.usedMemoryMiB * MIB),
  shared: (gpu: GpuSample) => always(gpuLabels(gpu), gpu.shared),
  overview: (gpu: GpuSample) =>
    always(
      [gpu.node, gpu.uuid, String(gpu.index), String(gpu.cores), String(gpu.memoryMiB), gpu.type],
      gpu.usedMemoryMiB * MIB,
    ),
  // A GPU with no memory has no memory fraction: HAMi leaves it out.
  memoryRatio: (gpu: GpuSample) =>
    gpu.memoryMiB > 0 ? always([gpu.node, gpu.uuid, String(gpu.index)], gpu.usedMemoryMiB / gpu.memoryMiB) : undefined,
};

export const HAMI_GPU_FAMILIES: readonly HamiFamily<GpuSample>[] = [
  {
    name: 'hami_gpu_memory_limit_bytes',
    help: 'Device memory limit for a certain GPU',
    labels: ['node', 'device_uuid', 'device_index', 'device_type'],
    sample: report.memoryLimit,
  },
  {
    name: 'hami_gpu_core_limit_ratio',
    help: 'Device core limit for a certain GPU',
    labels: ['node', 'device_uuid', 'device_index', 'device_type'],
    sample: (gpu) => always(gpuLabels(gpu), coreRatio(gpu.cores, gpu.usedCores).limit),
  },
  {
    name: 'hami_gpu_memory_allocated_bytes',
    help: 'Device memory allocated for a certain GPU',
    labels: ['node', 'device_uuid', 'device_index', 'device_cores', 'device_type'],
    sample: report.memoryAllocated,
  },
  {
    name: 'hami_gpu_shared_count',
    help: 'Number of containers sharing this GPU',
    labels: ['node', 'device_uuid', 'device_index', 'device_type'],
    sample: report.shared,
  },
  {
    name: 'hami_gpu_core_allocated_ratio',
    help: 'Device core allocated for a certain GPU',
    labels: ['node', 'device_uuid', 'device_index', 'device_type'],
    sample: (gpu) => always(gpuLabels(gpu), coreRatio(gpu.cores, gpu.usedCores).allocated),
  },
  {
    name: 'hami_node_gpu_overview',
    help: 'GPU overview on a certain node',
    labels: ['node', 'device_uuid', 'device_index', 'device_cores', 'device_memory_limit', 'device_type'],
    sample: report.overview,
  },
  {
    name: 'hami_node_gpu_memory_allocated_ratio',
    help: 'GPU Memory Allocated Percentage on a certain GPU',
    labels: ['node', 'device_uuid', 'device_index'],
    sample: report.memoryRatio,
  },
  // Legacy names: raw core units rather than ratios, as HAMi's legacy collector reports them.
  {
    name: 'GPUDeviceMemoryLimit',
    legacy: true,
    help: 'Device memory limit for a certain GPU',
    labels: ['nodeid', 'deviceuuid', 'deviceidx', 'devicetype'],
    sample: report.memoryLimit,
  },
  {
    name: 'GPUDeviceCoreLimit',
    legacy: true,
    help: 'Device memory core limit for a certain GPU',
    labels: ['nodeid', 'deviceuuid', 'deviceidx', 'devicetype'],
    sample: (gpu) => always(gpuLabels(gpu), gpu.cores),
  },
  {
    name: 'GPUDeviceMemoryAllocated',
    legacy: true,
    help: 'Device memory allocated for a certain GPU',
    labels: ['nodeid', 'deviceuuid', 'deviceidx', 'devicecores', 'devicetype'],
    sample: report.memoryAllocated,
  },
  {
    name: 'GPUDeviceSharedNum',
    legacy: true,
    help: 'Number of containers sharing this GPU',
    labels: ['nodeid', 'deviceuuid', 'deviceidx', 'devicetype'],
    sample: report.shared,
  },
  {
    name: 'GPUDeviceCoreAllocated',
    legacy: true,
    help: 'Device core allocated for a certain GPU',
    labels: ['nodeid', 'deviceuuid', 'deviceidx', 'devicetype'],
    sample: (gpu) => always(gpuLabels(gpu), gpu.usedCores),
  },
  {
    name: 'nodeGPUOverview',
    legacy: true,
    help: 'GPU overview on a certain node',
    labels: ['nodeid', 'deviceuuid', 'deviceidx', 'devicecores', 'devicememorylimit', 'devicetype'],
    sample: report.overview,
  },
  {
    name: 'nodeGPUMemoryPercentage',
    legacy: true,
    help: 'GPU Memory Allocated Percentage on a certain GPU',
    labels: ['nodeid', 'deviceuuid', 'deviceidx'],
    sample: report.memoryRatio,
  },
];
