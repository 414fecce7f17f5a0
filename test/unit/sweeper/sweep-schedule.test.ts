import { expect } from 'chai';
import type { ConditionalReleaseResult } from '../../../src/lock/lock-events.js';
import type { SweepReport } from '../../../src/sweeper/sweep-pass.js';
import { SweepSchedule } from '../../../src/sweeper/sweep-schedule.js';

describe('SweepSchedule: a runnable that needs a leader', () => {
  it('sweeps within the term: its end aborts the release in flight and abandons the pass', async () => {
    const reports: SweepReport[] = [];
    const signals: (AbortSignal | undefined)[] = [];
    const term = new AbortController();
    const sweeper = new SweepSchedule({
      schedule: '0 0 1 1 *',
      targets: { lockedNodes: () => ['gpu-1', 'gpu-2'] },
      locks: {
        releaseIfReleasable: (_node, _path, options) => {
          signals.push(options?.signal);
          term.abort(new Error('lease lost'));
          return Promise.reject(new Error('aborted'));
        },
      },
      concurrency: 1,
      onReport: (report) => reports.push(report),
    });
    expect(sweeper.needsLeader).to.equal(true);
    await sweeper.tick(term.signal);
    expect(signals).to.deep.equal([term.signal]);
    expect(reports).to.have.length(1);
    expect(reports[0]?.abandoned).to.equal(true);
    expect(reports[0]?.errors, 'an aborted release is no error').to.deep.equal([]);
    await sweeper.tick(term.signal);
    expect(reports, 'no pass once the term has ended').to.have.length(1);
  });

  it('start runs until its signal aborts, then resolves', async () => {
    const sweeper = new SweepSchedule({
      schedule: '0 0 1 1 *',
      targets: { lockedNodes: () => [] },
      locks: {
        releaseIfReleasable: () => Promise.resolve<ConditionalReleaseResult>({ outcome: 'not-locked', node: 'n' }),
      },
      concurrency: 1,
    });
    const term = new AbortController();
    let stopped = false;
    const running = sweeper.start(term.signal).then(() => {
      stopped = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(stopped).to.equal(false);
    term.abort();
    await running;
    expect(stopped).to.equal(true);
  });
});
