import type { V1Node } from '@kubernetes/client-node';
import { encodeNodeInventory, NODE_REGISTER_ANNOTATION, type GpuDevice } from '../devices/inventory.js';

export interface SimulatedGpuNodeSpec {
  name: string;
  gpus: number;
  cpu?: string;
  memory?: string;
  pods?: number;
  labels?: Record<string, string>;
  /** Write HAMi's device-plugin inventory annotation as a registered plugin would (default true). */
  register?: boolean;
  gpuMemoryMiB?: number;
  gpuType?: string;
  /** Tasks per GPU (HAMi's deviceSplitCount). */
  splitCount?: number;
}

/** The GPUs of a simulated node: stable UUIDs derived from the node name. */
export function simulatedGpus(spec: SimulatedGpuNodeSpec): GpuDevice[] {
  return Array.from({ length: spec.gpus }, (_, index) => ({
    uuid: `GPU-${spec.name}-${index}`,
    index,
    count: spec.splitCount ?? 10,
    memoryMiB: spec.gpuMemoryMiB ?? 24576,
    cores: 100,
    type: spec.gpuType ?? 'NVIDIA-A10',
    numa: 0,
    mode: 'hami-core',
    healthy: true,
    cordoned: false,
  }));
}

/**
 * A kubelet-less Node that the scheduler accepts: status is set in the create call (the only time
 * the main resource takes it), `pods` is allocatable (missing means zero pods fit), Ready is true
 * for realism, and `nvidia.com/gpu` is advertised like HAMi's device plugin does.
 */
export function simulatedGpuNode(spec: SimulatedGpuNodeSpec): V1Node {
  const resources = {
    cpu: spec.cpu ?? '32',
    memory: spec.memory ?? '256Gi',
    pods: String(spec.pods ?? 110),
    'nvidia.com/gpu': String(spec.gpus),
  };
  const now = new Date();
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: spec.name,
      labels: { 'kubernetes.io/hostname': spec.name, gpu: 'on', ...spec.labels },
      ...(spec.register === false ? {} : { annotations: { [NODE_REGISTER_ANNOTATION]: encodeNodeInventory(simulatedGpus(spec)) } }),
    },
    status: {
      capacity: resources,
      allocatable: resources,
      conditions: [
        { type: 'Ready', status: 'True', reason: 'SimulatedKubelet', message: 'simulated by vgpu-warden', lastHeartbeatTime: now, lastTransitionTime: now },
      ],
    },
  };
}
