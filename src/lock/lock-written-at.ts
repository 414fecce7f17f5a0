import { NODE_LOCK_ANNOTATION } from '../hami/wire.js';
import { isRecord } from '../base/json.js';

interface ManagedFieldsEntry {
  time?: unknown;
  fieldsV1?: unknown;
}

function timeOf(value: unknown): Date | undefined {
  const time = value instanceof Date ? value : typeof value === 'string' ? new Date(value) : undefined;
  return time === undefined || Number.isNaN(time.getTime()) ? undefined : time;
}

const FIELD = `f:${NODE_LOCK_ANNOTATION}`;

/**
 * When the apiserver last recorded a write of the lock annotation, by its own clock: the newest
 * `metadata.managedFields` entry that manages the field. A manager's entry is re-stamped whenever it
 * changes any field it manages, so this is never earlier than the lock's own write.
 *
 * Only used where this process has no first-seen time of its own and the lock's stamp is in the
 * future (a one-off read such as `vgpu-warden locks`): the stamp cannot say how long the lock has
 * been there, this can. Undefined when the node carries no such record.
 */
export function lockWrittenAt(node: unknown): Date | undefined {
  const metadata = isRecord(node) ? node.metadata : undefined;
  const entries =
    isRecord(metadata) && Array.isArray(metadata.managedFields) ? (metadata.managedFields as unknown[]) : [];
  let newest: Date | undefined;
  for (const entry of entries) {
    if (!managesLockAnnotation(entry)) continue;
    const at = timeOf((entry as ManagedFieldsEntry).time);
    if (at !== undefined && (newest === undefined || at > newest)) newest = at;
  }
  return newest;
}

/** Whether a `metadata.managedFields` entry manages the lock annotation (the only entries lockWrittenAt reads). */
export function managesLockAnnotation(entry: unknown): boolean {
  if (!isRecord(entry)) return false;
  const { fieldsV1 } = entry as ManagedFieldsEntry;
  const fields = isRecord(fieldsV1) ? fieldsV1['f:metadata'] : undefined;
  const annotations = isRecord(fields) ? fields['f:annotations'] : undefined;
  return isRecord(annotations) && FIELD in annotations;
}
