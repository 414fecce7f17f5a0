import { fuzz, type Fuzz } from './fuzz.js';

/**
 * Valid and near-valid node-lock values for property tests, written from the wire contract and Go's
 * time.Parse, not from src/ (which they check).
 */

/** Characters a mutation of a timestamp draws from: its own alphabet plus the usual suspects. */
export const TIME_ALPHABET = '0123456789-:T.Z+tz ,';
/** Characters a mutation of a lock value draws from. */
export const LOCK_ALPHABET = `${TIME_ALPHABET}abcxyzABC_./\u00e9\u0000`;

const pad = (value: number, width: number): string => String(value).padStart(width, '0');

/** A timestamp Go's time.Parse(time.RFC3339) accepts, with the edge cases drawn often. */
export function validTime(f: Fuzz): string {
  // Years 0000-0099 (once misread as 19xx), the century leap rule (1900, 2000, 2100) and the bounds.
  const year = f.pick([0, 1, 99, 100, 1900, 1901, 1970, 2000, 2024, 2026, 2099, 2100, 9999, f.int(9999)]);
  // Bounds are drawn often, so that one step of a mutation crosses them.
  const month = f.pick([1, 2, 12, 1 + f.int(11)]);
  const day = f.pick([1, 28, 1 + f.int(27)]);
  const hour = f.pick([0, 9, 23, f.int(23)]);
  // Go's "15" is an unpadded hour: one digit is accepted.
  const hourText = hour < 10 && f.random() < 0.2 ? String(hour) : pad(hour, 2);
  const fraction =
    f.random() < 0.3 ? `${f.pick(['.', '.', ','])}${String(f.int(999_999_999)).padStart(1 + f.int(14), '0')}` : '';
  const zone =
    f.random() < 0.5 ? 'Z' : `${f.pick(['+', '-'])}${pad(f.int(24), 2)}:${pad(f.pick([0, 30, 45, 59, 60]), 2)}`;
  const sixty = (): string => pad(f.pick([0, 59, f.int(59)]), 2);
  return `${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}T${hourText}:${sixty()}:${sixty()}${fraction}${zone}`;
}

/** A DNS-1123 label (a namespace). */
export function validNamespace(f: Fuzz): string {
  return f.pick(['default', 'kube-system', 'a', `t-${'x'.repeat(f.int(58))}`, 'team-7']);
}

/** A DNS-1123 subdomain (a pod name). */
export function validPodName(f: Fuzz): string {
  return f.pick(['pod-a', 'trainer-0', 'a.b-c', '0', `job-${'y'.repeat(f.int(240))}`, 'web.default.svc']);
}

export function validLockValue(f: Fuzz): string {
  return f.random() < 0.2 ? validTime(f) : `${validTime(f)},${validNamespace(f)},${validPodName(f)}`;
}

/**
 * The strings test/unit/lock/go-rfc3339.test.ts asks Go about: valid timestamps, near misses made
 * by mutating them, and fixed edge cases. ASCII only (Go's JSON decoder rewrites invalid UTF-16).
 */
export function rfc3339Candidates(seed: number, count: number): string[] {
  const f = fuzz(seed);
  const fixed = [
    '2026-08-01t06:00:00Z',
    '2026-08-01T06:00:00z',
    '0001-01-01T00:00:00Z',
    '0000-02-29T00:00:00Z',
    '2026-02-29T00:00:00Z',
    '2026-08-01T06:00:00.1234567891Z',
    '2026-08-01T24:00:00Z',
    '2026-08-01T23:59:60Z',
    '2026-08-01T06:00:00+24:00',
    '2026-08-01T06:00:00+23:60',
    '2026-08-01T06:00:00+25:00',
    '2026-08-01T06:00:00+23:61',
    '2026-08-01T6:00:00Z',
    '9999-12-31T23:59:59-24:00',
    '1900-02-29T00:00:00Z',
    '2000-02-29T00:00:00Z',
    '2100-02-29T00:00:00Z',
    '2026-08-01T06:00:00.Z',
    '2026-08-01T06:00:00,5Z',
    ' 2026-08-01T06:00:00Z',
    '2026-08-01T06:00:00Z ',
  ];
  const generated = Array.from({ length: count }, () =>
    f.random() < 0.3 ? validTime(f) : f.mutate(validTime(f), TIME_ALPHABET),
  );
  return [...fixed, ...generated];
}
