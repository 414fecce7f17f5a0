import { GPU_ALLOCATABLE_RESOURCE } from '../hami/wire.js';
/**
 * Is a node's HAMi device plugin alive? Pure: the state store feeds it the node's fields, what it
 * remembers of the node, and the time.
 *
 * HAMi v2.10's scheduler (pkg/device/devices.go CheckHealth and the NVIDIA wrapper around it, run by
 * the leader's register loop every 15 s) decides it from two signals:
 * - `status.allocatable["nvidia.com/gpu"]`, which kubelet publishes from the plugin's ListAndWatch and
 *   zeroes when the plugin's endpoint goes away. Above zero the plugin is alive; a count that drops
 *   to zero makes the node unhealthy at once.
 * - the handshake annotation `hami.io/node-handshake`. HAMi's scheduler writes
 *   `Requesting_<YYYY-MM-DD HH:MM:SS>` (its local time) whenever the value does not contain
 *   `Requesting`; plugins up to v2.7 overwrite it with `Reported <Go time.String()>` every 30 s, v2.8
 *   and later never write it. A `Requesting_` stamp is healthy for 60 s after it, and after that only
 *   while allocatable is above zero.
 * So for the plugins vgpu-warden supports (v2.9+) allocatable is the signal, and the handshake only
 * gives a node whose plugin has not reported yet HAMi's 60 s of grace.
 *
 * Where this differs from HAMi, on purpose:
 * - HAMi cleans a dead node up (deletes the handshake), then on its next pass writes a fresh
 *   `Requesting_` and treats the node as healthy again for 60 s: a dead node flaps back in for a
 *   minute every few passes. Here a node that has reported once gets no handshake grace again until
 *   it reports.
 * - An unparseable `Requesting_` stamp is healthy in HAMi; here it gives no grace (it only matters
 *   while allocatable is zero).
 */

/** HAMi's window: a `Requesting_` stamp counts as fresh this long (devices.go, `time.Second * 60`). */
export const HANDSHAKE_WINDOW_MS = 60_000;

export type Handshake =
  | { kind: 'absent' }
  /** Written by HAMi's scheduler; `at` undefined when the stamp does not parse. */
  | { kind: 'requesting'; at: Date | undefined }
  /** Written by plugins up to v2.7 (Go's time.String(), the plugin's clock). */
  | { kind: 'reported'; at: Date | undefined }
  | { kind: 'other' };

/** `Requesting_2026-08-21 06:20:39`: Go's time.DateTime layout, read in this process's local time as HAMi does. */
const REQUESTING = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/;
/** `Reported 2024-01-23 04:30:04.434037031 +0000 UTC m=+1104711.777756895`. */
const REPORTED = /^Reported (\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(\.\d+)? ([+-])(\d{2})(\d{2})\b/;

export function parseHandshake(value: string | undefined): Handshake {
  if (value === undefined || value === '') return { kind: 'absent' };
  // HAMi tests `strings.Contains(handshake, "Requesting")`, then takes what follows the first `_`.
  if (value.includes('Requesting')) {
    const underscore = value.indexOf('_');
    const match = underscore < 0 ? null : REQUESTING.exec(value.slice(underscore + 1));
    if (match === null) return { kind: 'requesting', at: undefined };
    const [year, month, day, hour, minute, second] = match.slice(1).map(Number) as [
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    const at = new Date(year, month - 1, day, hour, minute, second);
    // Date rolls 2026-02-31 over into March; Go's parser refuses it.
    return { kind: 'requesting', at: at.getDate() === day && at.getMonth() === month - 1 ? at : undefined };
  }
  const reported = REPORTED.exec(value);
  if (reported !== null) {
    const [, date, time, fraction, sign, hours, minutes] = reported;
    const at = new Date(
      `${date ?? ''}T${time ?? ''}${(fraction ?? '').slice(0, 4)}${sign ?? '+'}${hours ?? '00'}:${minutes ?? '00'}`,
    );
    return { kind: 'reported', at: Number.isNaN(at.getTime()) ? undefined : at };
  }
  return value.startsWith('Reported') ? { kind: 'reported', at: undefined } : { kind: 'other' };
}

/**
 * `status.allocatable["nvidia.com/gpu"]` as a count: undefined when absent, 0 when it is not a
 * plain non-negative integer (an extended resource always is; anything else is no report).
 */
export function allocatableGpus(allocatable: Record<string, string> | undefined): number | undefined {
  const text = allocatable?.[GPU_ALLOCATABLE_RESOURCE];
  if (text === undefined) return undefined;
  return /^\d{1,9}$/.test(text) ? Number(text) : 0;
}

export interface LivenessInput {
  /** allocatableGpus() of the node. */
  allocatable: number | undefined;
  /** The raw `hami.io/node-handshake` value. */
  handshake: string | undefined;
  /** Shares the inventory registers on healthy GPUs (Σ count), when the node has an inventory. */
  registeredShares: number | undefined;
  /** Has this process seen the node's allocatable above zero before (HAMi's ReportedGPUNum)? */
  reportedBefore: boolean;
  /** When this process first saw the node not reporting, if it is not reporting now. */
  notReportingSince: number | undefined;
  now: number;
}

export type GpuLiveness =
  | {
      ready: true;
      via: 'allocatable' | 'handshake';
      /** Worth knowing, not a reason to refuse the node (e.g. allocatable and inventory disagree). */
      note?: string;
      /** When this verdict expires without any change to the node (the end of a handshake grace). */
      validUntil?: number;
    }
  | { ready: false; reason: string; since: Date | undefined };

const iso = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

/** Go's time.DateTime layout in this process's local time, as HAMi's scheduler writes the stamp. */
export function requestingStamp(at: Date): string {
  const pad = (value: number): string => String(value).padStart(2, '0');
  const date = `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}`;
  return `Requesting_${date} ${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`;
}

export function gpuLiveness(input: LivenessInput): GpuLiveness {
  const { allocatable, now } = input;
  if (allocatable !== undefined && allocatable > 0) {
    // HAMi treats a changed count as "healthy, refresh the inventory", never as a reason to refuse:
    // kube-scheduler (or, with ignoredByScheduler, kubelet) checks the count itself.
    const note =
      input.registeredShares !== undefined && input.registeredShares !== allocatable
        ? `${GPU_ALLOCATABLE_RESOURCE} allocatable ${allocatable} differs from the ` +
          `${input.registeredShares} shares hami.io/node-nvidia-register lists`
        : undefined;
    return { ready: true, via: 'allocatable', ...(note === undefined ? {} : { note }) };
  }
  const handshake = parseHandshake(input.handshake);
  const stampAt =
    handshake.kind === 'requesting' || handshake.kind === 'reported' ? handshake.at?.getTime() : undefined;
  if (!input.reportedBefore && stampAt !== undefined && now < stampAt + HANDSHAKE_WINDOW_MS) {
    return { ready: true, via: 'handshake', validUntil: stampAt + HANDSHAKE_WINDOW_MS };
  }
  const count =
    allocatable === undefined
      ? `no status.allocatable["${GPU_ALLOCATABLE_RESOURCE}"]`
      : `status.allocatable["${GPU_ALLOCATABLE_RESOURCE}"] is 0`;
  const shake = handshakeText(handshake.kind, stampAt);
  const since = input.notReportingSince;
  const when = since === undefined ? '' : ` since ${iso(since)}`;
  const how = input.reportedBefore ? 'stopped reporting' : 'not reporting';
  return {
    ready: false,
    reason: `device plugin ${how}${when} (${count}, ${shake})`,
    since: since === undefined ? undefined : new Date(since),
  };
}

/** What the handshake says, for a not-ready reason. */
function handshakeText(kind: Handshake['kind'], stampAt: number | undefined): string {
  if (kind === 'absent') return 'no handshake';
  if (kind === 'requesting')
    return stampAt === undefined
      ? 'handshake request with an unreadable stamp'
      : `handshake requested at ${iso(stampAt)} and not answered within ${HANDSHAKE_WINDOW_MS / 1000}s`;
  if (kind === 'reported')
    return stampAt === undefined
      ? 'handshake reported at an unreadable time'
      : `last handshake reported at ${iso(stampAt)}`;
  return 'handshake not in a form HAMi writes';
}
