import { expect } from 'chai';
import { DEFAULT_STALLED_LIMITS, StalledLocks } from '../../../src/telemetry/stalled-locks.js';

const MINUTE = 60_000;

describe('StalledLocks (which stalls were announced, and when to remind)', () => {
  it('announces a stall once, then reminds after 5, 10, 20 and every 30 minutes', () => {
    const stalls = new StalledLocks();
    const announced: number[] = [];
    for (let now = 0; now <= 120 * MINUTE; now += 30_000) {
      if (stalls.report('gpu-1', 'v1', now).announce !== undefined) announced.push(now / MINUTE);
    }
    expect(announced).to.deep.equal([0, 5, 15, 35, 65, 95]);
  });

  it('stays bounded: at most maxEntries stalls, and a stall not reported for forgetAfterMs is forgotten silently', () => {
    const stalls = new StalledLocks({ ...DEFAULT_STALLED_LIMITS, maxEntries: 2, forgetAfterMs: 10 * MINUTE });
    stalls.report('gpu-1', 'v', 0);
    stalls.report('gpu-2', 'v', 0);
    stalls.report('gpu-3', 'v', 0);
    expect(stalls.size).to.equal(2);
    // gpu-1 was the least recently reported: it is announced as new.
    expect(stalls.report('gpu-1', 'v', 1).announce).to.equal('first');
    expect(stalls.report('gpu-3', 'v', 2).announce).to.equal(undefined);
    expect(stalls.report('gpu-3', 'v', 20 * MINUTE).announce).to.equal('first');
    expect(stalls.size).to.equal(1);
  });

  it('a release forgets only the stall of the same lock value', () => {
    const stalls = new StalledLocks();
    stalls.report('gpu-1', 'v1', 0);
    expect(stalls.released('gpu-1', 'other')).to.equal(undefined);
    expect(stalls.released('gpu-1', 'v1')?.since).to.equal(0);
    expect(stalls.size).to.equal(0);
  });

  it('a sweep that saw the node but could not read its value keeps the stall', () => {
    const stalls = new StalledLocks();
    stalls.report('gpu-1', 'v1', 0);
    expect(stalls.sweepCompleted([{ node: 'gpu-1', value: undefined }], new Set())).to.deep.equal([]);
    expect(
      stalls.sweepCompleted([{ node: 'gpu-1', value: 'v2' }], new Set()).map((stall) => stall.value),
    ).to.deep.equal(['v1']);
  });
});
