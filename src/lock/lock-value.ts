/**
 * Codec for HAMi's node lock annotation `hami.io/mutex.lock`. Pure; never throws on input: a value
 * it cannot read comes back as `{ kind: 'malformed' }` with the reason.
 *
 * Formats (HAMi v2.10): `<RFC3339>,<namespace>,<pod>` (since v2.4) and the legacy bare `<RFC3339>`.
 */
export const NODE_LOCK_ANNOTATION = 'hami.io/mutex.lock';

export interface PodRef {
  namespace: string;
  name: string;
}

export type LockValue =
  | { kind: 'owned'; raw: string; time: Date; owner: PodRef }
  | { kind: 'legacy'; raw: string; time: Date }
  | { kind: 'malformed'; raw: string; problem: string };

// Go's time.RFC3339 as time.Parse accepts it: optional fractional seconds, Z or ±hh:mm.
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|([+-])(\d{2}):(\d{2}))$/;

/** Parses an RFC3339 timestamp, or returns a reason it is not one. */
export function parseRfc3339(text: string): Date | string {
  const match = RFC3339.exec(text);
  if (!match) return `"${text}" is not an RFC3339 time`;
  const [, year, month, day, hour, minute, second, fraction, , sign, offsetHours, offsetMinutes] = match;
  const fields = [year, month, day, hour, minute, second].map(Number) as [number, number, number, number, number, number];
  const [y, mo, d, h, mi, s] = fields;
  const daysInMonth = new Date(Date.UTC(y, mo, 0)).getUTCDate();
  if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth || h > 23 || mi > 59 || s > 59) return `"${text}" has a date or time field out of range`;
  const offsetSign = sign === '-' ? -1 : 1;
  const offsetMs = sign === undefined ? 0 : offsetSign * (Number(offsetHours) * 60 + Number(offsetMinutes)) * 60_000;
  if (sign !== undefined && (Number(offsetHours) > 23 || Number(offsetMinutes) > 59)) return `"${text}" has an out-of-range UTC offset`;
  const millis = fraction === undefined ? 0 : Math.floor(Number(`0${fraction}`) * 1000);
  return new Date(Date.UTC(y, mo - 1, d, h, mi, s, millis) - offsetMs);
}

// Kubernetes object names and namespaces never contain commas or whitespace; anything else in
// those fields means the value was not written by a HAMi component.
const OBJECT_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

export function parseLockValue(raw: string): LockValue {
  if (!raw.includes(',')) {
    const time = parseRfc3339(raw);
    return typeof time === 'string' ? { kind: 'malformed', raw, problem: time } : { kind: 'legacy', raw, time };
  }
  const parts = raw.split(',');
  if (parts.length !== 3) return { kind: 'malformed', raw, problem: `expected 3 comma-separated parts, got ${parts.length}` };
  const [timeText = '', namespace = '', name = ''] = parts;
  const time = parseRfc3339(timeText);
  if (typeof time === 'string') return { kind: 'malformed', raw, problem: time };
  if (!OBJECT_NAME.test(namespace) || !OBJECT_NAME.test(name)) {
    return { kind: 'malformed', raw, problem: `"${namespace}/${name}" is not a pod namespace and name` };
  }
  return { kind: 'owned', raw, time, owner: { namespace, name } };
}

/** Go's RFC3339 in UTC: second precision with `Z`, which every HAMi version parses. */
export function formatRfc3339(time: Date): string {
  return time.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function formatLockValue(time: Date, owner: PodRef): string {
  return `${formatRfc3339(time)},${owner.namespace},${owner.name}`;
}

/** Exact match on namespace and name (HAMi #1433: a substring match let `abc` release `abc-123`'s lock). */
export function isOwnedBy(value: LockValue, pod: PodRef): boolean {
  return value.kind === 'owned' && value.owner.namespace === pod.namespace && value.owner.name === pod.name;
}

export function podKey(pod: PodRef): string {
  return `${pod.namespace}/${pod.name}`;
}
