/**
 * Codec for the pod annotations that carry the scheduler's GPU choice to HAMi's device plugin and
 * back into accounting (hami-wire-contract.md §4.6). Pure; decoding never throws.
 *
 * Wire form: each device `<uuid>,<type>,<mem MiB>,<cores>:`; each container its devices followed by
 * `;` (a GPU-less container is a bare `;`); init containers first, then app containers.
 */
export const TO_ALLOCATE_ANNOTATION = 'hami.io/vgpu-devices-to-allocate';
export const ALLOCATED_ANNOTATION = 'hami.io/vgpu-devices-allocated';

/** The device-type word HAMi's NVIDIA backend writes and its plugin searches for. */
export const NVIDIA_DEVICE_TYPE = 'NVIDIA';

export interface AllocatedDevice {
  uuid: string;
  /** Always `NVIDIA` when we write. */
  type: string;
  memoryMiB: number;
  cores: number;
}

/** One entry per container, init containers first; GPU-less containers are []. */
export type PodAllocation = AllocatedDevice[][];

export const MISSING_FIELDS_ERROR = 'pod annotation format error, missing fields, do not use nodeName in task spec';

export function encodeAllocation(allocation: PodAllocation): string {
  return allocation
    .map((container) => `${container.map((device) => `${device.uuid},${device.type},${device.memoryMiB},${device.cores}:`).join('')};`)
    .join('');
}

const INT32 = /^[+-]?\d+$/;
const INT32_MAX = 2 ** 31 - 1;

/**
 * HAMi's int32 field rule, plus non-negative: a negative memory or core value would shrink the
 * node's accounted usage, so we refuse it where HAMi would accept it.
 */
function usageField(text: string): number | undefined {
  if (!INT32.test(text)) return undefined;
  const value = Number(text);
  return value >= 0 && value <= INT32_MAX ? value : undefined;
}

function decodeContainer(segment: string, position: number): AllocatedDevice[] | { error: string } {
  const devices: AllocatedDevice[] = [];
  for (const piece of segment.split(':')) {
    // HAMi skips pieces without a comma (the empty tail after the last ':').
    if (!piece.includes(',')) continue;
    const fields = piece.split(',');
    if (fields.length < 4) return { error: MISSING_FIELDS_ERROR };
    // Extra fields are ignored, as HAMi does.
    const [uuid = '', type = '', memoryText = '', coresText = ''] = fields;
    const memoryMiB = usageField(memoryText);
    const cores = usageField(coresText);
    if (memoryMiB === undefined || cores === undefined) {
      return { error: `container ${position}: device ${uuid} has memory "${memoryText}" and cores "${coresText}"; both must be non-negative int32` };
    }
    devices.push({ uuid, type, memoryMiB, cores });
  }
  return devices;
}

/**
 * Splitting on `;` leaves one empty entry after the terminating `;`. HAMi keeps it (so each plugin
 * rewrite grows by one `;`); we drop exactly that final empty entry so the result has one element
 * per container. Every other empty entry is kept: its index is a container position.
 */
export function decodeAllocation(text: string): PodAllocation | { error: string } {
  const segments = text.split(';');
  if (segments.at(-1) === '') segments.pop();
  const allocation: PodAllocation = [];
  for (const [position, segment] of segments.entries()) {
    const devices = decodeContainer(segment, position);
    if (!Array.isArray(devices)) return devices;
    allocation.push(devices);
  }
  return allocation;
}

export function isDecodeError(value: PodAllocation | { error: string }): value is { error: string } {
  return !Array.isArray(value);
}
