import { expect } from 'chai';
import { mixedNodeAgents } from '../../../test/chaos/mixed-node-agents.js';
import type { NodeAgents } from '../../../test/chaos/node-agents.js';
import type { AllocationRecord } from '../../../test/chaos/observed-state.js';

function part(name: string, order: string[]): NodeAgents & { history: AllocationRecord[] } {
  const history: AllocationRecord[] = [];
  return {
    history,
    start: () => {
      order.push(`start ${name}`);
      return Promise.resolve();
    },
    stop: () => {
      order.push(`stop ${name}`);
      return Promise.resolve();
    },
    records: () => history,
    decode: () => [],
  };
}

const record = (node: string, at: number): AllocationRecord => ({
  node,
  admitted: undefined,
  resolvedTo: undefined,
  ok: true,
  at,
});

describe('chaos: real and simulated node agents in one run', () => {
  it("reads one list that only grows, with each part's new records appended as they are noticed", () => {
    const order: string[] = [];
    const real = part('real', order);
    const simulated = part('simulated', order);
    const agents = mixedNodeAgents(real, simulated);
    real.history.push(record('chaos-node-0', 1));
    simulated.history.push(record('chaos-sim-0', 2));
    expect(agents.records().map((entry) => entry.at)).to.deep.equal([1, 2]);
    simulated.history.push(record('chaos-sim-1', 3));
    real.history.push(record('chaos-node-1', 4));
    const seen = agents.records();
    expect(
      seen.map((entry) => entry.at),
      'earlier positions unchanged, so the runner\'s "checked so far" stays right',
    ).to.deep.equal([1, 2, 4, 3]);
    expect(agents.records()).to.have.length(4);
  });

  it('starts the real nodes first and stops them last, and checks containers only through the real part', async () => {
    const order: string[] = [];
    const real = {
      ...part('real', order),
      checkContainers: () =>
        Promise.resolve([{ invariant: 'foreign-container-env' as const, message: 'from real', subjects: [] }]),
    };
    const agents = mixedNodeAgents(real, part('simulated', order));
    await agents.start();
    await agents.stop();
    expect(order).to.deep.equal(['start real', 'start simulated', 'stop simulated', 'stop real']);
    expect(await agents.checkContainers?.({ pods: [], nodes: [] } as never)).to.deep.equal([
      { invariant: 'foreign-container-env', message: 'from real', subjects: [] },
    ]);
  });
});
