import { expect } from 'chai';
import { OFFER_MS, SpreadOffers, spreadTarget, type SpreadCandidate } from '../../../src/extender/spread-target.js';

const names = ['a', 'b', 'c', 'd'];
const targetOf = (candidates: (SpreadCandidate | undefined)[], offered: string[] = []) =>
  names[
    spreadTarget(
      names,
      (index) => candidates[index],
      (node) => offered.filter((name) => name === node).length,
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

  it('counts each pod a node was offered to as one more pod like this one', () => {
    // Equal nodes: the one nobody was offered.
    expect(targetOf([fits(0), fits(0), fits(0.1), fits(0)], ['a', 'b'])).to.equal('d');
    // The pod's share is 0.1 (the emptiest node with it placed): a with one offer ranks as 0.2.
    expect(targetOf([fits(0.1), fits(0.25), undefined, undefined], ['a'])).to.equal('a');
    expect(targetOf([fits(0.1), fits(0.15), undefined, undefined], ['a'])).to.equal('b');
    // Many binds in flight onto few nodes (a burst): the offers keep them even.
    expect(targetOf([fits(0.1), fits(0.1), fits(0.1), fits(0.1)], ['a', 'a', 'b', 'c', 'c', 'd'])).to.equal('b');
  });

  it('names none when nothing fits', () => {
    expect(
      spreadTarget(
        names,
        () => ({ fits: false, utilization: 0, lockBusy: false }),
        () => 0,
      ),
    ).to.equal(-1);
    expect(
      spreadTarget(
        [],
        () => undefined,
        () => 0,
      ),
    ).to.equal(-1);
  });

  it('remembers an offer for OFFER_MS, for other pods only, one per pod, until the store counts the pod', () => {
    const offers = new SpreadOffers();
    const none = () => false;
    offers.offer('a', 'uid-1', 1000);
    expect(offers.offersToOthers('a', 'uid-2', 1000 + OFFER_MS - 1, none)).to.equal(1);
    expect(offers.offersToOthers('a', 'uid-1', 1000, none)).to.equal(0);
    expect(offers.offersToOthers('a', 'uid-2', 1000 + OFFER_MS, none)).to.equal(0);
    expect(offers.offersToOthers('a', 'uid-2', 1000, (uid) => uid === 'uid-1')).to.equal(0);
    offers.offer('a', 'uid-2', 1000);
    expect(offers.offersToOthers('a', 'uid-3', 1000, none)).to.equal(2);
    // A pod offered another node holds only that one.
    offers.offer('b', 'uid-1', 1000);
    expect(offers.offersToOthers('a', 'uid-3', 1000, none)).to.equal(1);
    expect(offers.offersToOthers('b', 'uid-3', 1000, none)).to.equal(1);
    // Expired offers are forgotten as new ones come.
    offers.offer('c', 'uid-9', 1000 + OFFER_MS);
    expect(offers.offersToOthers('a', 'uid-3', 1000, none)).to.equal(0);
    expect(offers.offersToOthers('c', 'uid-3', 1000 + OFFER_MS, none)).to.equal(1);
  });
});
