import { expect } from 'chai';
import { NOT_A_CANDIDATE, packingTargets as plan, type PlanCandidates } from '../../../src/extender/packing-plan.js';

/** The plan of candidates written as a list of { node, utilization }. */
const packingTargets = (
  list: readonly { node: string; utilization: number }[],
  pending: number,
  roomOn: (node: string) => number,
): Set<string> => {
  const candidates: PlanCandidates = {
    nodes: list.map(({ node }) => node),
    utilizations: list.map(({ utilization }) => utilization),
  };
  return plan(candidates, pending, roomOn);
};

describe('packingTargets (binpack: the nodes a burst fills now)', () => {
  const rooms: Record<string, number> = { a: 10, b: 10, c: 4, d: 10 };
  const roomOn = (node: string) => rooms[node] ?? 0;

  it('takes the fullest nodes first, name order among equals, until their room holds the pending pods', () => {
    const candidates = [
      { node: 'd', utilization: 0.1 },
      { node: 'b', utilization: 0.1 },
      { node: 'c', utilization: 0.6 },
      { node: 'a', utilization: 0.1 },
    ];
    expect([...packingTargets(candidates, 1, roomOn)]).to.deep.equal(['c']);
    expect([...packingTargets(candidates, 4, roomOn)]).to.deep.equal(['c']);
    expect([...packingTargets(candidates, 5, roomOn)]).to.deep.equal(['c', 'a']);
    expect([...packingTargets(candidates, 14, roomOn)]).to.deep.equal(['c', 'a']);
    expect([...packingTargets(candidates, 15, roomOn)]).to.deep.equal(['c', 'a', 'b']);
    expect([...packingTargets(candidates, 1000, roomOn)]).to.deep.equal(['c', 'a', 'b', 'd']);
  });

  it('gives the same plan whatever order the names come in', () => {
    const forward = [
      { node: 'a', utilization: 0 },
      { node: 'b', utilization: 0 },
      { node: 'd', utilization: 0 },
    ];
    expect([...packingTargets([...forward].reverse(), 12, roomOn)]).to.deep.equal([
      ...packingTargets(forward, 12, roomOn),
    ]);
  });

  it('skips a node without room and plans nothing without candidates', () => {
    expect([
      ...packingTargets(
        [
          { node: 'x', utilization: 0.9 },
          { node: 'a', utilization: 0 },
        ],
        3,
        roomOn,
      ),
    ]).to.deep.equal(['a']);
    expect(packingTargets([], 3, roomOn).size).to.equal(0);
  });

  it('never plans a node marked as no candidate, among the first picks or past them', () => {
    const full = 0.95;
    const marked = Array.from({ length: 12 }, (_, index) => ({
      node: `m${String(index).padStart(2, '0')}`,
      utilization: index % 2 === 0 ? NOT_A_CANDIDATE : index % 3 === 0 ? Number.NaN : full,
    }));
    const open = Array.from({ length: 12 }, (_, index) => ({
      node: `o${String(index).padStart(2, '0')}`,
      utilization: 0.5,
    }));
    const planned = [...packingTargets([...marked, ...open], 1000, () => 1)];
    expect(planned).to.deep.equal(
      [...marked.filter(({ utilization }) => utilization === full), ...open].map(({ node }) => node),
    );
  });

  it('past its first picks gives the plan a full sort would, in the same order', () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let round = 0; round < 50; round++) {
      const candidates = Array.from({ length: 40 }, (_, index) => ({
        node: `n${String(Math.floor(random() * 1000)).padStart(3, '0')}-${index}`,
        utilization: Math.floor(random() * 4) / 4,
      }));
      const roomOf = new Map(candidates.map(({ node }) => [node, Math.floor(random() * 3)]));
      const pending = 1 + Math.floor(random() * 40);
      const sorted = [...candidates].sort((a, b) => b.utilization - a.utilization || (a.node < b.node ? -1 : 1));
      const expected: string[] = [];
      let remaining = pending;
      for (const { node } of sorted) {
        if (remaining <= 0) break;
        const room = roomOf.get(node) ?? 0;
        if (room > 0) {
          expected.push(node);
          remaining -= room;
        }
      }
      expect([...packingTargets(candidates, pending, (node) => roomOf.get(node) ?? 0)]).to.deep.equal(expected);
    }
  });
});
