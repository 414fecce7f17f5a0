/**
 * What a replica's JSON log says about node locks it released, for the time line: a lock that went
 * away while its owner awaited Allocate is explained by the line of the replica that released it
 * (or by its absence: then the device plugin or a person did). Lines that are not such records are
 * ignored; the replica's own format is src/telemetry/lock-telemetry.ts.
 */
export interface LockReleaseNote {
  subjects: string[];
  text: string;
}

const MAX_FIELD = 120;

const field = (value: unknown): string | undefined =>
  typeof value === 'string' && value !== '' ? value.slice(0, MAX_FIELD) : undefined;

export function lockReleaseNote(replica: number, line: string): LockReleaseNote | undefined {
  if (!line.startsWith('{') || (!line.includes('"released"') && !line.includes('"taken-over"'))) return undefined;
  let record: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(line);
    if (typeof parsed !== 'object' || parsed === null) return undefined;
    record = parsed as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (record.component !== 'lock') return undefined;
  const node = field(record.node);
  if (node === undefined) return undefined;
  if (record.event === 'released') {
    const holder = field(record.holder);
    const by =
      record.path === 'device-plugin'
        ? 'saw the lock go outside vgpu-warden'
        : `released the lock by ${field(record.path) ?? '?'}: ${field(record.reason) ?? '?'}`;
    return {
      subjects: [`node/${node}`, ...(holder === undefined ? [] : [holder])],
      text: `replica r${replica} ${by} (${field(record.value) ?? 'value unknown'})`,
    };
  }
  if (record.event === 'acquired' && record.outcome === 'taken-over') {
    const previous = field(record.previousHolder);
    const pod = field(record.pod);
    return {
      subjects: [`node/${node}`, ...(previous === undefined ? [] : [previous]), ...(pod === undefined ? [] : [pod])],
      text: `replica r${replica} took the lock over for ${pod ?? '?'} from ${previous ?? 'no owner'}: ${field(record.reason) ?? '?'}`,
    };
  }
  return undefined;
}
