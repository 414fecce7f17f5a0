/** Guards for JSON read from the wire or from objects others wrote: plain data in, no throwing. */

/** A JSON object (not null, not an array). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
