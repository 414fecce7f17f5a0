/**
 * Codec for the pod annotations that carry the scheduler's GPU choice to HAMi's device plugin and
 * back into accounting (hami-wire-contract.md §4.6). Pure; decoding never throws.
 *
 * Wire form: each device `<uuid>,NVIDIA,<mem MiB>,<cores>:`; each container its devices followed by
 * `;` (a GPU-less container is a bare `;`); init containers first, then app containers.
 *
 * Two readings. `hami` (the default) reads what HAMi v2.10's DecodePodDevices/DecodeContainerDevices
 * (pkg/device/devices.go) read, because its device plugin allocates whatever they read, and what
 * we count must be what the plugin hands out:
 * - the value is split on `;` and every piece is a container, so a last container without its `;`
 *   is still a container (`container-terminator`);
 * - a container is split on `:` and every piece with a `,` is a device, so a last device without
 *   its `:` is still a device (`device-terminator`), and pieces without a `,` (stray text, the
 *   empty piece of `::`) are skipped (`skipped-piece`; HAMi after v2.10 refuses them, #2765);
 * - a device needs at least 4 fields (fewer: HAMi's "missing fields" error); fields after the
 *   fourth are ignored (`extra-fields`);
 * - memory and cores must parse as strconv.ParseInt(s, 10, 32) does: optional sign, ASCII digits,
 *   int32 range; anything else is HAMi's error too.
 * Each leniency used is named in `oddities`, so callers can warn. `strict` refuses all four: it is
 * exactly what our encoder writes.
 * Both readings refuse, where HAMi v2.10 does not, values we could not count safely; the caller
 * then falls back (see PodUsageIndex):
 * - the type is `NVIDIA`: this annotation is the NVIDIA backend's (other vendors have their own),
 *   and HAMi's plugin finds its work by searching for that word, so any other type is a foreign or
 *   corrupted value, never usage we could place against our GPUs;
 * - the UUID is non-empty printable ASCII (usage is keyed by it; HAMi after v2.10 also refuses an
 *   empty one);
 * - memory is 1..2^31-1 MiB (0 would mean "no limit" to HAMi-core, a negative value would shrink
 *   the node's accounted usage), cores 0..100.
 * Kept from HAMi in both: the extra `;` the plugin's rewrite of to-allocate leaves (`;;` after
 * consuming one container's devices), read as one more GPU-less container.
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
    .map(
      (container) =>
        `${container.map((device) => `${device.uuid},${device.type},${device.memoryMiB},${device.cores}:`).join('')};`,
    )
    .join('');
}

// At most this much of the annotation is echoed in an error: an annotation can be 256 KiB.
const quote = (text: string): string => quoted(text, LABEL_CHARS);

// The syntax of Go's strconv.ParseInt(s, 10, 32), what HAMi's decoder calls; the range is checked on the value.
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

/** How a value is read: as HAMi v2.10 reads it (the default), or as our encoder writes it. */
export type AllocationReading = 'hami' | 'strict';

/** A leniency of HAMi's reading that a value needed (each refused by the strict reading). */
export type AllocationOddityKind = 'container-terminator' | 'device-terminator' | 'extra-fields' | 'skipped-piece';

export interface AllocationOddity {
  kind: AllocationOddityKind;
  container: number;
  device?: number;
  /** Where and what, for a log line: bounded, hostile text only through quoted(). */
  note: string;
}

export interface DecodedAllocation {
  containers: PodAllocation;
  /** The first use of each leniency, in reading order: at most one per kind, so bounded. */
  oddities: AllocationOddity[];
}

class OddityList {
  readonly found: AllocationOddity[] = [];
  private readonly kinds = new Set<AllocationOddityKind>();

  add(oddity: AllocationOddity): void {
    if (this.kinds.has(oddity.kind)) return;
    this.kinds.add(oddity.kind);
    this.found.push(oddity);
  }
}

function decodeDevice(
  piece: string,
  container: number,
  device: number,
  reading: AllocationReading,
  oddities: OddityList,
): AllocatedDevice | AllocationDecodeError {
  const where = `container ${container}, device ${device}`;
  const fail = (field: AllocationField, problem: string): AllocationDecodeError => ({
    error: `${where}: ${problem}`,
    container,
    device,
    field,
  });
  const fields = piece.split(',');
  if (fields.length < 4) return fail('fields', `${MISSING_FIELDS_ERROR} (${quote(piece)})`);
  if (fields.length > 4) {
    if (reading === 'strict') return fail('fields', `${quote(piece)} has ${fields.length} fields, expected 4`);
    oddities.add({
      kind: 'extra-fields',
      container,
      device,
      note: `${where}: ${fields.length - 4} field(s) after the fourth ignored`,
    });
  }
  const [uuid = '', type = '', memoryText = '', coresText = ''] = fields;
  if (!isDeviceUuid(uuid)) return fail('uuid', `uuid ${quote(uuid)} is empty or not printable ASCII`);
  if (type !== NVIDIA_DEVICE_TYPE)
    return fail('type', `type ${quote(type)} of ${quote(uuid)} is not ${NVIDIA_DEVICE_TYPE}`);
  const memoryMiB = integerIn(memoryText, 1, INT32_MAX);
  if (memoryMiB === undefined)
    return fail('memory', `memory ${quote(memoryText)} of ${quote(uuid)} is not an integer MiB in 1..${INT32_MAX}`);
  const cores = integerIn(coresText, 0, MAX_CORES);
  if (cores === undefined)
    return fail('cores', `cores ${quote(coresText)} of ${quote(uuid)} is not an integer in 0..${MAX_CORES}`);
  return { uuid, type, memoryMiB, cores };
}

/**
 * One container's devices: `(<device>:)*`, the `;` already taken off. HAMi: split on `:`, keep the
 * pieces with a `,`. `device` counts pieces, so an error names the piece it is about.
 */
function decodeContainer(
  segment: string,
  container: number,
  reading: AllocationReading,
  oddities: OddityList,
): AllocatedDevice[] | AllocationDecodeError {
  const pieces = segment.split(':');
  // The text after the last ':' is empty when every device ends with ':'.
  const tail = pieces.pop() ?? '';
  if (tail !== '') {
    if (reading === 'strict')
      return {
        error: `container ${container}, device ${pieces.length}: ${quote(tail)} does not end with ":"`,
        container,
        device: pieces.length,
        field: 'terminator',
      };
    // HAMi reads the text after the last ':' like any other piece (without a ',' it is skipped below).
    if (tail.includes(','))
      oddities.add({
        kind: 'device-terminator',
        container,
        device: pieces.length,
        note: `container ${container}, device ${pieces.length}: no ":" after the last device`,
      });
    pieces.push(tail);
  }
  const devices: AllocatedDevice[] = [];
  for (const [position, piece] of pieces.entries()) {
    if (!piece.includes(',')) {
      if (reading === 'strict')
        return {
          error:
            `container ${container}, device ${position}: ${quote(piece)} is not a device ` +
            `"<uuid>,NVIDIA,<memory MiB>,<cores>"`,
          container,
          device: position,
          field: 'fields',
        };
      oddities.add({
        kind: 'skipped-piece',
        container,
        device: position,
        note:
          `container ${container}, device ${position}: ` +
          `${piece === '' ? 'an empty piece' : `${quote(piece)} (no ",")`} skipped`,
      });
      continue;
    }
    const device = decodeDevice(piece, container, position, reading, oddities);
    if ('error' in device) return device;
    devices.push(device);
  }
  return devices;
}

/**
 * Splitting on `;` leaves one empty entry after the terminating `;`. HAMi keeps it (so each plugin
 * rewrite grows by one `;`); we drop exactly that final empty entry so the result has one element
 * per container. Every other empty entry is kept: its index is a container position. A value whose
 * last container lacks its `;` is read as HAMi reads it (that piece is a container too), or
 * refused by the strict reading (a truncated write).
 */
export function readAllocation(
  text: string,
  reading: AllocationReading = 'hami',
): DecodedAllocation | AllocationDecodeError {
  const oddities = new OddityList();
  const segments = text.split(';');
  const last = segments.pop() ?? '';
  if (last !== '') {
    if (reading === 'strict')
      return {
        error: `container ${segments.length}: ${quote(last)} does not end with ";"`,
        container: segments.length,
        field: 'terminator',
      };
    oddities.add({
      kind: 'container-terminator',
      container: segments.length,
      note: `container ${segments.length}: no ";" after the last container`,
    });
    segments.push(last);
  }
  const containers: PodAllocation = [];
  for (const [position, segment] of segments.entries()) {
    const devices = decodeContainer(segment, position, reading, oddities);
    if (!Array.isArray(devices)) return devices;
    containers.push(devices);
  }
  return { containers, oddities: oddities.found };
}

/** readAllocation without the oddities: one array entry per container, init containers first. */
export function decodeAllocation(
  text: string,
  reading: AllocationReading = 'hami',
): PodAllocation | AllocationDecodeError {
  const decoded = readAllocation(text, reading);
  return 'error' in decoded ? decoded : decoded.containers;
}

/** "container 0, device 1: no ":" after the last device; ...": bounded (at most one note per kind). */
export function describeOddities(oddities: readonly AllocationOddity[]): string {
  return oddities.map((oddity) => oddity.note).join('; ');
}

export function isDecodeError(value: PodAllocation | AllocationDecodeError): value is AllocationDecodeError {
  return !Array.isArray(value);
}
