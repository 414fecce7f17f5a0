import { expect } from 'chai';
import { OFFER_MS, SpreadOffers, spreadTarget, type SpreadCandidate } from '../../../src/extender/spread-target.js';

const names = ['a', 'b', 'c', 'd'];
const targetOf = (candidates: (SpreadCandidate | undefined)[], offered: string[] = []) =>
  names[
    spreadTarget(
      names,
      (index) => candidates[index],
      (node) => offered.includes(node),
    )
  ];
const fits = (utilization: number, lockBusy = false): SpreadCandidate => ({ fits: true, utilization, lockBusy });

describe('spread target (one node per pod of a burst)', () => {
  it('takes the least utilised node, name order among equals', () => {
    expect(targetOf([fits(0.5), fits(0.2), fits(0.2), fits(0.3)])).to.equal('b');
  });

  it('takes a node with a free lock before a busy one, however full', () => {
    expect(targetOf([fits(0, true), fits(0.9), fits(0.1, true), undefined])).to.equal('b');
    expect(targetOf([fits(0.2, true), fits(0.1, true), undefined, undefined])).to.equal('b');
  });

  it('takes a node offered to another pod only after the equally full ones nobody was offered, not after fuller ones', () => {
    expect(targetOf([fits(0), fits(0), fits(0.1), fits(0)], ['a', 'b'])).to.equal('d');
    expect(targetOf([fits(0), fits(0), fits(0.1), undefined], ['a', 'b'])).to.equal('a');
  });

  it('names none when nothing fits', () => {
    expect(
      spreadTarget(
        names,
        () => ({ fits: false, utilization: 0, lockBusy: false }),
        () => false,
      ),
    ).to.equal(-1);
    expect(
      spreadTarget(
        [],
        () => undefined,
        () => false,
      ),
    ).to.equal(-1);
  });

  it('remembers an offer for OFFER_MS, for other pods only, and forgets expired ones', () => {
    const offers = new SpreadOffers();
    offers.offer('a', 'uid-1', 1000);
    expect(offers.offeredToOther('a', 'uid-2', 1000 + OFFER_MS - 1)).to.equal(true);
    expect(offers.offeredToOther('a', 'uid-1', 1000)).to.equal(false);
    expect(offers.offeredToOther('a', 'uid-2', 1000 + OFFER_MS)).to.equal(false);
    offers.offer('b', 'uid-2', 1000 + OFFER_MS);
    expect(offers.offeredToOther('a', 'uid-3', 1000)).to.equal(false);
    expect(offers.offeredToOther('b', 'uid-3', 1000 + OFFER_MS)).to.equal(true);
  });
});
