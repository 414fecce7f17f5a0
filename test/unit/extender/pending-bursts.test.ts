import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { DEFAULT_REQUEST_DEFAULTS } from '../../../src/devices/requests.js';
import { pendingBurstKey, PendingBursts } from '../../../src/extender/pending-bursts.js';

const defaults = { nodePolicy: 'binpack', gpuPolicy: 'spread', requestDefaults: DEFAULT_REQUEST_DEFAULTS } as const;

function pod(
  name: string,
  memoryMiB: number,
  extra: { nodeName?: string; phase?: string; deleting?: boolean; schedulerName?: string } = {},
): V1Pod {
  return {
    metadata: {
      name,
      namespace: 'ns',
      uid: `uid-${name}`,
      ...(extra.deleting ? { deletionTimestamp: new Date() } : {}),
    },
    spec: {
      ...(extra.nodeName ? { nodeName: extra.nodeName } : {}),
      ...(extra.schedulerName ? { schedulerName: extra.schedulerName } : {}),
      containers: [
        { name: 'c', resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': String(memoryMiB) } } },
      ],
    },
    status: { phase: extra.phase ?? 'Pending' },
  };
}

describe('PendingBursts (GPU pods still waiting for a node, by burst)', () => {
  const build = () => new PendingBursts((candidate) => pendingBurstKey(candidate, defaults));
  const keyOf = (candidate: V1Pod) => pendingBurstKey(candidate, defaults) ?? '';
  const nothingPlaced = () => false;

  it('counts the pending pods of one shape and scheduler, and no others', () => {
    const bursts = build();
    for (const name of ['a', 'b', 'c']) bursts.observe(pod(name, 2000), 'add');
    bursts.observe(pod('other-shape', 3000), 'add');
    bursts.observe(pod('other-scheduler', 2000, { schedulerName: 'elsewhere' }), 'add');
    bursts.observe({ metadata: { name: 'cpu', uid: 'uid-cpu' }, spec: { containers: [{ name: 'c' }] } }, 'add');
    expect(bursts.count(keyOf(pod('a', 2000)), nothingPlaced, 100)).to.equal(3);
    expect(bursts.count(keyOf(pod('x', 3000)), nothingPlaced, 100)).to.equal(1);
    expect(bursts.size).to.equal(5);
  });

  it('drops a pod once bound, ended, being deleted or deleted', () => {
    const bursts = build();
    for (const name of ['a', 'b', 'c', 'd', 'e']) bursts.observe(pod(name, 2000), 'add');
    bursts.observe(pod('a', 2000, { nodeName: 'n1' }), 'update');
    bursts.observe(pod('b', 2000, { phase: 'Failed' }), 'update');
    bursts.observe(pod('c', 2000, { deleting: true }), 'update');
    bursts.observe(pod('d', 2000), 'delete');
    expect(bursts.count(keyOf(pod('e', 2000)), nothingPlaced, 100)).to.equal(1);
    expect(bursts.size).to.equal(1);
  });

  it('leaves out pods already placed (assumed by a bind in flight), stops at the limit, and never says less than 1', () => {
    const bursts = build();
    for (let index = 0; index < 50; index++) bursts.observe(pod(`r${index}`, 2000), 'add');
    const key = keyOf(pod('r0', 2000));
    expect(bursts.count(key, (uid) => uid === 'uid-r1' || uid === 'uid-r2', 100)).to.equal(48);
    expect(bursts.count(key, nothingPlaced, 10)).to.equal(10);
    expect(bursts.count('no such burst', nothingPlaced, 10)).to.equal(1);
  });

  it('moves a pod whose shape changed to its new burst', () => {
    const bursts = build();
    for (const name of ['a', 'b']) bursts.observe(pod(name, 2000), 'add');
    bursts.observe(pod('c', 4000), 'add');
    bursts.observe(pod('a', 4000), 'update');
    expect(bursts.count(keyOf(pod('x', 4000)), nothingPlaced, 100)).to.equal(2);
    expect(
      bursts.count(keyOf(pod('x', 2000)), (uid) => uid === 'uid-b', 100),
      'a is no longer in the 2000 MiB burst',
    ).to.equal(1);
    bursts.observe(pod('b', 2000), 'delete');
    expect(bursts.size).to.equal(2);
  });
});
