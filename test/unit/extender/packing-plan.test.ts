import { expect } from 'chai';
import { packingTargets } from '../../../src/extender/packing-plan.js';

describe('packingTargets (binpack: the nodes a burst fills now)', () => {
  const rooms: Record<string, number> = { a: 10, b: 10, c: 4, d: 10 };
  const roomOn = (node: string) => rooms[node] ?? 0;

  it('takes the fullest nodes first, name order among equals, until their room holds the pending pods', () => {
    const candidates = [{ node: 'd', utilization: 0.1 }, { node: 'b', utilization: 0.1 }, { node: 'c', utilization: 0.6 }, { node: 'a', utilization: 0.1 }];
    expect([...packingTargets(candidates, 1, roomOn)]).to.deep.equal(['c']);
    expect([...packingTargets(candidates, 4, roomOn)]).to.deep.equal(['c']);
    expect([...packingTargets(candidates, 5, roomOn)]).to.deep.equal(['c', 'a']);
    expect([...packingTargets(candidates, 14, roomOn)]).to.deep.equal(['c', 'a']);
    expect([...packingTargets(candidates, 15, roomOn)]).to.deep.equal(['c', 'a', 'b']);
    expect([...packingTargets(candidates, 1000, roomOn)]).to.deep.equal(['c', 'a', 'b', 'd']);
  });

  it('gives the same plan whatever order the names come in', () => {
    const forward = [{ node: 'a', utilization: 0 }, { node: 'b', utilization: 0 }, { node: 'd', utilization: 0 }];
    expect([...packingTargets([...forward].reverse(), 12, roomOn)]).to.deep.equal([...packingTargets(forward, 12, roomOn)]);
  });

  it('skips a node without room and plans nothing without candidates', () => {
    expect([...packingTargets([{ node: 'x', utilization: 0.9 }, { node: 'a', utilization: 0 }], 3, roomOn)]).to.deep.equal(['a']);
    expect(packingTargets([], 3, roomOn).size).to.equal(0);
  });
});
