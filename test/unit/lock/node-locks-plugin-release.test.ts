import { expect } from 'chai';
import { LockContentionError } from '../../../src/lock/lock-errors.js';
import { NodeLocks } from '../../../src/lock/node-locks.js';
import type { OwnerPod } from '../../../src/lock/owner-pod.js';
import { OneNodeLockApi } from '../../support/one-node-lock-api.js';

const NOW = new Date('2026-12-05T10:00:05Z');
const NODE = 'gpu-1';
const LOCK = '2026-12-05T10:00:00Z,ns,done';
/**
 * The lock's owner: bound here, its allocation over (the device plugin wrote bind-phase success and
 * is about to delete the lock).
 */
const allocated: OwnerPod = { uid: 'u-1', phase: 'Pending', deleting: false, nodeName: NODE, bindPhase: 'success' };

const locks = (api: OneNodeLockApi) =>
  new NodeLocks({ api, config: { bindGraceMs: 60_000, expireMs: 300_000 }, clock: () => NOW.getTime() });

describe('NodeLocks.acquire and a lock whose allocation is over (takeOverFinished)', () => {
  it('counts it as held (release-pending), writing nothing, while the caller leaves it to the device plugin', async () => {
    const api = new OneNodeLockApi(NODE, LOCK, allocated);
    const asked: string[] = [];
    const error = await locks(api)
      .acquire(
        NODE,
        { namespace: 'ns', name: 'next' },
        {
          takeOverFinished: (node, value) => {
            asked.push(`${node} ${value}`);
            return false;
          },
        },
      )
      .catch((caught: unknown) => caught);
    expect(error).to.be.instanceOf(LockContentionError);
    expect((error as LockContentionError).classification).to.deep.include({ state: 'held', reason: 'release-pending' });
    expect(asked).to.deep.equal([`${NODE} ${LOCK}`]);
    expect(api.calls.filter((call) => call.startsWith('PATCH'))).to.deep.equal([]);
    expect(api.lock).to.equal(LOCK);
  });

  it('takes it over when the caller says the plugin had its turn, and without the option as before', async () => {
    for (const options of [{ takeOverFinished: () => true }, {}]) {
      const api = new OneNodeLockApi(NODE, LOCK, allocated);
      const result = await locks(api).acquire(NODE, { namespace: 'ns', name: 'next' }, options);
      expect(result.outcome).to.equal('taken-over');
      expect(result.replaced).to.deep.include({ value: LOCK, reason: 'allocation-finished' });
    }
  });

  it('is never asked about a lock released for another reason (owner gone) or still in use (allocating)', async () => {
    const asked: string[] = [];
    const takeOverFinished = (_node: string, value: string) => {
      asked.push(value);
      return false;
    };
    const gone = new OneNodeLockApi(NODE, LOCK, undefined);
    expect((await locks(gone).acquire(NODE, { namespace: 'ns', name: 'next' }, { takeOverFinished })).outcome).to.equal(
      'taken-over',
    );
    const allocating = new OneNodeLockApi(NODE, LOCK, { ...allocated, bindPhase: 'allocating' });
    const error = await locks(allocating)
      .acquire(NODE, { namespace: 'ns', name: 'next' }, { takeOverFinished })
      .catch((caught: unknown) => caught);
    expect((error as LockContentionError).classification).to.deep.include({
      state: 'held',
      reason: 'bind-in-progress',
    });
    expect(asked).to.deep.equal([]);
  });
});
