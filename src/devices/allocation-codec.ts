/**
 * Codec for the pod annotations that carry the scheduler's GPU choice to HAMi's device plugin and
 * back into accounting (hami-wire-contract.md §4.6). Pure; decoding never throws.
 *
 * Wire form: each device `<uuid>,NVIDIA,<mem MiB>,<cores>:`; each container its devices followed by
 * `;` (a GPU-less container is a bare `;`); init containers first, then app containers.
 *
 * Decoding is strict: exactly what HAMi's NVIDIA backend writes, so accounting never rests on a
 * guess. Where HAMi's decoder is laxer we refuse, and the caller falls back (see PodUsageIndex):
 * - a piece without `,` is refused, not skipped (`garbage:GPU-a,…:;` is not read as `GPU-a,…:;`);
 * - a device has exactly 4 fields (HAMi ignores extras), ends with `:`, and a container with `;`;
 * - the type is `NVIDIA`: this annotation is the NVIDIA backend's (other vendors have their own),
 *   and HAMi's plugin finds its work by searching for that word, so any other type is a foreign or
 *   corrupted value, never usage we could place against our GPUs;
 * - the UUID is non-empty printable ASCII (usage is keyed by it);
 * - memory is 1..2^31-1 MiB (HAMi: any int32; 0 would mean "no limit" to HAMi-core, a negative
 *   value would shrink the node's accounted usage), cores 0..100 (HAMi: any int32).
 * Kept from HAMi: numbers in Go's strconv.Atoi syntax (optional sign), and the extra `;` the
 * plugin's rewrite of to-allocate leaves (`;;` after consuming one container's devices), read as
 * one more GPU-less container.
 */
import { LABEL_CHARS, quoted } from '../base/user-text.js';

/** The device-type word HAMi's NVIDIA backend writes and its plugin searches for. */
export const NVIDIA_DEVICE_TYPE = 'NVIDIA';

export interface AllocatedDevice {
  uuid: string;
  /** Always `NVIDIA`: the decoder refuses anything else. */
  type: string;
  memoryMiB: number;
  cores: number;
}

/** One entry per container, init containers first; GPU-less containers are []. */
export type PodAllocation = AllocatedDevice[][];

export type AllocationField = 'uuid' | 'type' | 'memory' | 'cores' | 'fields' | 'terminator';

/** Why a value cannot be read, and where: container index (and device index within it) and field. */
export interface AllocationDecodeError {
  error: string;
  container: number;
  device?: number;
  field: AllocationField;
}

export const MISSING_FIELDS_ERROR = 'pod annotation format error, missing fields, do not use nodeName in task spec';

export const MAX_CORES = 100;
const INT32_MAX = 2 ** 31 - 1;

export function encodeAllocation(allocation: PodAllocation): string {
  return allocation
    .map((container) => `${container.map((device) => `${device.uuid},${device.type},${device.memoryMiB},${device.cores}:`).join('')};`)
    .join('');
}

// At most this much of the annotation is echoed in an error: an annotation can be 256 KiB.
const quote = (text: string): string => quoted(text, LABEL_CHARS);

// Go's strconv.Atoi syntax; the range is checked on the value.
const ATOI = /^[+-]?\d+$/;
// Printable ASCII without the separators `,` `:` `;`: what the wire form can carry.
const DEVICE_UUID = /^[\x21-\x2b\x2d-\x39\x3c-\x7e]+$/;

/**
 * Can `text` be a GPU's id in this annotation? The inventory parser refuses GPUs whose id cannot,
 * so that what we place we can always read back.
 */
export function isDeviceUuid(text: string): boolean {
  return DEVICE_UUID.test(text);
}

function integerIn(text: string, min: number, max: number): number | undefined {
  if (!ATOI.test(text)) return undefined;
  // `+ 0` turns Atoi's "-0" into 0, not -0.
  const value = Number(text) + 0;
  return value >= min && value <= max ? value : undefined;
}

function decodeDevice(piece: string, container: number, device: number): AllocatedDevice | AllocationDecodeError {
  const where = `container ${container}, device ${device}`;
  const fail = (field: AllocationField, problem: string): AllocationDecodeError => ({ error: `${where}: ${problem}`, container, device, field });
  const fields = piece.split(',');
  if (!piece.includes(',')) return fail('fields', `${quote(piece)} is not a device "<uuid>,NVIDIA,<memory MiB>,<cores>"`);
  if (fields.length < 4) return fail('fields', `${MISSING_FIELDS_ERROR} (${quote(piece)})`);
  if (fields.length > 4) return fail('fields', `${quote(piece)} has ${fields.length} fields, expected 4`);
  const [uuid = '', type = '', memoryText = '', coresText = ''] = fields;
  if (!isDeviceUuid(uuid)) return fail('uuid', `uuid ${quote(uuid)} is empty or not printable ASCII`);
  if (type !== NVIDIA_DEVICE_TYPE) return fail('type', `type ${quote(type)} of ${quote(uuid)} is not ${NVIDIA_DEVICE_TYPE}`);
  const memoryMiB = integerIn(memoryText, 1, INT32_MAX);
  if (memoryMiB === undefined) return fail('memory', `memory ${quote(memoryText)} of ${quote(uuid)} is not an integer MiB in 1..${INT32_MAX}`);
  const cores = integerIn(coresText, 0, MAX_CORES);
  if (cores === undefined) return fail('cores', `cores ${quote(coresText)} of ${quote(uuid)} is not an integer in 0..${MAX_CORES}`);
  return { uuid, type, memoryMiB, cores };
}

/** One container's devices: `(<device>:)*`, the `;` already taken off. */
function decodeContainer(segment: string, container: number): AllocatedDevice[] | AllocationDecodeError {
  const pieces = segment.split(':');
  // Every device ends with ':', so the text after the last ':' must be empty.
  const tail = pieces.pop() ?? '';
  if (tail !== '') {
    return { error: `container ${container}, device ${pieces.length}: ${quote(tail)} does not end with ":"`, container, device: pieces.length, field: 'terminator' };
  }
  const devices: AllocatedDevice[] = [];
  for (const [position, piece] of pieces.entries()) {
    const device = decodeDevice(piece, container, position);
    if ('error' in device) return device;
    devices.push(device);
  }
  return devices;
}

/**
 * Splitting on `;` leaves one empty entry after the terminating `;`. HAMi keeps it (so each plugin
 * rewrite grows by one `;`); we drop exactly that final empty entry so the result has one element
 * per container. Every other empty entry is kept: its index is a container position. A value whose
 * last container lacks its `;` is refused (a truncated write).
 */
export function decodeAllocation(text: string): PodAllocation | AllocationDecodeError {
  const segments = text.split(';');
  const last = segments.pop() ?? '';
  if (last !== '') {
    return { error: `container ${segments.length}: ${quote(last)} does not end with ";"`, container: segments.length, field: 'terminator' };
  }
  const allocation: PodAllocation = [];
  for (const [position, segment] of segments.entries()) {
    const devices = decodeContainer(segment, position);
    if (!Array.isArray(devices)) return devices;
    allocation.push(devices);
  }
  return allocation;
}

export function isDecodeError(value: PodAllocation | AllocationDecodeError): value is AllocationDecodeError {
  return !Array.isArray(value);
}
