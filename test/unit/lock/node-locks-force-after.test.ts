import { expect } from 'chai';
import type { KubeletAdmissionCheck } from '../../../src/lock/kubelet-admission.js';
import { LockContentionError } from '../../../src/lock/lock-errors.js';
import { parseLockValue, type PodRef } from '../../../src/lock/lock-value.js';
import { NodeLocks } from '../../../src/lock/node-locks.js';
import { OneNodeLockApi } from '../../support/one-node-lock-api.js';
import type { LockEvent } from '../../../src/lock/lock-events.js';

const NOW = new Date('2026-12-02T10:10:00Z');
const NODE = 'gpu-1';
/** Written 10 minutes ago by the bind of ns/first, which is bound here and still awaits Allocate. */
const LOCK = '2026-12-02T10:00:00Z,ns,first';
const CONFIG = { bindGraceMs: 60_000, expireMs: 300_000, forceAfterMs: 420_000 };

/** ns/first is bound here with bind-phase allocating: its lock is stalled. */
const stalledApi = () =>
  new OneNodeLockApi(NODE, LOCK, {
    uid: 'u-first',
    phase: 'Pending',
    deleting: false,
    nodeName: NODE,
    bindPhase: 'allocating',
  });

/** The kubelet's traces as the test sets them; records what NodeLocks asked. */
class Kubelet implements KubeletAdmissionCheck {
  ranSince = false;
  asked: (Date | undefined)[] = [];
  mayStillAdmit(): Promise<boolean> {
    return Promise.reject(new Error('not asked here: the owner exists'));
  }
  mayForce(_node: string, _owner: PodRef, lockWrittenAt: Date | undefined): Promise<boolean> {
    this.asked.push(lockWrittenAt);
    return Promise.resolve(this.ranSince);
  }
}

function setup() {
  const api = stalledApi();
  const kubelet = new Kubelet();
  const events: LockEvent[] = [];
  const locks = new NodeLocks({
    api,
    config: CONFIG,
    clock: () => NOW.getTime(),
    kubeletAdmission: kubelet,
    observer: {
      onLockEvent: (event) => {
        events.push(event);
      },
    },
  });
  return { api, kubelet, events, locks };
}

describe('NODELOCK_FORCE_AFTER and a kubelet that may still serve a queued pod through the lock', () => {
  it("the sweeper keeps a stalled lock past FORCE_AFTER while the node's kubelet is silent, and says why", async () => {
    const { api, kubelet, events, locks } = setup();
    const result = await locks.releaseIfReleasable(NODE, 'sweeper');
    expect(result).to.deep.include({ outcome: 'kept' });
    expect(result.classification).to.deep.equal({
      state: 'stalled',
      reason: 'awaiting-allocation-past-expiry',
      ageMs: 600_000,
      forceWithheld: 'kubelet-queue',
    });
    expect(api.lock).to.equal(LOCK);
    // Issue #42 item 8: without the apiserver's record of the write, the writer's stamp is not
    // compared with the apiserver's Lease times (a writer's clock may be off by minutes).
    expect(kubelet.asked, 'asked with no record of the write (none in managedFields here)').to.deep.equal([undefined]);
    expect(events).to.deep.include({
      type: 'stalled',
      node: NODE,
      holder: LOCK,
      holderValue: parseLockValue(LOCK),
      ageMs: 600_000,
      forceWithheld: 'kubelet-queue',
    });
  });

  it('frees it (forced-after-stall) once the kubelet has run since', async () => {
    const { api, kubelet, locks } = setup();
    kubelet.ranSince = true;
    const result = await locks.releaseIfReleasable(NODE, 'sweeper');
    expect(result).to.deep.include({ outcome: 'released' });
    expect(result.classification).to.deep.include({ state: 'releasable', reason: 'forced-after-stall' });
    expect(api.lock).to.equal(undefined);
  });

  it('a bind does not take it over while the kubelet is silent, and does once it has run', async () => {
    const { api, kubelet, locks } = setup();
    const second = { namespace: 'ns', name: 'second' };
    const refused = await locks.acquire(NODE, second).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).to.be.instanceOf(LockContentionError);
    expect((refused as LockContentionError).classification).to.deep.include({
      state: 'stalled',
      forceWithheld: 'kubelet-queue',
    });
    expect(api.lock).to.equal(LOCK);
    kubelet.ranSince = true;
    const taken = await locks.acquire(NODE, second);
    expect(taken.outcome).to.equal('taken-over');
    expect(api.lock).to.match(/,ns,second$/);
  });

  it('asks nothing of the kubelet before FORCE_AFTER has passed', async () => {
    const { kubelet } = setup();
    const early = new NodeLocks({
      api: stalledApi(),
      config: { ...CONFIG, forceAfterMs: 900_000 },
      clock: () => NOW.getTime(),
      kubeletAdmission: kubelet,
    });
    expect((await early.releaseIfReleasable(NODE, 'sweeper')).classification).to.deep.equal({
      state: 'stalled',
      reason: 'awaiting-allocation-past-expiry',
      ageMs: 600_000,
    });
    expect(kubelet.asked).to.deep.equal([]);
  });
});
