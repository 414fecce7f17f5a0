/**
 * The node registration HAMi's NVIDIA device plugin v2.8+ writes (wire contract §4.2), from the
 * contract and sharing no code with src/: `hami.io/node-nvidia-register` as a JSON array, one entry
 * per GPU in field order, every field `omitempty` (so `index: 0`, `numa: 0` and `health: false` are
 * left out), via a plain merge patch without resourceVersion. v2.10 writes no node handshake.
 */
import { PatchStrategy, setHeaderOptions, type CoreV1Api } from '@kubernetes/client-node';
import { NODE_REGISTER } from './wire.js';

export interface MockGpu {
  uuid: string;
  /** Replicas per GPU (HAMi's deviceSplitCount, 10 in the chart). */
  count: number;
  memoryMiB: number;
  /** 100 × deviceCoreScaling. */
  cores: number;
  model: string;
  numa?: number;
  healthy: boolean;
}

/** `count` mock GPUs for `node`, as NVIDIA's mock NVML would list them (UUIDs stable per node). */
export function mockGpus(
  node: string,
  count: number,
  options: { memoryMiB?: number; split?: number; model?: string } = {},
): MockGpu[] {
  return Array.from({ length: count }, (_, index) => ({
    uuid: `GPU-${node}-${index}`,
    count: options.split ?? 10,
    memoryMiB: options.memoryMiB ?? 24576,
    cores: 100,
    model: options.model ?? 'NVIDIA-A10',
    healthy: true,
  }));
}

/** The annotation value, in HAMi's field order with its omitempty rules. */
export function encodeNodeRegister(gpus: readonly MockGpu[]): string {
  return JSON.stringify(
    gpus.map((gpu, index) => ({
      id: gpu.uuid,
      ...(index === 0 ? {} : { index }),
      count: gpu.count,
      devmem: gpu.memoryMiB,
      devcore: gpu.cores,
      type: gpu.model,
      ...(gpu.numa === undefined || gpu.numa === 0 ? {} : { numa: gpu.numa }),
      mode: 'hami-core',
      ...(gpu.healthy ? { health: true } : {}),
    })),
  );
}

/** Writes the registration as HAMi's plugin does: merge patch, no resourceVersion. */
export async function registerNode(core: CoreV1Api, node: string, gpus: readonly MockGpu[]): Promise<void> {
  await core.patchNode(
    { name: node, body: { metadata: { annotations: { [NODE_REGISTER]: encodeNodeRegister(gpus) } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}
