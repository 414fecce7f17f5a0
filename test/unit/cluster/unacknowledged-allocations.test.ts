import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { kubeletRegistered, UnacknowledgedAllocations } from '../../../src/cluster/unacknowledged-allocations.js';
import { nodeAwaitingAcknowledgement } from '../../../src/lock/kubelet-acknowledgement.js';

function pod(
  fields: {
    uid?: string;
    node?: string;
    bindPhase?: string;
    phase?: string;
    startTime?: Date;
    deleting?: boolean;
  } = {},
): V1Pod {
  return {
    metadata: {
      name: 'p',
      namespace: 'ns',
      uid: fields.uid ?? 'uid-1',
      ...(fields.bindPhase === undefined ? {} : { annotations: { 'hami.io/bind-phase': fields.bindPhase } }),
      ...(fields.deleting === true ? { deletionTimestamp: new Date() } : {}),
    },
    spec: { containers: [], ...(fields.node === undefined ? {} : { nodeName: fields.node }) },
    status: {
      ...(fields.phase === undefined ? {} : { phase: fields.phase }),
      ...(fields.startTime === undefined ? {} : { startTime: fields.startTime }),
    },
  };
}

describe('unacknowledged allocations (pods past the lock that kubelet has not acknowledged)', () => {
  it('a bound HAMi-placed pod without startTime awaits acknowledgement in every bind phase, deleting or not', () => {
    for (const bindPhase of ['allocating', 'success', 'failed']) {
      expect(nodeAwaitingAcknowledgement(pod({ node: 'n1', bindPhase })), bindPhase).to.equal('n1');
    }
    // A restarted kubelet admits a terminating pod it has not synced yet.
    expect(nodeAwaitingAcknowledgement(pod({ node: 'n1', bindPhase: 'success', deleting: true }))).to.equal('n1');
  });

  it('startTime, a terminal phase, no node or no bind-phase: nothing to wait for', () => {
    expect(nodeAwaitingAcknowledgement(pod({ node: 'n1', bindPhase: 'success', startTime: new Date() }))).to.equal(
      undefined,
    );
    expect(nodeAwaitingAcknowledgement(pod({ node: 'n1', bindPhase: 'success', phase: 'Failed' }))).to.equal(undefined);
    expect(nodeAwaitingAcknowledgement(pod({ node: 'n1', bindPhase: 'success', phase: 'Succeeded' }))).to.equal(
      undefined,
    );
    expect(nodeAwaitingAcknowledgement(pod({ bindPhase: 'allocating' }))).to.equal(undefined);
    expect(nodeAwaitingAcknowledgement(pod({ node: '', bindPhase: 'allocating' }))).to.equal(undefined);
    expect(nodeAwaitingAcknowledgement(pod({ node: 'n1' })), 'not placed by a HAMi-style bind').to.equal(undefined);
  });

  it('a node counts as having a kubelet only when it reports a kubelet version', () => {
    expect(kubeletRegistered({ status: { nodeInfo: { kubeletVersion: 'v1.34.4' } } } as never)).to.equal(true);
    expect(kubeletRegistered({ status: { nodeInfo: { kubeletVersion: '' } } } as never)).to.equal(false);
    expect(kubeletRegistered({ status: {} })).to.equal(false);
    expect(kubeletRegistered(undefined)).to.equal(false);
  });

  it("tracks each pod on its node from first sight, reports the node it leaves, and ages entries out by the caller's bound", () => {
    let now = 1000;
    const index = new UnacknowledgedAllocations(() => now);
    expect(index.upsert(pod({ uid: 'a', node: 'n1', bindPhase: 'allocating' }))).to.equal(undefined);
    now = 1500;
    // An update that still awaits keeps the first-seen time.
    expect(index.upsert(pod({ uid: 'a', node: 'n1', bindPhase: 'success' }))).to.equal(undefined);
    index.upsert(pod({ uid: 'b', node: 'n1', bindPhase: 'success' }));
    expect(index.waiting('n1', 10_000).map((entry) => [entry.uid, entry.sinceMs])).to.deep.equal([
      ['a', 1000],
      ['b', 1500],
    ]);
    expect(index.waiting('n1', 10_000, 'a').map((entry) => entry.uid)).to.deep.equal(['b']);
    expect(index.sinceMs('a')).to.equal(1000);
    now = 1000 + 700;
    expect(
      index.waiting('n1', 600).map((entry) => entry.uid),
      'a is older than the bound',
    ).to.deep.equal(['b']);

    expect(index.upsert(pod({ uid: 'a', node: 'n1', bindPhase: 'success', startTime: new Date() }))).to.equal('n1');
    expect(index.sinceMs('a')).to.equal(undefined);
    expect(index.remove('b')).to.equal('n1');
    expect(index.remove('b')).to.equal(undefined);
    expect(index.waiting('n1', 10_000)).to.deep.equal([]);
  });
});
