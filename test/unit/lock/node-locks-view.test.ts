import { expect } from 'chai';
import type { LockView, NodeLockApi } from '../../../src/lock/node-lock-api.js';
import { NodeLocks } from '../../../src/lock/node-locks.js';
import { OneNodeLockApi } from '../../support/one-node-lock-api.js';

const NOW = new Date('2026-12-01T08:45:30Z');
const NODE = 'gpu-1';
const LOCK = '2026-12-01T08:45:00Z,ns,deleted-meanwhile';

/** The apiserver: the lock is there, the pod it names is gone. */
class GoneOwnerApi extends OneNodeLockApi {
  constructor() {
    super(NODE, LOCK);
  }
}

/** A store that still shows the owner as an unbound pod whose bind is in progress. */
function lagging(api: GoneOwnerApi, current: boolean): LockView {
  return {
    node: () => api.snapshot(),
    ownerPod: () => ({ uid: 'u-1', phase: 'Pending', deleting: false, nodeName: undefined, bindPhase: undefined }),
    lockSeenAt: () => new Date(NOW.getTime() - 5_000),
    observeWrite: () => undefined,
    current: () => current,
  };
}

const locksOn = (api: NodeLockApi, view: LockView) =>
  new NodeLocks({ api, view, config: { bindGraceMs: 60_000, expireMs: 300_000 }, clock: () => NOW.getTime() });

describe('NodeLocks and a state store whose watch is down', () => {
  it('trusts a current store\'s "held" at no API cost', async () => {
    const api = new GoneOwnerApi();
    const result = await locksOn(api, lagging(api, true)).releaseIfReleasable(NODE, 'sweeper');
    expect(result).to.deep.include({ outcome: 'kept' });
    expect(api.calls).to.deep.equal([]);
  });

  // Found by the chaos suite (seed 1, 30 minutes): the leader's pod watch was down for 40 s and every
  // sweep kept the lock of a pod deleted meanwhile.
  it('reads the lock and its owner from the API while the store is not current, and frees a lock whose owner is gone', async () => {
    const api = new GoneOwnerApi();
    const result = await locksOn(api, lagging(api, false)).releaseIfReleasable(NODE, 'sweeper');
    expect(result).to.deep.include({ outcome: 'released' });
    expect(result.classification).to.deep.include({ state: 'releasable', reason: 'owner-not-found' });
    expect(api.calls).to.deep.equal(['GET node', 'GET pod', 'PATCH node']);
    expect(api.lock).to.equal(undefined);
  });

  it('a bind does not wait on a "held" from a store that is not current: the API shows the lock releasable and it is taken over', async () => {
    const api = new GoneOwnerApi();
    const result = await locksOn(api, lagging(api, false)).acquire(NODE, { namespace: 'ns', name: 'next' });
    expect(result.outcome).to.equal('taken-over');
    expect(result.replaced).to.deep.include({ value: LOCK, reason: 'owner-not-found' });
  });
});
