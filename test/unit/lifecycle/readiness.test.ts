import { expect } from 'chai';
import { Readiness } from '../../../src/lifecycle/readiness.js';

describe('Readiness (one answer for every listener)', () => {
  it('is not ready while starting or stopping, and names every part that has a problem', () => {
    const readiness = new Readiness();
    let cache: string[] = ['nodes not listed yet', 'apiserver unreachable (nodes list): connect ECONNREFUSED'];
    let lease: string[] = [];
    readiness.add('webhook', () => []);
    readiness.add('cluster cache', () => cache);
    readiness.add('leader election', () => lease);
    expect(readiness.state().reasons).to.deep.equal([
      'starting up',
      'cluster cache: nodes not listed yet',
      'cluster cache: apiserver unreachable (nodes list): connect ECONNREFUSED',
    ]);
    readiness.set('serving');
    cache = [];
    lease = ['namespace "nope" (POD_NAMESPACE) does not exist'];
    expect(readiness.state()).to.deep.equal({
      ready: false,
      reasons: ['leader election: namespace "nope" (POD_NAMESPACE) does not exist'],
    });
    lease = [];
    expect(readiness.state()).to.deep.equal({ ready: true, reasons: [] });
    readiness.set('stopping');
    expect(readiness.state()).to.deep.equal({ ready: false, reasons: ['shutting down'] });
  });

  it('keeps each reason on one short line, and a check that throws counts as a problem', () => {
    const readiness = new Readiness();
    readiness.set('serving');
    readiness.add('cache', () => [`line one\nline two ${'x'.repeat(5_000)}`]);
    readiness.add('broken', () => {
      throw new Error('oops');
    });
    const { ready, reasons } = readiness.state();
    expect(ready).to.equal(false);
    expect(reasons[0]).to.match(/^cache: line one line two x+…$/);
    expect(reasons[0]?.length).to.be.at.most(301);
    expect(reasons[1]).to.equal('broken: check failed: oops');
  });
});
