/**
 * HAMi v2.10's wire contract in one place: every annotation, label and resource name a HAMi device
 * plugin, monitor or scheduler reads or writes (../reference/hami-wire-contract.md), and the few of
 * our own that live under HAMi's prefixes. Nothing here imports anything: every layer may use it.
 */

/** The prefixes of HAMi's own keys and of NVIDIA's resource and card-choice names. */
export const HAMI_PREFIX = 'hami.io/';
export const NVIDIA_PREFIX = 'nvidia.com/';

/** The node lock: `<RFC3339 time>,<namespace>,<pod>` on the node. */
export const NODE_LOCK_ANNOTATION = 'hami.io/mutex.lock';

/** The node inventory the device plugin registers (JSON; the legacy `:` form is also read). */
export const NODE_REGISTER_ANNOTATION = 'hami.io/node-nvidia-register';
/** The device plugin's heartbeat on the node (`Requesting_…` / `Reported …` / `Deleted_…`). */
export const NODE_HANDSHAKE_ANNOTATION = 'hami.io/node-handshake';
/** GPUs an operator closed to new allocations, kept for accounting. */
export const DEVICE_CORDON_ANNOTATION = 'hami.io/device-cordon';
/** Link scores between the node's GPUs, which the `topology-aware` GPU policy reads. */
export const NODE_SCORE_ANNOTATION = 'hami.io/node-nvidia-score';

/** The node the scheduler chose (annotation, set before the Binding exists; also a label). */
export const VGPU_NODE_ANNOTATION = 'hami.io/vgpu-node';
/** When the scheduler chose the devices (Unix seconds). */
export const VGPU_TIME_ANNOTATION = 'hami.io/vgpu-time';
/** When the bind happened (Unix seconds). */
export const BIND_TIME_ANNOTATION = 'hami.io/bind-time';
/** allocating (bound, waiting for Allocate), success or failed. */
export const BIND_PHASE_ANNOTATION = 'hami.io/bind-phase';
/** The devices the device plugin still has to hand out, one segment per container. */
export const TO_ALLOCATE_ANNOTATION = 'hami.io/vgpu-devices-to-allocate';
/** The devices chosen for the pod: type `NVIDIA`, one `;`-terminated segment per container, init containers first. */
export const ALLOCATED_ANNOTATION = 'hami.io/vgpu-devices-allocated';

/** Pod-level policy overrides. */
export const GPU_POLICY_ANNOTATION = 'hami.io/gpu-scheduler-policy';
export const NODE_POLICY_ANNOTATION = 'hami.io/node-scheduler-policy';
export const DEVICE_SCORING_WEIGHTS_ANNOTATION = 'hami.io/device-scoring-weights';

/** Pod-level card choices. */
export const USE_GPU_UUID_ANNOTATION = 'nvidia.com/use-gpuuuid';
export const NOUSE_GPU_UUID_ANNOTATION = 'nvidia.com/nouse-gpuuuid';
export const USE_GPU_TYPE_ANNOTATION = 'nvidia.com/use-gputype';
export const NOUSE_GPU_TYPE_ANNOTATION = 'nvidia.com/nouse-gputype';
export const VGPU_MODE_ANNOTATION = 'nvidia.com/vgpu-mode';
/** All of a container's GPUs on one NUMA node. */
export const NUMA_BIND_ANNOTATION = 'nvidia.com/numa-bind';

/** Container resources (limits or requests). */
export const GPU_COUNT = 'nvidia.com/gpu';
export const GPU_MEMORY = 'nvidia.com/gpumem';
export const GPU_MEMORY_PERCENTAGE = 'nvidia.com/gpumem-percentage';
export const GPU_CORES = 'nvidia.com/gpucores';
export const GPU_PRIORITY = 'nvidia.com/priority';
/** The device plugin's extended resource: kubelet's count of the shares the plugin advertises. */
export const GPU_ALLOCATABLE_RESOURCE = GPU_COUNT;
/** Every resource the extender manages (kube-scheduler's `managedResources`). */
export const GPU_MANAGED_RESOURCES = [GPU_COUNT, GPU_MEMORY, GPU_MEMORY_PERCENTAGE, GPU_CORES, GPU_PRIORITY] as const;

/**
 * Ours, written on an unbound pod to make kube-scheduler look at it again. Under hami.io/vgpu-*, which
 * the in-apiserver policies already reserve for vgpu-warden's identity, so tenants cannot write it and
 * no new permission is needed. HAMi components do not read it.
 */
export const REQUEUE_ANNOTATION = 'hami.io/vgpu-warden-requeue';

/** HAMi's GPUCoreUtilizationPolicy values (devices.nvidia.gpuCorePolicy); `default` writes nothing. */
export const GPU_CORE_POLICIES = ['default', 'force', 'disable'] as const;

export type GpuCorePolicy = (typeof GPU_CORE_POLICIES)[number];

/** Annotations only the scheduler writes; a pod arriving with them could steer the device plugin (HAMi #3041). */
export function isSchedulerOwnedAnnotation(key: string): boolean {
  return key.startsWith('hami.io/vgpu-') || key.startsWith('hami.io/bind-') || key === NODE_LOCK_ANNOTATION;
}
