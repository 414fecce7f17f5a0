import { expect } from 'chai';
import { isPendingGpuPod, PendingPods } from '../../../src/local/pending-pods.js';

function pod(
  name: string,
  options: { gpu?: boolean; nodeName?: string; phase?: string; deleting?: boolean; created?: string } = {},
) {
  return {
    metadata: {
      name,
      namespace: 'default',
      uid: `uid-${name}`,
      creationTimestamp: options.created ?? '2026-12-01T10:00:00Z',
      ...(options.deleting ? { deletionTimestamp: '2026-12-01T10:01:00Z' } : {}),
    },
    spec: {
      ...(options.nodeName === undefined ? {} : { nodeName: options.nodeName }),
      containers: [
        { name: 'c', resources: { limits: options.gpu === false ? { cpu: '1' } : { 'nvidia.com/gpu': '1' } } },
      ],
    },
    status: { phase: options.phase ?? 'Pending' },
  };
}

describe('live view pending GPU pods', () => {
  it('counts unbound GPU pods only: not bound, finished, deleting or non-GPU ones', () => {
    expect(isPendingGpuPod(pod('a'))).to.equal(true);
    expect(isPendingGpuPod(pod('b', { nodeName: 'gpu-node-1' }))).to.equal(false);
    expect(isPendingGpuPod(pod('c', { phase: 'Failed' }))).to.equal(false);
    expect(isPendingGpuPod(pod('d', { deleting: true }))).to.equal(false);
    expect(isPendingGpuPod(pod('e', { gpu: false }))).to.equal(false);
  });

  it('follows adds, binds and deletes, oldest first', () => {
    const pending = new PendingPods();
    pending.apply(pod('young', { created: '2026-12-01T10:05:00Z' }), 'add');
    pending.apply(pod('old', { created: '2026-12-01T10:00:00Z' }), 'add');
    pending.apply(pod('bound'), 'add');
    // "bound" and "old" were created in the same second: by name.
    expect(pending.list().map((p) => p.name)).to.deep.equal(['bound', 'old', 'young']);
    pending.apply(pod('bound', { nodeName: 'gpu-node-1' }), 'update');
    pending.apply(pod('young'), 'delete');
    expect(pending.list().map((p) => p.name)).to.deep.equal(['old']);
    expect(pending.list()[0]?.createdAt?.toISOString()).to.equal('2026-12-01T10:00:00.000Z');
  });
});
