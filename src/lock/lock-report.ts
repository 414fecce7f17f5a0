import type { LockClassification } from './lock-rules.js';
import type { LockValue, PodRef } from './lock-value.js';
import type { LockInspection } from './lock-events.js';
import { formatAge } from '../base/human-age.js';
import { formatTable } from '../base/table.js';

/** One locked node as `vgpu-warden locks` reports it; plain data, so output is a pure function. */
export interface LockRow {
  node: string;
  /** The raw hami.io/mutex.lock value. */
  value: string;
  /** The pod the lock names; null for legacy and malformed values. */
  holder: PodRef | null;
  kind: 'owned' | 'legacy' | 'malformed';
  /** Why a malformed value cannot be read. */
  problem?: string;
  /**
   * Whole seconds since the lock was written: by the writer's stamp, or, when that stamp lies in the
   * future, by the apiserver's record of the write (0 when it keeps none). Null for malformed values.
   */
  ageSeconds: number | null;
  /** How far the stamp lies ahead of this machine's clock, when it does (a skewed or planted writer). */
  stampAheadSeconds?: number;
  /** `unknown` when the node could not be inspected (then `error` says why). */
  state: LockClassification['state'] | 'unknown';
  reason: string;
  error?: string;
  /** The holder pod as found; null when the lock names no pod. */
  owner: {
    exists: boolean;
    phase: string | null;
    node: string | null;
    bindPhase: string | null;
    deleting: boolean;
  } | null;
}

// A second or so ahead is ordinary skew between machines, not worth a remark.
const STAMP_AHEAD_SHOWN_MS = 2000;

/** The row for an inspected node; undefined when the node carries no lock (any more). */
export function lockRowOf(inspection: LockInspection): LockRow | undefined {
  const { raw, value, classification, owner } = inspection;
  if (raw === undefined || value === undefined || classification === undefined) return undefined;
  return {
    node: inspection.node,
    value: raw,
    holder: value.kind === 'owned' ? { ...value.owner } : null,
    kind: value.kind,
    ...(value.kind === 'malformed' ? { problem: value.problem } : {}),
    ageSeconds: classification.ageMs === undefined ? null : Math.floor(classification.ageMs / 1000),
    ...(classification.clockSkewMs === undefined || classification.clockSkewMs < STAMP_AHEAD_SHOWN_MS
      ? {}
      : { stampAheadSeconds: Math.floor(classification.clockSkewMs / 1000) }),
    state: classification.state,
    reason: classification.reason,
    owner:
      owner === undefined
        ? null
        : owner === null
          ? { exists: false, phase: null, node: null, bindPhase: null, deleting: false }
          : {
              exists: true,
              phase: owner.phase ?? null,
              node: owner.nodeName ?? null,
              bindPhase: owner.bindPhase ?? null,
              deleting: owner.deleting,
            },
  };
}

/**
 * The row for a locked node whose inspection failed (e.g. its owner could not be read): what the
 * value itself says, state `unknown`, and the error. One such node never hides the others.
 */
export function failedLockRow(node: string, raw: string, value: LockValue, error: string): LockRow {
  return {
    node,
    value: raw,
    holder: value.kind === 'owned' ? { ...value.owner } : null,
    kind: value.kind,
    ...(value.kind === 'malformed' ? { problem: value.problem } : {}),
    ageSeconds: null,
    state: 'unknown',
    reason: 'inspect-failed',
    error,
    owner: null,
  };
}

function holderText(row: LockRow): string {
  if (row.holder !== null) return `${row.holder.namespace}/${row.holder.name}`;
  return row.kind === 'legacy' ? '<legacy>' : '<malformed>';
}

/** `40s`, or `40s (stamp +73y)` when the stamp lies in the future, so neither "0s" nor the stamp misleads. */
function ageText(row: LockRow): string {
  const age = formatAge(row.ageSeconds ?? undefined);
  return row.stampAheadSeconds === undefined ? age : `${age} (stamp +${formatAge(row.stampAheadSeconds)})`;
}

/** The `-o table` output: NODE, HOLDER, AGE, STATE, REASON, or one line when nothing is locked. */
export function formatLockTable(rows: readonly LockRow[]): string[] {
  if (rows.length === 0) return ['No locked nodes.'];
  return formatTable(
    ['NODE', 'HOLDER', 'AGE', 'STATE', 'REASON'],
    rows.map((row) => [row.node, holderText(row), ageText(row), row.state, row.reason]),
  );
}

/** The `-o json` output, the shape of a Kubernetes list. */
export function formatLockJson(rows: readonly LockRow[]): string {
  return JSON.stringify({ items: rows }, null, 2);
}
