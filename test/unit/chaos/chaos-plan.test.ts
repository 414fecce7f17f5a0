import { expect } from 'chai';
import { DEFAULT_INTERVALS, describeFault, planFaults } from '../../chaos/fault-plan.js';
import { Prng } from '../../chaos/prng.js';

describe('chaos: seeded PRNG and fault plan', () => {
  it('replays the same numbers from the same seed, and different ones from another', () => {
    const draw = (seed: number) => {
      const random = new Prng(seed);
      return Array.from({ length: 5 }, () => random.next());
    };
    expect(draw(1)).to.deep.equal(draw(1));
    expect(draw(1)).to.not.deep.equal(draw(2));
    const random = new Prng(7);
    for (let i = 0; i < 1000; i++) {
      const value = random.int(3, 5);
      expect(value).to.be.within(3, 5);
    }
  });

  it('plans the same faults for the same seed, inside the fault window, of every kind over a long run', () => {
    const options = { startMs: 10_000, endMs: 600_000, replicas: 2, meanIntervalMs: DEFAULT_INTERVALS };
    const plan = planFaults(new Prng(1), options);
    expect(planFaults(new Prng(1), options).map(describeFault)).to.deep.equal(plan.map(describeFault));
    expect(planFaults(new Prng(2), options).map(describeFault)).to.not.deep.equal(plan.map(describeFault));
    expect(plan.every((event) => event.at >= 10_000 && event.at < 600_000)).to.equal(true);
    expect(new Set(plan.map((event) => event.kind))).to.deep.equal(
      new Set(['proxy', 'watch-expiry', 'restart', 'kill-replica']),
    );
    const sorted = [...plan].sort((a, b) => a.at - b.at);
    expect(plan.map((event) => event.at)).to.deep.equal(sorted.map((event) => event.at));
    // About one proxy fault per 2.5 s over 590 s.
    const proxies = plan.filter((event) => event.kind === 'proxy').length;
    expect(proxies).to.be.within(150, 330);
  });

  it('forks independent streams: more draws from one leave the other unchanged', () => {
    const a = new Prng(5);
    const b = new Prng(5);
    const faultsA = a.fork('faults');
    const faultsB = b.fork('faults');
    a.fork('workload').next();
    expect(faultsA.next()).to.equal(faultsB.next());
  });
});
