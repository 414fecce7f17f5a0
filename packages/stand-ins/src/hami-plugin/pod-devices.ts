/**
 * HAMi's codec for `hami.io/vgpu-devices-to-allocate`, as its device plugin runs it (wire contract
 * §4.6 "Decoding", §5 Allocate steps 2-4), quirks kept:
 * - the value is split on `;` and every piece is kept, empty ones included: piece i is container i
 *   (init containers first), and the terminating `;` leaves one extra empty piece at the end;
 * - a piece is split on `:`; sub-pieces without a `,` are skipped (the empty tail after the last `:`);
 * - fewer than 4 fields is an error; fields 3 and 4 must parse as int32; extra fields are ignored;
 * - re-encoding writes every piece followed by `;`, so each rewrite grows the value by one `;`
 *   (`GPU-a,NVIDIA,1000,0:;` → `;;`).
 * Pure: throws PodDevicesFormatError on input HAMi refuses.
 */
import { CONTAINER_SEPARATOR, DEVICE_TERMINATOR, NVIDIA } from './wire.js';

export interface HamiDevice {
  uuid: string;
  /** The backend word; only `NVIDIA` entries are NVIDIA devices. */
  type: string;
  /** MiB. */
  usedMem: number;
  /** Percent of one GPU. */
  usedCores: number;
}

/** One entry per `;`-separated piece, the empty trailing piece included. */
export type PodDeviceEntries = HamiDevice[][];

export class PodDevicesFormatError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PodDevicesFormatError';
  }
}

/** HAMi's text for a device with fewer than 4 fields (§4.6). */
export const MISSING_FIELDS = 'pod annotation format error, missing fields, do not use nodeName in task spec';

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

/** Go's strconv.ParseInt(text, 10, 32): optional sign, decimal digits, within int32. */
function parseInt32(text: string): number {
  if (!/^[+-]?\d+$/.test(text)) throw new PodDevicesFormatError(`strconv.ParseInt: parsing "${text}": invalid syntax`);
  const value = Number(text);
  if (value < INT32_MIN || value > INT32_MAX)
    throw new PodDevicesFormatError(`strconv.ParseInt: parsing "${text}": value out of range`);
  return value;
}

export function decodeContainerDevices(piece: string): HamiDevice[] {
  const devices: HamiDevice[] = [];
  for (const part of piece.split(DEVICE_TERMINATOR)) {
    if (!part.includes(',')) continue;
    const fields = part.split(',');
    if (fields.length < 4) throw new PodDevicesFormatError(MISSING_FIELDS);
    const [uuid = '', type = '', mem = '', cores = ''] = fields;
    devices.push({ uuid, type, usedMem: parseInt32(mem), usedCores: parseInt32(cores) });
  }
  return devices;
}

export function decodePodDevices(value: string): PodDeviceEntries {
  return value.split(CONTAINER_SEPARATOR).map(decodeContainerDevices);
}

export function encodePodDevices(entries: PodDeviceEntries): string {
  const encodeDevice = (device: HamiDevice) =>
    `${device.uuid},${device.type},${device.usedMem},${device.usedCores}${DEVICE_TERMINATOR}`;
  return entries.map((devices) => `${devices.map(encodeDevice).join('')}${CONTAINER_SEPARATOR}`).join('');
}

export interface NextDeviceRequest {
  /** Position of the piece: the container index, init containers first. */
  index: number;
  /** The piece's devices of the wanted type. */
  devices: HamiDevice[];
}

/**
 * GetNextDeviceRequest: the first non-empty piece and its devices of `type`. A piece holding only
 * other backends' devices still counts as "next" (and then has no devices of `type`).
 */
export function nextDeviceRequest(entries: PodDeviceEntries, type: string = NVIDIA): NextDeviceRequest | undefined {
  const index = entries.findIndex((devices) => devices.length > 0);
  const piece = entries[index];
  if (piece === undefined) return undefined;
  return { index, devices: piece.filter((device) => device.type === type) };
}

/**
 * EraseNextDeviceTypeFromAnnotation: drops the devices of `type` from the first piece holding one,
 * keeping the piece (now possibly empty) and every other device in place.
 */
export function eraseNextDeviceRequest(entries: PodDeviceEntries, type: string = NVIDIA): PodDeviceEntries {
  let erased = false;
  return entries.map((devices) => {
    if (erased || !devices.some((device) => device.type === type)) return devices;
    erased = true;
    return devices.filter((device) => device.type !== type);
  });
}
