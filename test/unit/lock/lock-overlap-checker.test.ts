import { expect } from 'chai';
import { findOverlaps } from '../../support/lock-overlap.js';

// The checker used by the two-process integration test must itself be able to fail.
describe('lock overlap checker', () => {
  it('accepts back-to-back sections and sections on different nodes', () => {
    expect(
      findOverlaps([
        { holder: 'a', node: 'n1', acquiredRv: '10', releasedRv: '12' },
        { holder: 'b', node: 'n1', acquiredRv: '13', releasedRv: '15' },
        { holder: 'b', node: 'n2', acquiredRv: '11', releasedRv: '14' },
      ]),
    ).to.deep.equal([]);
  });

  it('reports a take inside another holder section on the same node', () => {
    expect(
      findOverlaps([
        { holder: 'a', node: 'n1', acquiredRv: '10', releasedRv: '20' },
        { holder: 'b', node: 'n1', acquiredRv: '15', releasedRv: '25' },
      ]),
    ).to.deep.equal(['n1: b took the lock at 15 while a held it (10..20)']);
  });

  it('compares resourceVersions as numbers, not strings', () => {
    expect(
      findOverlaps([
        { holder: 'a', node: 'n1', acquiredRv: '9', releasedRv: '100' },
        { holder: 'b', node: 'n1', acquiredRv: '10', releasedRv: '11' },
      ]),
    ).to.have.length(1);
  });
});
