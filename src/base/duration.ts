import { WardenError } from './errors.js';

export class DurationFormatError extends WardenError {}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * Parses a Go-style duration ("500ms", "30s", "5m", "1h30m") into milliseconds, the format
 * Kubernetes operators already use for HAMi's NODELOCK_EXPIRE. A bare "0" means zero.
 */
export function parseDuration(text: string): number {
  const trimmed = text.trim();
  if (trimmed === '0') return 0;
  const pattern = /(\d+(?:\.\d+)?)(ms|s|m|h)/y;
  let total = 0;
  let matched = 0;
  while (pattern.lastIndex < trimmed.length) {
    const match = pattern.exec(trimmed);
    if (!match) break;
    const [, amount, unit] = match;
    total += Number(amount) * (UNIT_MS[unit ?? ''] ?? Number.NaN);
    matched = pattern.lastIndex;
  }
  if (trimmed === '' || matched !== trimmed.length || !Number.isFinite(total)) {
    throw new DurationFormatError(`"${text}" is not a duration such as 500ms, 30s, 5m or 1h30m`);
  }
  return Math.round(total);
}

/** Formats milliseconds the way parseDuration reads them, largest units first ("1h30m", "90s" → "1m30s"). */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  let rest = ms;
  let out = '';
  for (const [unit, size] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
    ['ms', 1],
  ] as const) {
    const whole = Math.floor(rest / size);
    if (whole > 0) {
      out += `${whole}${unit}`;
      rest -= whole * size;
    }
  }
  return out;
}
