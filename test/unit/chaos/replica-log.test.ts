import { expect } from 'chai';
import { lockReleaseNote } from '../../chaos/replica-log.js';

describe('chaos replica log', () => {
  it("turns a replica's lock release and take-over lines into time-line notes", () => {
    const released = JSON.stringify({
      level: 30,
      component: 'lock',
      event: 'released',
      node: 'chaos-node-2',
      holder: 'chaos/g-74',
      value: 'v1',
      reason: 'owner-gone',
      path: 'sweeper',
      msg: 'x',
    });
    expect(lockReleaseNote(1, released)).to.deep.equal({
      subjects: ['node/chaos-node-2', 'chaos/g-74'],
      text: 'replica r1 released the lock by sweeper: owner-gone (v1)',
    });
    const external = JSON.stringify({
      component: 'lock',
      event: 'released',
      node: 'n1',
      holder: null,
      reason: 'external',
      path: 'device-plugin',
    });
    expect(lockReleaseNote(0, external)).to.deep.equal({
      subjects: ['node/n1'],
      text: 'replica r0 saw the lock go outside vgpu-warden (value unknown)',
    });
    const takeover = JSON.stringify({
      component: 'lock',
      event: 'acquired',
      outcome: 'taken-over',
      node: 'n1',
      pod: 'ns/b',
      previousHolder: 'ns/a',
      reason: 'expired',
    });
    expect(lockReleaseNote(0, takeover)?.subjects).to.deep.equal(['node/n1', 'ns/a', 'ns/b']);
  });

  it('ignores other lines, unreadable JSON and other components, and bounds each field', () => {
    expect(lockReleaseNote(0, 'plain text released')).to.equal(undefined);
    expect(lockReleaseNote(0, '{"component":"lock","event":"released"')).to.equal(undefined);
    expect(lockReleaseNote(0, JSON.stringify({ component: 'webhook', event: 'released', node: 'n1' }))).to.equal(
      undefined,
    );
    expect(
      lockReleaseNote(0, JSON.stringify({ component: 'lock', event: 'acquired', outcome: 'acquired', node: 'n1' })),
    ).to.equal(undefined);
    const long = lockReleaseNote(
      0,
      JSON.stringify({ component: 'lock', event: 'released', node: 'n1', path: 'webhook', reason: 'r'.repeat(10_000) }),
    );
    expect(long?.text.length).to.be.below(300);
  });
});
