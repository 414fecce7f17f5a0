import type { V1Node } from '@kubernetes/client-node';

export interface SimulatedGpuNodeSpec {
  name: string;
  gpus: number;
  cpu?: string;
  memory?: string;
  pods?: number;
  labels?: Record<string, string>;
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
    metadata: { name: spec.name, labels: { 'kubernetes.io/hostname': spec.name, gpu: 'on', ...spec.labels } },
    status: {
      capacity: resources,
      allocatable: resources,
      conditions: [
        { type: 'Ready', status: 'True', reason: 'SimulatedKubelet', message: 'simulated by vgpu-warden', lastHeartbeatTime: now, lastTransitionTime: now },
      ],
    },
  };
}
