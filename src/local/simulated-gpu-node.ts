import type { V1Node } from '@kubernetes/client-node';
import { encodeLinkScores, encodeNodeInventory, type GpuDevice } from '../devices/inventory.js';
import { GPU_ALLOCATABLE_RESOURCE, NODE_REGISTER_ANNOTATION, NODE_SCORE_ANNOTATION } from '../hami/wire.js';

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
  /** NUMA nodes the GPUs are spread over in index order, e.g. 2 → GPUs 0-1 on 0, 2-3 on 1 (default 1). */
  numaNodes?: number;
  /** Link score between GPUs by index: written as hami.io/node-nvidia-score when given. */
  linkScore?: (a: number, b: number) => number;
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
    numa: Math.floor((index * (spec.numaNodes ?? 1)) / spec.gpus),
    mode: 'hami-core',
    healthy: true,
    cordoned: false,
  }));
}

/** The register annotation (and the link scores, when the spec has them) of a simulated node. */
export function simulatedGpuAnnotations(spec: SimulatedGpuNodeSpec): Record<string, string> {
  const gpus = simulatedGpus(spec);
  const annotations = { [NODE_REGISTER_ANNOTATION]: encodeNodeInventory(gpus) };
  const { linkScore } = spec;
  if (linkScore === undefined) return annotations;
  const scores = new Map(
    gpus.map((a) => [a.uuid, new Map(gpus.filter((b) => b !== a).map((b) => [b.uuid, linkScore(a.index, b.index)]))]),
  );
  return { ...annotations, [NODE_SCORE_ANNOTATION]: encodeLinkScores(scores) };
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
    [GPU_ALLOCATABLE_RESOURCE]: String(spec.gpus),
  };
  const now = new Date();
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: spec.name,
      labels: { 'kubernetes.io/hostname': spec.name, gpu: 'on', ...spec.labels },
      ...(spec.register === false ? {} : { annotations: simulatedGpuAnnotations(spec) }),
    },
    status: {
      capacity: resources,
      allocatable: resources,
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          reason: 'SimulatedKubelet',
          message: 'simulated by vgpu-warden',
          lastHeartbeatTime: now,
          lastTransitionTime: now,
        },
      ],
    },
  };
}
