/**
 * Codec for HAMi's node lock annotation `hami.io/mutex.lock`. Pure; never throws on input: a value
 * it cannot read comes back as `{ kind: 'malformed' }` with the reason.
 *
 * Formats (HAMi v2.10): `<RFC3339>,<namespace>,<pod>` (since v2.4) and the legacy bare `<RFC3339>`.
 *
 * Where we read a value differently from HAMi's parser (`pkg/util/nodelock`), on purpose, each with
 * a test in test/unit/lock/lock-value.test.ts ("divergences from HAMi"):
 * - The owner must be a possible pod: namespace a DNS-1123 label (≤ 63), name a DNS-1123 subdomain
 *   (≤ 253). HAMi takes any text, including empty fields (`<time>,,`), and then looks the pod up;
 *   an owner no pod can have is `malformed` here, so the lock is freed at once and no API call is
 *   ever made with it (a 250,000-character name once broke the owner lookup on every pass).
 * - Times keep millisecond precision; Go keeps nanoseconds. Lock decisions are in seconds.
 * Everything else about the time is Go's `time.Parse(time.RFC3339, …)`, including its leniencies:
 * a one-digit hour, a `,` before the fraction, offsets up to ±24:60, year 0000.
 */
import { isDnsLabel, isDnsSubdomain } from '../base/k8s-names.js';
import { quoted } from '../base/user-text.js';

export interface PodRef {
  namespace: string;
  name: string;
}

export type LockValue =
  | { kind: 'owned'; raw: string; time: Date; owner: PodRef }
  | { kind: 'legacy'; raw: string; time: Date }
  | { kind: 'malformed'; raw: string; problem: string };

// Go's layout "2006-01-02T15:04:05Z07:00" as time.Parse reads it (its fast path, then the general
// parser for what the fast path refuses): "15" is a non-padded hour (1 or 2 digits), every other
// field is fixed width; `T` and `Z` are upper case only; a fraction of any length after `.` or `,`
// is accepted even though the layout has none. Nothing may precede or follow.
const GO_RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{1,2}):(\d{2}):(\d{2})(?:[.,](\d+))?(?:Z|([+-])(\d{2}):(\d{2}))$/;

/** Go's daysIn: proleptic Gregorian, so year 0000 is a leap year as in Go. */
function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** At most this much of a lock value is echoed in a message: anyone who can patch a node writes it. */
const ECHO_LIMIT = 80;

/** `text` quoted for a message, cut to a readable length (values on nodes can be megabytes long). */
export function quoteForMessage(text: string): string {
  return quoted(text, ECHO_LIMIT);
}

/**
 * Parses a timestamp exactly as Go's `time.Parse(time.RFC3339, text)` accepts it, or returns why
 * not. Ranges as Go checks them: month 1-12, day within the month, hour 0-23, minute and second
 * 0-59 (no leap second), offset hour 0-24 and offset minute 0-60 (Go allows 24 and 60 on purpose).
 */
export function parseRfc3339(text: string): Date | string {
  const match = GO_RFC3339.exec(text);
  if (!match) return `${quoteForMessage(text)} is not an RFC3339 time`;
  const [, year, month, day, hour, minute, second, fraction, sign, offsetHours, offsetMinutes] = match;
  const [y, mo, d, h, mi, s] = [year, month, day, hour, minute, second].map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) || h > 23 || mi > 59 || s > 59)
    return `${quoteForMessage(text)} has a date or time field out of range`;
  const [oh, om] = [Number(offsetHours ?? 0), Number(offsetMinutes ?? 0)];
  if (oh > 24 || om > 60) return `${quoteForMessage(text)} has an out-of-range UTC offset`;
  const offsetMs = (sign === '-' ? -1 : 1) * (oh * 60 + om) * 60_000;
  // Truncated like Go truncates to nanoseconds; only the first three digits can matter here.
  const millis = fraction === undefined ? 0 : Number(fraction.slice(0, 3).padEnd(3, '0'));
  // Date.UTC maps years 0-99 to 1900-1999; setUTCFullYear does not.
  const time = new Date(0);
  time.setUTCFullYear(y, mo - 1, d);
  time.setUTCHours(h, mi, s, millis);
  return new Date(time.getTime() - offsetMs);
}

/** Why `pod` cannot name a pod (apimachinery's rules), or undefined when it can. */
export function podRefProblem(pod: PodRef): string | undefined {
  const { namespace, name } = pod;
  if (!isDnsLabel(namespace))
    return `namespace ${quoteForMessage(namespace)} is not a DNS-1123 label of at most 63 characters`;
  if (!isDnsSubdomain(name))
    return `pod name ${quoteForMessage(name)} is not a DNS-1123 subdomain of at most 253 characters`;
  return undefined;
}

export function parseLockValue(raw: string): LockValue {
  if (!raw.includes(',')) {
    const time = parseRfc3339(raw);
    return typeof time === 'string' ? { kind: 'malformed', raw, problem: time } : { kind: 'legacy', raw, time };
  }
  const parts = raw.split(',');
  if (parts.length !== 3)
    return { kind: 'malformed', raw, problem: `expected 3 comma-separated parts, got ${parts.length}` };
  const [timeText = '', namespace = '', name = ''] = parts;
  const time = parseRfc3339(timeText);
  if (typeof time === 'string') return { kind: 'malformed', raw, problem: time };
  const owner = { namespace, name };
  const problem = podRefProblem(owner);
  if (problem !== undefined) return { kind: 'malformed', raw, problem: `names no possible pod: ${problem}` };
  return { kind: 'owned', raw, time, owner };
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
