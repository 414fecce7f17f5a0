import type { GpuDevice } from './inventory.js';
import { memoryOnGpu, type ContainerGpuRequest } from './requests.js';
import type { GpuUse } from './usage.js';
import {
  USE_GPU_UUID_ANNOTATION,
  NOUSE_GPU_UUID_ANNOTATION,
  USE_GPU_TYPE_ANNOTATION,
  NOUSE_GPU_TYPE_ANNOTATION,
  VGPU_MODE_ANNOTATION,
} from '../hami/wire.js';

/**
 * Whether one GPU can take one share of one container request, and if not the HAMi reason name
 * (hami-wire-contract.md §4.4, hami-core mode; pkg/device/nvidia/device.go Fit). Pure.
 *
 * `CardMigModeUnsupported` is ours: HAMi slices MIG GPUs by profile, which we do not model, so a
 * GPU the plugin registered in MIG mode is named as such rather than passed off as a type mismatch.
 */
export const FIT_REASONS = [
  'CardNotHealth',
  'CardCordoned',
  'CardTypeMismatch',
  'CardUuidMismatch',
  'CardMigModeUnsupported',
  'CardTimeSlicingExhausted',
  'CardInsufficientMemory',
  'CardInsufficientCore',
  'ExclusiveDeviceAllocateConflict',
  'CardComputeUnitsExhausted',
] as const;
export type CardReason = (typeof FIT_REASONS)[number];

/**
 * The pod's placement constraints, read once per fit. Empty sets and lists mean "no constraint".
 * A pod's annotations may hold thousands of entries and a filter checks every GPU of every node:
 * UUIDs are looked up in sets, and the type verdict is computed once per GPU model.
 */
export interface CardFilters {
  useUuids: ReadonlySet<string>;
  nouseUuids: ReadonlySet<string>;
  useTypes: readonly string[];
  nouseTypes: readonly string[];
  /** `nvidia.com/vgpu-mode`: the GPU's mode must be a substring of it. */
  mode: string | undefined;
  /** GPU model and mode → whether use-gputype, nouse-gputype and vgpu-mode allow them. */
  modelVerdicts: Map<string, boolean>;
}

// Entries are trimmed and blanks dropped: in HAMi a blank entry (`"A100,"`) is a substring of every
// model and so would match every GPU, which nobody means.
function list(value: string | undefined, normalise: (entry: string) => string = (entry) => entry): string[] {
  if (value === undefined) return [];
  return value
    .split(',')
    .map((entry) => normalise(entry.trim()))
    .filter((entry) => entry !== '');
}

export function cardFilters(annotations: Readonly<Record<string, string>>): CardFilters {
  const upper = (entry: string): string => entry.toUpperCase();
  return {
    useUuids: new Set(list(annotations[USE_GPU_UUID_ANNOTATION])),
    nouseUuids: new Set(list(annotations[NOUSE_GPU_UUID_ANNOTATION])),
    useTypes: list(annotations[USE_GPU_TYPE_ANNOTATION], upper),
    nouseTypes: list(annotations[NOUSE_GPU_TYPE_ANNOTATION], upper),
    mode: annotations[VGPU_MODE_ANNOTATION],
    modelVerdicts: new Map(),
  };
}

export const MIG_MODE = 'mig';

function typeAllowed(device: GpuDevice, filters: CardFilters): boolean {
  const key = `${device.type}\u0000${device.mode}`;
  let allowed = filters.modelVerdicts.get(key);
  if (allowed === undefined) {
    const model = device.type.toUpperCase();
    allowed =
      (filters.useTypes.length === 0 || filters.useTypes.some((type) => model.includes(type))) &&
      !filters.nouseTypes.some((type) => model.includes(type)) &&
      (filters.mode === undefined || filters.mode.includes(device.mode));
    filters.modelVerdicts.set(key, allowed);
  }
  return allowed;
}

function uuidAllowed(device: GpuDevice, filters: CardFilters): boolean {
  if (filters.useUuids.size > 0 && !filters.useUuids.has(device.uuid)) return false;
  return !filters.nouseUuids.has(device.uuid);
}

/**
 * The first check the GPU fails, in HAMi's order, or undefined when it can take the share.
 * `exclusive` is the `mutex` GPU policy: a GPU anyone uses is refused with
 * ExclusiveDeviceAllocateConflict, right after the slot check as in HAMi's Fit (`isMutex && dev.Used > 0`).
 */
export function checkCard(
  device: GpuDevice,
  use: GpuUse,
  request: ContainerGpuRequest,
  filters: CardFilters,
  exclusive = false,
): CardReason | undefined {
  if (!device.healthy) return 'CardNotHealth';
  if (device.cordoned) return 'CardCordoned';
  if (!typeAllowed(device, filters)) return 'CardTypeMismatch';
  if (!uuidAllowed(device, filters)) return 'CardUuidMismatch';
  // MIG GPUs are sliced by profile, which we do not model: never place shares on them.
  if (device.mode === MIG_MODE) return 'CardMigModeUnsupported';
  if (device.count <= use.slots) return 'CardTimeSlicingExhausted';
  if (exclusive && use.slots > 0) return 'ExclusiveDeviceAllocateConflict';
  const memoryMiB = memoryOnGpu(request, device.memoryMiB);
  // A share of 0 MiB (a percentage of a card reporting almost no memory) would reach HAMi-core as
  // "no limit", and the allocation codec refuses it: such a card cannot take the share.
  if (memoryMiB < 1 || device.memoryMiB - use.memoryMiB < memoryMiB) return 'CardInsufficientMemory';
  if (device.cores - use.cores < request.cores) return 'CardInsufficientCore';
  // cores=100 asks for the whole card, which any existing share contradicts.
  if (device.cores === 100 && request.cores === 100 && use.slots > 0) return 'ExclusiveDeviceAllocateConflict';
  // A cores=0 share on a card whose SMs are all promised would get no compute at all.
  if (device.cores !== 0 && use.cores >= device.cores && request.cores === 0) return 'CardComputeUnitsExhausted';
  return undefined;
}
