import { expect } from 'chai';
import { PodUsageIndex } from '../../../src/cluster/pod-usage-index.js';
import { ALLOCATED_ANNOTATION, encodeAllocation } from '../../../src/devices/allocation-codec.js';

function pod(uid: string, node: string, mem: number, extra: { phase?: string; gpu?: string } = {}) {
  return {
    metadata: { uid, namespace: 'ns', name: uid, annotations: { 'hami.io/vgpu-node': node, [ALLOCATED_ANNOTATION]: encodeAllocation([[{ uuid: extra.gpu ?? 'GPU-a', type: 'NVIDIA', memoryMiB: mem, cores: 10 }]]) } },
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

  it('reports an unreadable allocation annotation and does not count it', () => {
    const index = new PodUsageIndex();
    const broken = pod('a', 'n1', 1000);
    broken.metadata.annotations[ALLOCATED_ANNOTATION] = 'GPU-a,NVIDIA;';
    expect(index.upsert(broken)).to.include('unreadable');
    expect(index.usageOn('n1').size).to.equal(0);
  });
});
