import { lockRowOf, type LockRow } from '../lock/lock-report.js';
import { classifyLock, type LockRulesConfig } from '../lock/lock-rules.js';
import { parseLockValue } from '../lock/lock-value.js';
import type { LockView } from '../lock/node-lock-api.js';

/**
 * A node's lock as `vgpu-warden locks` would report it, read from a state store instead of the API:
 * the same classification (lock-rules.ts) and row (lock-report.ts), with the age judged from when the
 * store first saw the value, as the sweeper judges it. Undefined when the node carries no lock.
 * Pure given the view: no API call, so a redraw every second costs nothing.
 */
export function lockRowFromView(
  view: Pick<LockView, 'node' | 'ownerPod' | 'lockSeenAt'>,
  node: string,
  now: Date,
  config: LockRulesConfig,
): LockRow | undefined {
  const snapshot = view.node(node);
  if (snapshot?.lock === undefined) return undefined;
  const value = parseLockValue(snapshot.lock);
  const owner = value.kind === 'owned' ? (view.ownerPod(value.owner) ?? null) : undefined;
  const classification = classifyLock({
    lock: value,
    owner: owner ?? undefined,
    node,
    now,
    config,
    seenAt: view.lockSeenAt(node, snapshot.lock),
  });
  return lockRowOf({
    node,
    resourceVersion: snapshot.resourceVersion,
    raw: snapshot.lock,
    value,
    owner,
    classification,
  });
}
