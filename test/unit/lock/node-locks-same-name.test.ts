import { expect } from 'chai';
import type { GoneOwnerLock, KubeletAdmissionCheck } from '../../../src/lock/kubelet-admission.js';
import type { GoneIncarnation } from '../../../src/lock/lock-owner.js';
import type { LockView } from '../../../src/lock/node-lock-api.js';
import { NodeLocks } from '../../../src/lock/node-locks.js';
import type { OwnerPod } from '../../../src/lock/owner-pod.js';
import { OneNodeLockApi } from '../../support/one-node-lock-api.js';

const NOW = new Date('2026-12-06T10:01:30Z');
const NODE = 'gpu-1';
/** Written by the bind of sts-0's first incarnation, which was then force-deleted while allocating. */
const LOCK = '2026-12-06T10:00:10Z,ns,sts-0';
const CONFIG = { bindGraceMs: 60_000, expireMs: 300_000 };
/** The recreated pod: same name, new UID, not bound yet. */
const recreated: OwnerPod = {
  uid: 'uid-2',
  phase: 'Pending',
  deleting: false,
  nodeName: undefined,
  bindPhase: undefined,
  createdAt: new Date('2026-12-06T10:00:30Z'),
};
const first: GoneIncarnation = {
  uid: 'uid-1',
  boundTo: NODE,
  bindPhase: 'allocating',
  lastVersion: '20',
  final: true,
  vanishedAt: new Date('2026-12-06T10:00:29Z'),
};

/**
 * 80 s after the lock's write, past the bind grace. A store that saw the lock
 * appear at version 12 and uid-1 deleted at version 20, then uid-2 created.
 */
function store(api: OneNodeLockApi): LockView {
  return {
    node: () => api.snapshot(),
    ownerPod: () => recreated,
    lockSeenAt: () => new Date('2026-12-06T10:00:10Z'),
    observeWrite: () => undefined,
    current: () => true,
    lockOwnerFacts: () => ({
      lockSeenVersion: '12',
      lockSeenExactly: true,
      namedCreatedVersion: '21',
      namedSeenVersion: '21',
      gone: [first],
    }),
  };
}

/** kubelet may still admit the dead incarnation (frozen), until told otherwise. */
class Kubelet implements KubeletAdmissionCheck {
  mayAdmit = true;
  readonly asked: string[][] = [];
  mayStillAdmit(lock: GoneOwnerLock): Promise<boolean> {
    this.asked.push(lock.candidates.map((one) => one.uid ?? ''));
    return Promise.resolve(this.mayAdmit);
  }
  mayForce(): Promise<boolean> {
    return Promise.resolve(false);
  }
}

function setup() {
  const api = new OneNodeLockApi(NODE, LOCK, recreated);
  const kubelet = new Kubelet();
  const locks = new NodeLocks({
    api,
    view: store(api),
    config: CONFIG,
    clock: () => NOW.getTime(),
    kubeletAdmission: kubelet,
  });
  return { api, kubelet, locks };
}

describe('NodeLocks and a pod recreated under the same name (issue #42)', () => {
  it("the new incarnation's bind does not re-stamp the lock written for the dead one while kubelet may still admit it: it waits", async () => {
    const { api, kubelet, locks } = setup();
    const attempt = await locks.acquire(NODE, { namespace: 'ns', name: 'sts-0', uid: 'uid-2' }).then(
      (result) => result.outcome,
      (error: unknown) => (error as Error).name,
    );
    expect(attempt).to.equal('LockContentionError');
    expect(api.lock, "the dead incarnation's lock stays").to.equal(LOCK);
    expect(kubelet.asked, 'asked about the incarnation the lock was written for').to.deep.equal([['uid-1']]);
  });

  it('takes it over (owner-replaced) once kubelet is past the dead incarnation', async () => {
    const { api, kubelet, locks } = setup();
    kubelet.mayAdmit = false;
    const result = await locks.acquire(NODE, { namespace: 'ns', name: 'sts-0', uid: 'uid-2' });
    expect(result.outcome).to.equal('taken-over');
    expect(result.replaced).to.deep.include({ value: LOCK, reason: 'owner-replaced' });
    expect(api.lock)
      .to.match(/,ns,sts-0$/)
      .and.not.equal(LOCK);
  });

  it('reads the pod carrying the name once per API read of the node: the same read proves the incarnation and classifies', async () => {
    const { api, kubelet, locks } = setup();
    kubelet.mayAdmit = false;
    await locks.acquire(NODE, { namespace: 'ns', name: 'sts-0', uid: 'uid-2' });
    // The store's "releasable" is confirmed from the API (the node and the pod), then the takeover is written.
    expect(api.calls).to.deep.equal(['GET node', 'GET pod', 'PATCH node']);
  });

  it('the sweeper and the pod watch keep it while kubelet may admit the dead incarnation, though a live pod carries the name', async () => {
    const { api, locks } = setup();
    const result = await locks.releaseIfReleasable(NODE, 'sweeper');
    expect(result).to.deep.include({ outcome: 'kept' });
    expect(result.classification).to.deep.include({ state: 'held', reason: 'kubelet-may-admit' });
    expect(api.lock).to.equal(LOCK);
  });

  it('a retried bind of the incarnation the lock was written for re-stamps it', async () => {
    const api = new OneNodeLockApi(NODE, LOCK, recreated);
    const view: LockView = { ...store(api), lockOwnerFacts: () => ({ writtenFor: 'uid-2', gone: [first] }) };
    const locks = new NodeLocks({
      api,
      view,
      config: CONFIG,
      clock: () => NOW.getTime(),
      kubeletAdmission: new Kubelet(),
    });
    const result = await locks.acquire(NODE, { namespace: 'ns', name: 'sts-0', uid: 'uid-2' });
    expect(result.outcome).to.equal('reentrant');
  });

  it("the webhook's DELETE of the recreated pod does not free the dead incarnation's lock", async () => {
    const { api, locks } = setup();
    const result = await locks.releaseIfReleasable(NODE, 'webhook', {
      deleted: { namespace: 'ns', name: 'sts-0', uid: 'uid-2' },
    });
    expect(result).to.deep.include({ outcome: 'kept' });
    expect(api.lock).to.equal(LOCK);
  });
});
