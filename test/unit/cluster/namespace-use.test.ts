import { expect } from 'chai';
import { PodUsageIndex } from '../../../src/cluster/pod-usage-index.js';
import { encodeAllocation } from '../../../src/devices/allocation-codec.js';
import { ALLOCATED_ANNOTATION } from '../../../src/hami/wire.js';

function pod(
  uid: string,
  namespace: string,
  mem: number,
  extra: { phase?: string; node?: string; annotation?: string } = {},
) {
  const node = extra.node ?? 'n1';
  return {
    metadata: {
      uid,
      namespace,
      name: uid,
      annotations: {
        'hami.io/vgpu-node': node,
        [ALLOCATED_ANNOTATION]:
          extra.annotation ?? encodeAllocation([[{ uuid: 'GPU-a', type: 'NVIDIA', memoryMiB: mem, cores: 10 }]]),
      },
    },
    spec: { nodeName: node },
    status: { phase: extra.phase ?? 'Running' },
  };
}
const share = (memoryMiB: number) => new Map([['GPU-a', { slots: 1, memoryMiB, cores: 10 }]]);

describe('PodUsageIndex: what a namespace uses (the GPU quota check)', () => {
  it("sums the namespace's bound pods over every node, other namespaces apart", () => {
    const index = new PodUsageIndex();
    index.upsert(pod('a', 'team-a', 1000));
    index.upsert(pod('b', 'team-a', 2000, { node: 'n2' }));
    index.upsert(pod('c', 'team-b', 4000));
    expect(index.namespaceUse('team-a')).to.deep.equal({ gpus: 2, memoryMiB: 3000, cores: 20 });
    expect(index.namespaceUse('team-b')).to.deep.equal({ gpus: 1, memoryMiB: 4000, cores: 10 });
    expect(index.namespaceUse('team-c')).to.deep.equal({ gpus: 0, memoryMiB: 0, cores: 0 });
  });

  it('leaves out the pod being placed', () => {
    const index = new PodUsageIndex();
    index.upsert(pod('a', 'team-a', 1000));
    index.upsert(pod('b', 'team-a', 2000));
    expect(index.namespaceUse('team-a', 'a').memoryMiB).to.equal(2000);
    expect(index.namespaceUse('team-a', 'zzz').memoryMiB).to.equal(3000);
  });

  it('counts a bind in flight from its assumption, and once only when the informer delivers it', () => {
    const index = new PodUsageIndex();
    index.assume('a', 'n1', share(1000), 'team-a');
    expect(index.namespaceUse('team-a').memoryMiB).to.equal(1000);
    index.upsert(pod('a', 'team-a', 1000));
    expect(index.namespaceUse('team-a').memoryMiB).to.equal(1000);
    // A second bind of a pod already in the store (a retried placement) is not counted twice either.
    index.assume('a', 'n1', share(1000), 'team-a');
    expect(index.namespaceUse('team-a').memoryMiB).to.equal(1000);
  });

  it('frees the quota when a pod finishes, is deleted, or an assumption is forgotten or expires', () => {
    let now = 0;
    const index = new PodUsageIndex(() => now, 1000);
    index.upsert(pod('done', 'team-a', 500));
    index.upsert(pod('gone', 'team-a', 700));
    index.assume('failed', 'n1', share(900), 'team-a');
    index.assume('slow', 'n1', share(300), 'team-a');
    expect(index.namespaceUse('team-a').memoryMiB).to.equal(2400);
    index.upsert(pod('done', 'team-a', 500, { phase: 'Succeeded' }));
    index.remove('gone');
    index.forget('failed');
    expect(index.namespaceUse('team-a').memoryMiB).to.equal(300);
    now = 5000;
    expect(index.namespaceUse('team-a')).to.deep.equal({ gpus: 0, memoryMiB: 0, cores: 0 });
  });

  it('follows a pod whose usage changes (its init containers finished) and an assumption without a namespace counts nowhere', () => {
    const index = new PodUsageIndex();
    const annotation = encodeAllocation([
      [{ uuid: 'GPU-a', type: 'NVIDIA', memoryMiB: 5000, cores: 0 }],
      [{ uuid: 'GPU-a', type: 'NVIDIA', memoryMiB: 1000, cores: 0 }],
    ]);
    const withInit = {
      ...pod('p', 'team-a', 0, { annotation }),
      spec: { nodeName: 'n1', initContainers: [{ name: 'init' }] },
    };
    index.upsert(withInit);
    expect(index.namespaceUse('team-a').memoryMiB).to.equal(5000);
    index.upsert({
      ...withInit,
      status: { phase: 'Running', initContainerStatuses: [{ state: { terminated: { exitCode: 0 } } }] },
    });
    expect(index.namespaceUse('team-a').memoryMiB).to.equal(1000);
    index.assume('x', 'n1', share(100));
    expect(index.namespaceUse('team-a').memoryMiB).to.equal(1000);
  });
});
