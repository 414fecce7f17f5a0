/**
 * HAMi's node lock as its device plugin sees it (wire contract §1.1, §1.5): parsing the value and
 * ReleaseNodeLock with the owner check on. The plugin never takes a lock; it only reads it to find
 * the pod being allocated and deletes it when that pod's allocation is over.
 */
import type { PluginApi } from './plugin-api.js';
import { NODE_LOCK } from './wire.js';

export type HamiLockValue =
  | { format: 'legacy'; raw: string; time: Date }
  | { format: 'current'; raw: string; time: Date; namespace: string; name: string };

export class LockParseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LockParseError';
  }
}

export class NodeLockReleaseError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NodeLockReleaseError';
  }
}

const GO_RFC3339 = '2006-01-02T15:04:05Z07:00';
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|([+-])(\d{2}):(\d{2}))$/;

/** Go's time.Parse(time.RFC3339, text); the error names the layout as Go's does. */
export function parseGoRfc3339(text: string): Date {
  const match = RFC3339.exec(text);
  const fail = () => new LockParseError(`parsing time "${text}" as "${GO_RFC3339}": cannot parse "${text}" as RFC3339`);
  if (!match) throw fail();
  const [, year, month, day, hour, minute, second, fraction = '', , sign, offsetHours = '0', offsetMinutes = '0'] =
    match;
  const [y, mo, d, h, mi, s] = [year, month, day, hour, minute, second].map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const daysInMonth = new Date(Date.UTC(y, mo, 0)).getUTCDate();
  if (
    mo < 1 ||
    mo > 12 ||
    d < 1 ||
    d > daysInMonth ||
    h > 23 ||
    mi > 59 ||
    s > 59 ||
    Number(offsetHours) > 23 ||
    Number(offsetMinutes) > 59
  )
    throw fail();
  const offsetMs =
    sign === undefined ? 0 : (sign === '-' ? -1 : 1) * (Number(offsetHours) * 60 + Number(offsetMinutes)) * 60_000;
  const millis = fraction === '' ? 0 : Math.floor(Number(`0${fraction}`) * 1000);
  return new Date(Date.UTC(y, mo - 1, d, h, mi, s, millis) - offsetMs);
}

/** ParseNodeLock: no `,` is the legacy bare timestamp; otherwise exactly 3 parts, the first a time. */
export function parseNodeLock(raw: string): HamiLockValue {
  if (!raw.includes(',')) return { format: 'legacy', raw, time: parseGoRfc3339(raw) };
  const parts = raw.split(',');
  if (parts.length !== 3)
    throw new LockParseError(`malformed lock annotation: expected 3 parts, got ${parts.length} from ${raw}`);
  const [time = '', namespace = '', name = ''] = parts;
  return { format: 'current', raw, time: parseGoRfc3339(time), namespace, name };
}

/**
 * HAMi's ownership test: the value has a `,` and ends with `,<ns>,<name>`. A suffix match, so a
 * re-stamped lock of the same name counts as owned; names only, so any incarnation of that name does.
 */
export function isLockOwnedBy(value: string, pod: { namespace: string; name: string }): boolean {
  return value.includes(',') && value.endsWith(`,${pod.namespace},${pod.name}`);
}

export type ReleaseOutcome = 'released' | 'not-locked' | 'not-owner' | 'replaced';

export interface ReleaseTiming {
  sleep: (ms: number) => Promise<void>;
  /** For the retry jitter; [0, 1). */
  random: () => number;
}

// client-go's DefaultRetry as HAMi configures it (§1.3): 5 steps, 100 ms doubling, jitter 0.5.
const RETRY_STEPS = 5;
const RETRY_BASE_MS = 100;
const RETRY_JITTER = 0.5;

/**
 * ReleaseNodeLock(node, pod, skipOwnerCheck) (§1.5). The first read's errors are returned as they
 * are; a current-format lock of another pod is kept silently; a legacy one is released by anyone.
 * Then up to 5 attempts (every error retried), each re-reading the node and deleting with its
 * resourceVersion, but only while the value is still the one it may delete.
 */
export async function releaseNodeLock(
  api: PluginApi,
  node: string,
  pod: { namespace: string; name: string },
  options: { skipOwnerCheck?: boolean } & ReleaseTiming,
): Promise<ReleaseOutcome> {
  const first = (await api.readNode(node)).metadata?.annotations?.[NODE_LOCK];
  if (first === undefined) return 'not-locked';
  const legacy = (value: string) => !value.includes(',');
  if (options.skipOwnerCheck !== true && !legacy(first) && !isLockOwnedBy(first, pod)) return 'not-owner';
  let lastError: unknown;
  for (let attempt = 0; attempt < RETRY_STEPS; attempt++) {
    if (attempt > 0) await options.sleep(RETRY_BASE_MS * 2 ** (attempt - 1) * (1 + RETRY_JITTER * options.random()));
    try {
      const current = await api.readNode(node);
      const value = current.metadata?.annotations?.[NODE_LOCK];
      if (value === undefined) return 'not-locked';
      if (options.skipOwnerCheck === true || legacy(value)) {
        if (value !== first) return 'replaced';
      } else if (!isLockOwnedBy(value, pod)) {
        return 'not-owner';
      }
      await api.patchNodeLock(node, current.metadata?.resourceVersion ?? '', null);
      return 'released';
    } catch (error) {
      lastError = error;
    }
  }
  throw new NodeLockReleaseError(
    `failed to release node lock (node=${node}, retry strategy={Duration:100ms Factor:2 Jitter:0.5 Steps:5 Cap:0s}): ` +
      (lastError instanceof Error ? lastError.message : String(lastError)),
    { cause: lastError },
  );
}
