/**
 * The GPU environment HAMi's device plugin gives a container (wire contract §5), read back from what
 * the container printed (`env | sort`): the evidence that kubelet passed the plugin's Allocate answer
 * on to that container. Pure.
 */
const ENV_PATTERN = /^(NVIDIA_VISIBLE_DEVICES|CUDA_DEVICE_MEMORY_LIMIT_\d+|CUDA_DEVICE_SM_LIMIT)=(.*)$/;

/** The GPU variables a container printed at start, from its log. */
export function gpuEnvironment(log: string): Record<string, string> {
  const found: Record<string, string> = {};
  for (const line of log.split('\n')) {
    const match = ENV_PATTERN.exec(line.trim());
    if (match?.[1] !== undefined) found[match[1]] = match[2] ?? '';
  }
  return found;
}

/** What a container given `devices` must have printed (one container's segment of the allocation). */
export function expectedGpuEnvironment(
  devices: readonly { uuid: string; usedMem: number; usedCores: number }[],
): Record<string, string> {
  return {
    NVIDIA_VISIBLE_DEVICES: devices.map((device) => device.uuid).join(','),
    ...Object.fromEntries(devices.map((device, index) => [`CUDA_DEVICE_MEMORY_LIMIT_${index}`, `${device.usedMem}m`])),
    CUDA_DEVICE_SM_LIMIT: String(devices[0]?.usedCores ?? ''),
  };
}
