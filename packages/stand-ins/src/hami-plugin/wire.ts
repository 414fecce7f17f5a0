/**
 * The names HAMi's NVIDIA device plugin reads and writes, copied from the wire contract
 * (../shared/reference/hami-wire-contract.md §1.1, §4.6, §5), never from src/: this stand-in must not
 * share a single constant with the code it checks, or a typo would be symmetric and invisible.
 */

/** Node annotation naming the pod being allocated: `<RFC3339>,<ns>,<name>` (legacy: bare `<RFC3339>`). */
export const NODE_LOCK = 'hami.io/mutex.lock';

/** Pod annotation the plugin consumes container by container. */
export const DEVICES_TO_ALLOCATE = 'hami.io/vgpu-devices-to-allocate';

/** Pod annotation with the whole allocation, kept as the scheduler wrote it (what each container must get). */
export const DEVICES_ALLOCATED = 'hami.io/vgpu-devices-allocated';

/** Pod annotation the scheduler sets to `allocating` and the plugin to `success` or `failed`. */
export const BIND_PHASE = 'hami.io/bind-phase';
export const BIND_PHASE_ALLOCATING = 'allocating';
export const BIND_PHASE_SUCCESS = 'success';
export const BIND_PHASE_FAILED = 'failed';

/** Pod annotations the fallback pod lookup checks (§5 GetPendingPod step 2). */
export const BIND_TIME = 'hami.io/bind-time';
export const VGPU_NODE = 'hami.io/vgpu-node';

/** Node inventory the plugin registers (§4.2); read here only to advertise replica IDs to kubelet. */
export const NODE_REGISTER = 'hami.io/node-nvidia-register';

/** The NVIDIA backend's common word: the device `Type` in pod annotations. */
export const NVIDIA = 'NVIDIA';

/**
 * Vendor words the plugin searches the remaining to-allocate string for to decide "more containers
 * to come" (§5 step 5). Only backends initialised in the plugin count; an NVIDIA node has NVIDIA.
 */
export const DEFAULT_VENDOR_WORDS: readonly string[] = [NVIDIA];

/** Container separator and device terminator of the device strings (§4.6). */
export const CONTAINER_SEPARATOR = ';';
export const DEVICE_TERMINATOR = ':';

/**
 * The container resources HAMi's NVIDIA backend reads (wire contract §4.1, chart defaults). The
 * stand-in reads them only for HAMi #3075's check of the allocation against the container's limits.
 */
export const RESOURCE_COUNT = 'nvidia.com/gpu';
export const RESOURCE_MEMORY = 'nvidia.com/gpumem';
export const RESOURCE_MEMORY_PERCENTAGE = 'nvidia.com/gpumem-percentage';
export const RESOURCE_CORES = 'nvidia.com/gpucores';
