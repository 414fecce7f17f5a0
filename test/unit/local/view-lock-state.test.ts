import { expect } from 'chai';
import type { NodeSnapshot } from '../../../src/lock/node-lock-api.js';
import type { OwnerPod } from '../../../src/lock/owner-pod.js';
import { lockRowFromView } from '../../../src/local/view-lock-state.js';

const now = new Date('2026-12-01T10:00:00Z');
const rules = { bindGraceMs: 60_000, expireMs: 300_000 };

function view(lock: string | undefined, owner: OwnerPod | undefined, seenAt?: Date) {
  return {
    node: (name: string): NodeSnapshot => ({ name, resourceVersion: '7', lock }),
    ownerPod: () => owner,
    lockSeenAt: () => seenAt,
  };
}

const allocating: OwnerPod = {
  uid: 'u',
  phase: 'Pending',
  deleting: false,
  nodeName: 'gpu-node-1',
  bindPhase: 'allocating',
};

describe('live view lock state (the lock rules, read from a state store)', () => {
  it('is undefined for an unlocked node', () => {
    expect(lockRowFromView(view(undefined, undefined), 'gpu-node-1', now, rules)).to.equal(undefined);
  });

  it('says held while a bind is in progress', () => {
    const row = lockRowFromView(
      view('2026-12-01T09:59:50Z,default,trainer', { ...allocating, nodeName: undefined, bindPhase: undefined }),
      'gpu-node-1',
      now,
      rules,
    );
    expect(row).to.include({ state: 'held', reason: 'bind-in-progress', ageSeconds: 10 });
    expect(row?.holder).to.deep.equal({ namespace: 'default', name: 'trainer' });
  });

  it('says stalled for a bound pod waiting for Allocate past the expiry, judged from when the store first saw it', () => {
    const lock = '2026-12-01T09:27:00Z,default,trainer';
    expect(
      lockRowFromView(view(lock, allocating, new Date('2026-12-01T09:27:00Z')), 'gpu-node-1', now, rules),
    ).to.include({ state: 'stalled', reason: 'awaiting-allocation-past-expiry', ageSeconds: 1980 });
    // First seen two minutes ago (a writer whose clock runs behind): held, not stalled.
    expect(
      lockRowFromView(view(lock, allocating, new Date('2026-12-01T09:58:00Z')), 'gpu-node-1', now, rules),
    ).to.include({ state: 'held', reason: 'awaiting-allocation' });
  });

  it('says releasable with the reason when the owner is gone', () => {
    expect(lockRowFromView(view('2026-12-01T09:59:00Z,default,gone', undefined), 'gpu-node-1', now, rules)).to.include({
      state: 'releasable',
      reason: 'owner-not-found',
    });
  });
});
