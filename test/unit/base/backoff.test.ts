import { expect } from 'chai';
import { Backoff } from '../../../src/base/backoff.js';

describe('Backoff (the one backoff: client-go wait.Backoff as a value)', () => {
  it('grows each pause by the factor up to the cap, counts the pauses, and starts over on reset', () => {
    const backoff = new Backoff({ initialMs: 100, factor: 2, capMs: 500 });
    expect([backoff.next(), backoff.next(), backoff.next(), backoff.next(), backoff.next()]).to.deep.equal([
      100, 200, 400, 500, 500,
    ]);
    expect(backoff.steps).to.equal(5);
    backoff.reset();
    expect(backoff.steps).to.equal(0);
    expect(backoff.next()).to.equal(100);
  });

  it('adds up to `jitter` of a pause at random, and no pause passes the cap even with jitter', () => {
    const top = new Backoff({ initialMs: 100, factor: 1.5, capMs: 180, jitter: 0.5 }, () => 1);
    expect([top.next(), top.next(), top.next()]).to.deep.equal([150, 180, 180]);
    const bottom = new Backoff({ initialMs: 100, factor: 1.5, capMs: 180, jitter: 0.5 }, () => 0);
    expect([bottom.next(), bottom.next(), bottom.next()]).to.deep.equal([100, 150, 180]);
  });
});
