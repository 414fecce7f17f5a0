import { expect } from 'chai';
import { LockIndex } from '../../../src/cluster/lock-index.js';

const LOCK_A = '2026-12-02T10:00:00Z,team-a,train-0';
const LOCK_B = '2026-12-02T10:00:05Z,team-b,train-1';

function index(now: { ms: number }): LockIndex {
  return new LockIndex(
    () => now.ms,
    (listeners) => {
      for (const listener of [...listeners]) listener();
    },
  );
}

describe('LockIndex', () => {
  it('keeps the first time this process saw each value, and forgets it when the value changes', () => {
    const now = { ms: 1000 };
    const locks = index(now);
    expect(locks.observe('n1', LOCK_A, '40', true)).to.equal(true);
    now.ms = 5000;
    expect(
      locks.observe('n1', LOCK_A, '52', true),
      'another change of the node (kubelet status) keeps the first sight',
    ).to.equal(false);
    expect(locks.of('n1')).to.deep.equal({ raw: LOCK_A, firstSeenMs: 1000, firstSeenVersion: '40', seenExactly: true });
    locks.markWrittenFor('n1', LOCK_B, 'uid-b');
    expect(locks.of('n1')?.writtenFor, 'only the value it was written for').to.equal(undefined);
    locks.markWrittenFor('n1', LOCK_A, 'uid-a');
    expect(locks.of('n1')?.writtenFor).to.equal('uid-a');
    expect(locks.seenAt('n1', LOCK_A)?.getTime()).to.equal(1000);
    expect(locks.seenAt('n1', LOCK_B)).to.equal(undefined);
    expect(locks.observe('n1', LOCK_B, '60')).to.equal(true);
    expect(locks.of('n1')).to.deep.equal({
      raw: LOCK_B,
      firstSeenMs: 5000,
      firstSeenVersion: '60',
      seenExactly: false,
    });
    expect(locks.observe('n1', undefined)).to.equal(true);
    expect(locks.lockedNodes()).to.deep.equal([]);
  });

  it('indexes nodes by holder, including a pod that holds two nodes, and unindexes on change and removal', () => {
    const locks = index({ ms: 0 });
    locks.observe('n1', LOCK_A);
    locks.observe('n2', LOCK_A);
    locks.observe('n3', 'not a lock value');
    expect(locks.nodesLockedBy('team-a', 'train-0').sort()).to.deep.equal(['n1', 'n2']);
    expect(locks.lockedNodes().sort()).to.deep.equal(['n1', 'n2', 'n3']);
    locks.observe('n1', LOCK_B);
    locks.remove('n2');
    expect(locks.nodesLockedBy('team-a', 'train-0')).to.deep.equal([]);
    expect(locks.nodesLockedBy('team-b', 'train-1')).to.deep.equal(['n1']);
  });

  it('wakes the parked waiters of a node, and of the nodes a holder pod locks, until they unsubscribe', () => {
    const locks = index({ ms: 0 });
    locks.observe('n1', LOCK_A);
    const woken: string[] = [];
    const stop = locks.onChange('n1', () => {
      woken.push('n1');
    });
    locks.onChange('n2', () => {
      woken.push('n2');
    });
    locks.notify('n1');
    locks.notifyHolder('team-a', 'train-0');
    locks.notifyHolder('team-b', 'train-1');
    stop();
    locks.notify('n1');
    expect(woken).to.deep.equal(['n1', 'n1']);
  });
});
