/** RFC 6902 JSON Patch operations as the webhook emits them (add and replace only). */
export type JsonPatchOp = { op: 'add'; path: string; value: unknown } | { op: 'replace'; path: string; value: unknown };

/** Escapes one JSON Pointer segment (RFC 6901): `~` → `~0`, then `/` → `~1` (`nvidia.com/gpu` → `nvidia.com~1gpu`). */
export function escapePointerSegment(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

export function pointer(...segments: (string | number)[]): string {
  return segments.map((segment) => `/${escapePointerSegment(String(segment))}`).join('');
}
