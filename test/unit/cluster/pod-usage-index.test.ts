import { expect } from 'chai';
import { PodUsageIndex } from '../../../src/cluster/pod-usage-index.js';
import { encodeAllocation, MISSING_FIELDS_ERROR } from '../../../src/devices/allocation-codec.js';
import { ALLOCATED_ANNOTATION } from '../../../src/hami/wire.js';

function pod(uid: string, node: string, mem: number, extra: { phase?: string; gpu?: string } = {}) {
  return {
    metadata: {
      uid,
      namespace: 'ns',
      name: uid,
      annotations: {
        'hami.io/vgpu-node': node,
        [ALLOCATED_ANNOTATION]: encodeAllocation([
          [{ uuid: extra.gpu ?? 'GPU-a', type: 'NVIDIA', memoryMiB: mem, cores: 10 }],
        ]),
      },
    },
    spec: { nodeName: node },
    status: { phase: extra.phase ?? 'Pending' },
  };
}

describe('PodUsageIndex', () => {
  it('sums bound pods per node and leaves out the pod being placed', () => {
    const index = new PodUsageIndex();
    index.upsert(pod('a', 'n1', 1000));
    index.upsert(pod('b', 'n1', 2000));
    index.upsert(pod('c', 'n2', 4000));
    expect(index.usageOn('n1').get('GPU-a')).to.deep.equal({ slots: 2, memoryMiB: 3000, cores: 20 });
    expect(index.usageOn('n1', 'a').get('GPU-a')?.memoryMiB).to.equal(2000);
    expect(index.usageOn('n2').get('GPU-a')?.memoryMiB).to.equal(4000);
  });

  it('counts an assumed bind until the informer delivers the pod, without counting it twice', () => {
    const index = new PodUsageIndex();
    index.assume('a', 'n1', new Map([['GPU-a', { slots: 1, memoryMiB: 1000, cores: 10 }]]));
    expect(index.usageOn('n1').get('GPU-a')?.memoryMiB).to.equal(1000);
    index.upsert(pod('a', 'n1', 1000));
    expect(index.isAssumed('a')).to.equal(false);
    expect(index.usageOn('n1').get('GPU-a')?.memoryMiB).to.equal(1000);
  });

  it('nodesOf names where a pod is accounted: bound, assumed elsewhere, both, or nowhere', () => {
    const index = new PodUsageIndex();
    index.upsert(pod('a', 'n1', 1000));
    index.assume('b', 'n2', new Map([['GPU-a', { slots: 1, memoryMiB: 1000, cores: 10 }]]));
    index.assume('a', 'n3', new Map([['GPU-a', { slots: 1, memoryMiB: 1000, cores: 10 }]]));
    expect([index.nodesOf('a'), index.nodesOf('b'), index.nodesOf('c')]).to.deep.equal([['n1', 'n3'], ['n2'], []]);
    expect(
      index.nodesOf('a').every((node) => index.isOn(node, 'a')),
      'agrees with isOn',
    ).to.equal(true);
  });

  it('forgets failed assumptions, expired ones, finished and deleted pods, and pods that move', () => {
    let now = 0;
    const index = new PodUsageIndex(() => now, 1000);
    index.assume('x', 'n1', new Map([['GPU-a', { slots: 1, memoryMiB: 500, cores: 0 }]]));
    index.forget('x');
    index.assume('y', 'n1', new Map([['GPU-a', { slots: 1, memoryMiB: 500, cores: 0 }]]));
    now = 2000;
    index.upsert(pod('done', 'n1', 700, { phase: 'Succeeded' }));
    index.upsert(pod('gone', 'n1', 800));
    index.remove('gone');
    index.upsert(pod('moved', 'n1', 900));
    index.upsert(pod('moved', 'n2', 900));
    expect(index.usageOn('n1').size).to.equal(0);
    expect(index.podsOn('n1')).to.deep.equal([]);
    expect(index.usageOn('n2').get('GPU-a')?.memoryMiB).to.equal(900);
  });

  describe('a pod whose allocation annotation cannot be decoded (never counted as using nothing)', () => {
    const capacity = new Map([
      ['GPU-a', { slots: 4, memoryMiB: 16_000, cores: 100 }],
      ['GPU-b', { slots: 4, memoryMiB: 16_000, cores: 100 }],
    ]);
    const withUnreadable = <T extends ReturnType<typeof pod>>(base: T, value = 'GPU-a,NVIDIA,1000,130:;'): T => ({
      ...base,
      metadata: { ...base.metadata, annotations: { ...base.metadata.annotations, [ALLOCATED_ANNOTATION]: value } },
    });

    it('counts its last readable allocation, reports it once per value, and follows it when readable again', () => {
      const index = new PodUsageIndex(undefined, undefined, undefined, () => capacity);
      index.upsert(pod('a', 'n1', 1000));
      const problem = index.upsert(withUnreadable(pod('a', 'n1', 1000)));
      expect(problem).to.equal(
        'pod ns/a: unreadable hami.io/vgpu-devices-allocated (container 0, device 0: cores "130" of "GPU-a" is not an integer in 0..100); counted as its last readable allocation',
      );
      expect(index.usageOn('n1').get('GPU-a')).to.deep.equal({ slots: 1, memoryMiB: 1000, cores: 10 });
      expect(index.usageOn('n1').has('GPU-b')).to.equal(false);
      // Another update of the pod (status, labels) with the same value: counted the same, not reported again.
      expect(index.upsert(withUnreadable(pod('a', 'n1', 1000, { phase: 'Running' })))).to.equal(undefined);
      // A second unreadable value still counts the last readable one.
      expect(index.upsert(withUnreadable(pod('a', 'n1', 1000), 'junk,x;'))).to.include(
        'counted as its last readable allocation',
      );
      expect(index.usageOn('n1').get('GPU-a')?.memoryMiB).to.equal(1000);
      expect(index.unreadable()).to.deep.equal([
        {
          uid: 'a',
          node: 'n1',
          pod: 'ns/a',
          problem: `container 0, device 0: ${MISSING_FIELDS_ERROR} ("junk,x")`,
          counted: 'last-readable',
        },
      ]);
      index.upsert(pod('a', 'n1', 3000));
      expect(index.usageOn('n1').get('GPU-a')?.memoryMiB).to.equal(3000);
      expect(index.unreadable()).to.deep.equal([]);
    });

    it('counts the allocation our bind assumed when the first value the informer delivers is unreadable', () => {
      const index = new PodUsageIndex(undefined, undefined, undefined, () => capacity);
      index.assume('a', 'n1', new Map([['GPU-b', { slots: 1, memoryMiB: 700, cores: 5 }]]));
      expect(index.upsert(withUnreadable(pod('a', 'n1', 1000)))).to.include('counted as its last readable allocation');
      expect(index.isAssumed('a')).to.equal(false);
      expect(index.usageOn('n1').get('GPU-b')).to.deep.equal({ slots: 1, memoryMiB: 700, cores: 5 });
    });

    it('never readable: takes every GPU of its node until it is gone, except for its own placement', () => {
      const index = new PodUsageIndex(undefined, undefined, undefined, (node) =>
        node === 'n1' ? capacity : new Map(),
      );
      index.upsert(pod('b', 'n1', 2000));
      expect(index.upsert(withUnreadable(pod('a', 'n1', 1000)))).to.include('counted as using every GPU of node n1');
      expect(index.usageOn('n1')).to.deep.equal(
        new Map([
          ['GPU-a', { slots: 4, memoryMiB: 16_000, cores: 100 }],
          ['GPU-b', { slots: 4, memoryMiB: 16_000, cores: 100 }],
        ]),
      );
      expect(index.usageOn('n1', 'a').get('GPU-a')?.memoryMiB).to.equal(2000);
      expect(index.usageOn('n2').size).to.equal(0);
      expect(index.unreadable()).to.deep.include.members([
        {
          uid: 'a',
          node: 'n1',
          pod: 'ns/a',
          problem: 'container 0, device 0: cores "130" of "GPU-a" is not an integer in 0..100',
          counted: 'whole-node',
        },
      ]);
      index.upsert(pod('a', 'n1', 1000, { phase: 'Succeeded' }));
      expect(index.usageOn('n1').get('GPU-a')?.memoryMiB).to.equal(2000);
      expect(index.unreadable()).to.deep.equal([]);
    });

    it("a pod that moves to another node with an unreadable value takes that whole node (its last allocation named the old one's GPUs)", () => {
      const index = new PodUsageIndex(undefined, undefined, undefined, () => capacity);
      index.upsert(pod('a', 'n1', 1000));
      expect(index.upsert(withUnreadable(pod('a', 'n2', 1000)))).to.include('every GPU of node n2');
      expect(index.usageOn('n1').size).to.equal(0);
      expect(index.usageOn('n2').get('GPU-b')?.slots).to.equal(4);
    });

    it('a deleted pod frees what it was counted as', () => {
      const index = new PodUsageIndex(undefined, undefined, undefined, () => capacity);
      index.upsert(withUnreadable(pod('a', 'n1', 1000)));
      index.remove('a');
      expect(index.usageOn('n1').size).to.equal(0);
      expect(index.unreadable()).to.deep.equal([]);
    });
  });
});
