import { expect } from 'chai';
import type { ConditionalReleaseResult, SweepOutcome } from '../../../src/lock/lock-events.js';
import { sweepOnce } from '../../../src/sweeper/sweep-pass.js';

const stalled = (node: string, value: string): ConditionalReleaseResult => ({
  outcome: 'kept',
  node,
  value,
  classification: { state: 'stalled', reason: 'awaiting-allocation-past-expiry', ageMs: 600_000 },
  resourceVersion: '1',
});

/** Answers per node: a result, or an error to throw. */
function locks(answers: Record<string, ConditionalReleaseResult | Error>) {
  return {
    releaseIfReleasable: (node: string): Promise<ConditionalReleaseResult> => {
      const answer = answers[node];
      if (answer === undefined || answer instanceof Error) return Promise.reject(answer ?? new Error('unknown node'));
      return Promise.resolve(answer);
    },
  };
}

describe('sweepOnce and its observer', () => {
  it('tells the observer, after a complete pass, which locks are stalled and which nodes it could not check', async () => {
    const seen: SweepOutcome[] = [];
    const report = await sweepOnce({
      targets: { lockedNodes: () => ['gpu-1', 'gpu-2', 'gpu-3'] },
      locks: locks({
        'gpu-1': stalled('gpu-1', 'v1'),
        'gpu-2': new Error('apiserver down'),
        'gpu-3': { outcome: 'not-locked', node: 'gpu-3' },
      }),
      concurrency: 2,
      observer: {
        sweepCompleted: (outcome) => {
          seen.push(outcome);
        },
      },
    });
    expect(report.stalled).to.deep.equal([{ node: 'gpu-1', value: 'v1', ageMs: 600_000 }]);
    expect(seen).to.have.length(1);
    expect(seen[0]?.stalled.map((entry) => [entry.node, entry.value])).to.deep.equal([['gpu-1', 'v1']]);
    expect([...(seen[0]?.unchecked ?? [])]).to.deep.equal(['gpu-2']);
  });

  it('does not tell the observer about an abandoned pass: it did not see every node', async () => {
    let calls = 0;
    const term = new AbortController();
    const report = await sweepOnce({
      targets: { lockedNodes: () => ['gpu-1', 'gpu-2'] },
      locks: {
        releaseIfReleasable: (node) => {
          term.abort();
          return Promise.resolve(stalled(node, 'v'));
        },
      },
      concurrency: 1,
      signal: term.signal,
      observer: {
        sweepCompleted: () => {
          calls++;
        },
      },
    });
    expect(report.abandoned).to.equal(true);
    expect(calls).to.equal(0);
  });

  it('a throwing observer does not fail the pass', async () => {
    const report = await sweepOnce({
      targets: { lockedNodes: () => ['gpu-1'] },
      locks: locks({ 'gpu-1': stalled('gpu-1', 'v1') }),
      concurrency: 1,
      observer: {
        sweepCompleted: () => {
          throw new Error('bug');
        },
      },
    });
    expect(report.stalled).to.have.length(1);
  });
});
