import { expect } from 'chai';
import { LockContentionError } from '../../../src/lock/lock-errors.js';
import { type PodRef } from '../../../src/lock/lock-value.js';
import type { LockView, NodeLockApi } from '../../../src/lock/node-lock-api.js';
import { NodeLocks } from '../../../src/lock/node-locks.js';
import type { OwnerPod } from '../../../src/lock/owner-pod.js';
import { sweepOnce } from '../../../src/sweeper/sweep-pass.js';
import { NODE_LOCK_ANNOTATION } from '../../../src/hami/wire.js';
import { OneNodeLockApi } from '../../support/one-node-lock-api.js';

const NOW = new Date('2026-11-30T12:00:00Z');
const CONFIG = { bindGraceMs: 60_000, expireMs: 300_000 };
const NODE = 'gpu-1';
const REQUESTER: PodRef = { namespace: 'ns', name: 'next' };

/** One node in memory; counts pod reads, which must not happen for an owner no pod can have. */
/** One node's apiserver with these pods (test/support/one-node-lock-api.ts). */
const memoryApi = (lock: string, pods?: ReadonlyMap<string, OwnerPod>) =>
  new OneNodeLockApi(NODE, lock, undefined, pods ?? new Map());

const unbound: OwnerPod = { uid: 'u', phase: 'Pending', deleting: false, nodeName: undefined, bindPhase: undefined };
const locksOn = (api: NodeLockApi, view?: LockView) =>
  new NodeLocks({ api, config: CONFIG, clock: () => NOW.getTime(), ...(view ? { view } : {}) });

describe('NodeLocks with hostile lock values', () => {
  const impossibleOwners = [
    `2026-11-30T11:59:59Z,ns,${'a'.repeat(250_000)}`,
    '2026-11-30T11:59:59Z,NS,pod',
    '2026-11-30T11:59:59Z,,',
    '2026-11-30t11:59:59Z,ns,pod',
  ];

  for (const value of impossibleOwners) {
    const label = value.length > 80 ? `${value.slice(0, 40)}… (${value.length} characters)` : value;

    it(`inspect, releaseIfReleasable, acquire and the sweeper free ${JSON.stringify(label)} without reading any pod`, async () => {
      const inspected = await locksOn(memoryApi(value)).inspect(NODE);
      expect(inspected.classification).to.deep.include({ state: 'releasable', reason: 'malformed' });

      const releaseApi = memoryApi(value);
      expect((await locksOn(releaseApi).releaseIfReleasable(NODE, 'sweeper')).outcome).to.equal('released');
      expect(releaseApi.lock).to.equal(undefined);

      const acquireApi = memoryApi(value);
      const acquired = await locksOn(acquireApi).acquire(NODE, REQUESTER);
      expect(acquired).to.deep.include({ outcome: 'taken-over', replaced: { value, reason: 'malformed' } });

      const sweepApi = memoryApi(value);
      const report = await sweepOnce({
        targets: { lockedNodes: () => [NODE] },
        locks: locksOn(sweepApi),
        concurrency: 1,
      });
      expect(report.errors).to.deep.equal([]);
      expect(report.released.map((released) => released.node)).to.deep.equal([NODE]);

      for (const api of [releaseApi, acquireApi, sweepApi]) expect(api.podReads).to.deep.equal([]);
    });
  }

  describe('a stamp in the future', () => {
    const future = '2099-01-01T00:00:00Z,ns,waiting';

    it("one-off reads age it from the apiserver's record of the write (managedFields), and say how far ahead the stamp is", async () => {
      const api = memoryApi(future, new Map([['ns/waiting', unbound]]));
      api.managedFields = [
        { manager: 'kubelet', time: '2026-11-30T11:00:00Z', fieldsV1: { 'f:status': {} } },
        {
          manager: 'kubectl-annotate',
          time: '2026-11-30T11:58:00Z',
          fieldsV1: { 'f:metadata': { 'f:annotations': { [`f:${NODE_LOCK_ANNOTATION}`]: {} } } },
        },
      ];
      const { classification } = await locksOn(api).inspect(NODE);
      expect(classification).to.deep.include({ state: 'releasable', reason: 'owner-replaced', ageMs: 120_000 });
      expect(classification?.clockSkewMs).to.equal(Date.parse('2099-01-01T00:00:00Z') - NOW.getTime());
    });

    it('without that record it counts as written now (held, never "expired" early), with the skew reported', async () => {
      const api = memoryApi(future, new Map([['ns/waiting', unbound]]));
      const { classification } = await locksOn(api).inspect(NODE);
      expect(classification).to.deep.include({ state: 'held', reason: 'bind-in-progress', ageMs: 0 });
      const contention = await locksOn(api)
        .acquire(NODE, REQUESTER)
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      expect(contention).to.be.instanceOf(LockContentionError);
      expect((contention as Error).message).to.match(
        /\(0s old since first seen, its stamp 7\dy in the future, held: bind-in-progress\)/,
      );
    });

    it("the state store's first sight wins over the apiserver's record", async () => {
      const api = memoryApi(future, new Map([['ns/waiting', unbound]]));
      const view: LockView = {
        node: () => api.snapshot(),
        ownerPod: () => unbound,
        lockSeenAt: () => new Date(NOW.getTime() - 61_000),
        observeWrite: () => undefined,
      };
      expect((await locksOn(api, view).releaseIfReleasable(NODE, 'sweeper')).classification).to.deep.include({
        state: 'releasable',
        reason: 'owner-replaced',
        ageMs: 61_000,
      });
    });
  });
});
