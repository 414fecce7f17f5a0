import type { JsonPatchOp } from '../../src/admission/json-patch.js';

/**
 * Applies add/replace JSON Patch ops to a deep copy, failing like the apiserver would when a
 * parent is missing or an index is out of range. Tests use it to check patches by their effect.
 */
export function applyJsonPatch<T>(document: T, ops: readonly JsonPatchOp[]): T {
  const root = structuredClone(document) as unknown;
  for (const op of ops) {
    const segments = op.path
      .split('/')
      .slice(1)
      .map((segment) => segment.replaceAll('~1', '/').replaceAll('~0', '~'));
    const last = segments.pop();
    if (last === undefined) throw new Error(`empty path in ${JSON.stringify(op)}`);
    let parent: unknown = root;
    for (const segment of segments) {
      if (typeof parent !== 'object' || parent === null) throw new Error(`missing parent for ${op.path}`);
      parent = (parent as Record<string, unknown>)[segment];
    }
    if (typeof parent !== 'object' || parent === null) throw new Error(`missing parent for ${op.path}`);
    if (Array.isArray(parent)) {
      if (last === '-') parent.push(op.value);
      else {
        const index = Number(last);
        if (!Number.isInteger(index) || index > parent.length) throw new Error(`bad index in ${op.path}`);
        if (op.op === 'add') parent.splice(index, 0, op.value);
        else parent[index] = op.value;
      }
    } else {
      const record = parent as Record<string, unknown>;
      if (op.op === 'replace' && !(last in record)) throw new Error(`replace of missing ${op.path}`);
      record[last] = op.value;
    }
  }
  return root as T;
}
