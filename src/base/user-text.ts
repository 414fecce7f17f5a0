/**
 * Bounds for strings that someone other than vgpu-warden wrote (pod and container names, node names
 * from extender arguments, annotation and quantity values) before they go into a message, an Event
 * or a log line. Such a string can be megabytes long; echoing it whole makes every answer as big as
 * the input and can break the Event or the reply that carries it. Pure.
 */

/** Longest DNS-1123 label (namespaces, container names): shows any valid one whole. */
export const LABEL_CHARS = 63;
/** Longest DNS-1123 subdomain (pod and node names): shows any valid one whole. */
export const NAME_CHARS = 253;

/** `text` cut to `max` characters, with "…" marking the cut. */
export function clip(text: string, max: number = NAME_CHARS): string {
  // Cut on a code point boundary: half a surrogate pair would print as garbage.
  if (text.length <= max) return text;
  let end = max;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return `${text.slice(0, end)}…`;
}

/** Any value as short quoted text: strings clipped and JSON-quoted, other values by their type. */
export function quoted(value: unknown, max: number = LABEL_CHARS): string {
  if (typeof value === 'string') return JSON.stringify(clip(value, max));
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  return Array.isArray(value) ? 'a list' : `a ${typeof value}`;
}
