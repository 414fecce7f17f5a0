/**
 * Codec for the node inventory HAMi's NVIDIA device plugin writes (hami-wire-contract.md §4.2).
 * Pure; never throws: what it cannot read is dropped and named in `problems`.
 *
 * Formats:
 * - v2.8+: JSON array of `{id,index,count,devmem,devcore,type,numa,mode,migProfiles,health}` with
 *   `omitempty` on every field, so a missing `index`/`numa` means 0 and a missing `health` means
 *   **false** (an unhealthy GPU), not "unknown".
 * - ≤ v2.7 (legacy): each device `id,count,devmem,devcore,type,numa,health[,index,mode]` followed by `:`.
 *
 * Link topology comes from a second annotation, `hami.io/node-nvidia-score`, which the plugin writes
 * only with ENABLE_TOPOLOGY_SCORE=true: `[{"uuid":"GPU-a","score":{"GPU-b":100}}]`, a higher score
 * a better link (pkg/device/devices.go DecodePairScores; pkg/device/nvidia/device.go GetNodeDevices).
 */
import { LABEL_CHARS, quoted } from '../base/user-text.js';
import { isDeviceUuid } from './allocation-codec.js';
import { NODE_REGISTER_ANNOTATION, DEVICE_CORDON_ANNOTATION, NODE_SCORE_ANNOTATION } from '../hami/wire.js';
import { isRecord } from '../base/json.js';

/** Every node annotation the inventory is read from: a change to any of them calls for a re-parse. */
export const INVENTORY_ANNOTATIONS: readonly string[] = [
  NODE_REGISTER_ANNOTATION,
  DEVICE_CORDON_ANNOTATION,
  NODE_SCORE_ANNOTATION,
];

/** GPU UUID → peer UUID → link score (higher is better); a pair not listed scores 0, as in HAMi. */
export type LinkScores = ReadonlyMap<string, ReadonlyMap<string, number>>;

export interface GpuDevice {
  uuid: string;
  index: number;
  /** Split count: how many containers may share the GPU. */
  count: number;
  memoryMiB: number;
  /** 100 × core scaling. */
  cores: number;
  /** Model name, e.g. `NVIDIA-Tesla V100-PCIE-32GB`. */
  type: string;
  numa: number;
  /** `hami-core` | `mig` | `mps` (empty when the plugin wrote none). */
  mode: string;
  healthy: boolean;
  /** Named in the node's `hami.io/device-cordon`: kept for accounting, closed to new allocations. */
  cordoned: boolean;
}

export interface NodeInventory {
  /** Every readable device, unhealthy and cordoned ones included (fit skips those with a reason). */
  devices: GpuDevice[];
  /** Human-readable notes: missing annotation, dropped entries, unhealthy or cordoned GPUs. */
  problems: string[];
  /** From hami.io/node-nvidia-score; absent when the node has none (or none we could read). */
  linkScores?: LinkScores;
}

type Parsed = { device: Omit<GpuDevice, 'cordoned'> } | { problem: string };

const INT32_MAX = 2 ** 31 - 1;

function isInt32(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value <= INT32_MAX && value >= -INT32_MAX - 1;
}

function isInt32AtLeast(value: unknown, min: number): boolean {
  return isInt32(value) && value >= min;
}

/** A GPU we could place a share on but not name in hami.io/vgpu-devices-allocated is no use. */
function badId(label: string, id: string): string {
  return (
    `${label} has an id that cannot be written in an allocation ` +
    `(printable ASCII without , : ;): ${quoted(id, LABEL_CHARS)}`
  );
}

type IntegerField = 'index' | 'count' | 'devmem' | 'devcore' | 'numa';
// NUMA may legitimately be -1 (unknown) on some hosts; the rest are counts and sizes.
const INTEGER_FIELDS: readonly (readonly [IntegerField, number])[] = [
  ['index', 0],
  ['count', 0],
  ['devmem', 0],
  ['devcore', 0],
  ['numa', -1],
];

/** One JSON entry; absent fields take Go's zero value, present ones must have the right type. */
function parseJsonEntry(entry: unknown, position: number): Parsed {
  const label = `device #${position}`;
  if (!isRecord(entry)) return { problem: `${label} is not an object` };
  if (typeof entry.id !== 'string' || entry.id.trim() === '') return { problem: `${label} has no id` };
  if (!isDeviceUuid(entry.id)) return { problem: badId(label, entry.id) };
  const uuid = entry.id;
  const invalid = INTEGER_FIELDS.find(([key, min]) => !isInt32AtLeast(entry[key] ?? 0, min));
  if (invalid)
    return { problem: `${label} (${uuid}) has an invalid ${invalid[0]}: ${JSON.stringify(entry[invalid[0]])}` };
  // Validated just above; absent means Go's zero value.
  const integer = (key: IntegerField): number => (entry[key] ?? 0) as number;
  const type = entry.type ?? '';
  const mode = entry.mode ?? '';
  if (typeof type !== 'string' || typeof mode !== 'string')
    return { problem: `${label} (${uuid}) has a non-string type or mode` };
  const health = entry.health ?? false;
  if (typeof health !== 'boolean')
    return { problem: `${label} (${uuid}) has an invalid health: ${JSON.stringify(health)}` };
  return {
    device: {
      uuid,
      index: integer('index'),
      count: integer('count'),
      memoryMiB: integer('devmem'),
      cores: integer('devcore'),
      type,
      numa: integer('numa'),
      mode,
      healthy: health,
    },
  };
}

const DECIMAL = /^[+-]?\d+$/;
// Go's strconv.ParseBool.
const GO_TRUE = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const GO_FALSE = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

function legacyInt(text: string, min: number): number | undefined {
  if (!DECIMAL.test(text)) return undefined;
  const value = Number(text);
  return isInt32(value) && value >= min ? value : undefined;
}

/** One legacy `id,count,devmem,devcore,type,numa,health[,index,mode]` entry. */
function parseLegacyEntry(entry: string, position: number): Parsed {
  const label = `device #${position}`;
  const fields = entry.split(',');
  if (fields.length !== 7 && fields.length !== 9)
    return { problem: `${label} has ${fields.length} fields, expected 7 or 9` };
  const [
    uuid = '',
    countText = '',
    memoryText = '',
    coresText = '',
    type = '',
    numaText = '',
    healthText = '',
    indexText = '0',
    mode = 'hami-core',
  ] = fields;
  if (uuid.trim() === '') return { problem: `${label} has no id` };
  if (!isDeviceUuid(uuid)) return { problem: badId(label, uuid) };
  const numbers = legacyNumbers({
    count: countText,
    memoryMiB: memoryText,
    cores: coresText,
    numa: numaText,
    index: indexText,
  });
  if (numbers === undefined) {
    return { problem: `${label} (${uuid}) has a non-integer count, devmem, devcore, numa or index` };
  }
  if (!GO_TRUE.has(healthText) && !GO_FALSE.has(healthText))
    return { problem: `${label} (${uuid}) has an invalid health: ${JSON.stringify(healthText)}` };
  const { count, memoryMiB, cores, numa, index } = numbers;
  return { device: { uuid, index, count, memoryMiB, cores, type, numa, mode, healthy: GO_TRUE.has(healthText) } };
}

/** The least value of each integer field of a legacy entry (numa -1: none). */
const LEGACY_INT_MIN = { count: 0, memoryMiB: 0, cores: 0, numa: -1, index: 0 } as const;

/** The integer fields of a legacy entry, or undefined when one is not an integer in its range. */
function legacyNumbers(
  texts: Record<keyof typeof LEGACY_INT_MIN, string>,
): Record<keyof typeof LEGACY_INT_MIN, number> | undefined {
  const numbers = { count: 0, memoryMiB: 0, cores: 0, numa: 0, index: 0 };
  for (const key of Object.keys(LEGACY_INT_MIN) as (keyof typeof LEGACY_INT_MIN)[]) {
    const value = legacyInt(texts[key], LEGACY_INT_MIN[key]);
    if (value === undefined) return undefined;
    numbers[key] = value;
  }
  return numbers;
}

function parseEntries(raw: string): Parsed[] | string {
  const text = raw.trim();
  if (text.startsWith('[')) {
    let decoded: unknown;
    try {
      decoded = JSON.parse(text);
    } catch (error) {
      return `${NODE_REGISTER_ANNOTATION} is not valid JSON: ${error instanceof Error ? error.message : String(error)}`;
    }
    if (!Array.isArray(decoded)) return `${NODE_REGISTER_ANNOTATION} is not a JSON array`;
    return (decoded as unknown[]).map((entry, position) => parseJsonEntry(entry, position));
  }
  if (!text.includes(':'))
    return `${NODE_REGISTER_ANNOTATION} is neither a JSON array nor the legacy ':'-terminated form`;
  // Like HAMi, pieces without a comma (the empty tail after the last ':') are not devices; any
  // other text there is named, so a damaged value does not pass for a shorter inventory.
  const pieces = text.split(':');
  const stray: Parsed[] = pieces
    .filter((piece) => !piece.includes(',') && piece.trim() !== '')
    .map((piece) => ({ problem: `stray text ${quoted(piece, LABEL_CHARS)} between devices` }));
  return [
    ...pieces.filter((piece) => piece.includes(',')).map((piece, position) => parseLegacyEntry(piece, position)),
    ...stray,
  ];
}

function cordonedIds(annotations: Readonly<Record<string, string>>): Set<string> {
  const value = annotations[DEVICE_CORDON_ANNOTATION] ?? '';
  return new Set(
    value
      .split(',')
      .map((id) => id.trim())
      .filter((id) => id !== ''),
  );
}

function parseScoreEntry(
  entry: unknown,
  position: number,
  problems: string[],
): [string, Map<string, number>] | undefined {
  const label = `${NODE_SCORE_ANNOTATION} entry #${position}`;
  if (!isRecord(entry) || typeof entry.uuid !== 'string' || entry.uuid === '') {
    problems.push(`${label} has no uuid`);
    return undefined;
  }
  const peers = new Map<string, number>();
  // omitempty: a GPU without peers has no "score" key.
  const score = entry.score ?? {};
  if (!isRecord(score)) {
    problems.push(`${label} (${quoted(entry.uuid, LABEL_CHARS)}) has a score that is not an object`);
    return undefined;
  }
  for (const [peer, value] of Object.entries(score)) {
    if (!isInt32(value)) {
      problems.push(
        `${label} (${quoted(entry.uuid, LABEL_CHARS)}) has a non-integer score for ${quoted(peer, LABEL_CHARS)}`,
      );
      return undefined;
    }
    peers.set(peer, value);
  }
  return [entry.uuid, peers];
}

/** hami.io/node-nvidia-score, or undefined (with a problem when present but unreadable). */
export function parseLinkScores(raw: string | undefined, problems: string[]): LinkScores | undefined {
  if (raw === undefined) return undefined;
  let decoded: unknown;
  try {
    decoded = JSON.parse(raw);
  } catch (error) {
    problems.push(
      `${NODE_SCORE_ANNOTATION} is not valid JSON: ${error instanceof Error ? error.message : String(error)}`,
    );
    return undefined;
  }
  if (!Array.isArray(decoded)) {
    problems.push(`${NODE_SCORE_ANNOTATION} is not a JSON array`);
    return undefined;
  }
  const scores = new Map<string, Map<string, number>>();
  for (const [position, entry] of (decoded as unknown[]).entries()) {
    const parsed = parseScoreEntry(entry, position, problems);
    if (parsed !== undefined) scores.set(...parsed);
  }
  return scores;
}

/** The annotation value for `scores`, in HAMi's shape. */
export function encodeLinkScores(scores: LinkScores): string {
  return JSON.stringify([...scores].map(([uuid, peers]) => ({ uuid, score: Object.fromEntries(peers) })));
}

export function parseNodeInventory(annotations: Readonly<Record<string, string>> | undefined): NodeInventory {
  const raw = annotations?.[NODE_REGISTER_ANNOTATION];
  if (annotations === undefined || typeof raw !== 'string') return { devices: [], problems: ['annotation missing'] };
  const entries = parseEntries(raw);
  if (typeof entries === 'string') return { devices: [], problems: [entries] };

  const cordoned = cordonedIds(annotations);
  const devices: GpuDevice[] = [];
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const [position, entry] of entries.entries()) {
    if ('problem' in entry) {
      problems.push(entry.problem);
      continue;
    }
    const { device } = entry;
    // Usage is keyed by UUID, so a repeated id would double the capacity behind one key.
    if (seen.has(device.uuid)) {
      problems.push(`device #${position} repeats id ${device.uuid}`);
      continue;
    }
    seen.add(device.uuid);
    const isCordoned = cordoned.has(device.uuid);
    if (!device.healthy) problems.push(`${device.uuid} unhealthy`);
    if (isCordoned) problems.push(`${device.uuid} cordoned`);
    devices.push({ ...device, cordoned: isCordoned });
  }
  for (const id of cordoned) if (!seen.has(id)) problems.push(`${DEVICE_CORDON_ANNOTATION} names unknown GPU ${id}`);
  if (entries.length === 0) problems.push('no gpu found on node');
  const linkScores = parseLinkScores(annotations[NODE_SCORE_ANNOTATION], problems);
  return linkScores === undefined ? { devices, problems } : { devices, problems, linkScores };
}

// Go's encoding/json escapes these for HTML safety; JSON.stringify does not.
function goJsonString(value: string): string {
  return JSON.stringify(value).replace(
    /[<>&\u2028\u2029]/g,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/**
 * The JSON form byte-for-byte as HAMi v2.10's plugin writes it: field order
 * id,index,count,devmem,devcore,type,numa,mode,health with `omitempty` (zero, empty and false
 * fields left out). `cordoned` is not part of it: cordons live in their own node annotation.
 */
export function encodeNodeInventory(devices: readonly GpuDevice[]): string {
  const encoded = devices.map((device) => {
    const fields: string[] = [];
    const text = (key: string, value: string): void => {
      if (value !== '') fields.push(`"${key}":${goJsonString(value)}`);
    };
    const number = (key: string, value: number): void => {
      if (value !== 0) fields.push(`"${key}":${String(Math.trunc(value))}`);
    };
    text('id', device.uuid);
    number('index', device.index);
    number('count', device.count);
    number('devmem', device.memoryMiB);
    number('devcore', device.cores);
    text('type', device.type);
    number('numa', device.numa);
    text('mode', device.mode);
    if (device.healthy) fields.push('"health":true');
    return `{${fields.join(',')}}`;
  });
  return `[${encoded.join(',')}]`;
}
