import type { NodeAgents } from './node-agents.js';
import type { AllocationRecord } from './observed-state.js';

/**
 * Real nodes and simulated ones in one run (`--nodes real:N+M`): as many real kubelets as two cores
 * carry, and simulated nodes for the rest of the workload. Each part keeps its own records; the
 * runner reads one list that only grows (it checks the records it has not seen yet by position), so
 * each part's new records are appended in the order they are noticed. Both parts decode with the
 * stand-in's decoder; only real nodes have containers to check.
 */
export function mixedNodeAgents(real: NodeAgents, simulated: NodeAgents): NodeAgents {
  const parts = [real, simulated];
  const merged: AllocationRecord[] = [];
  const taken = parts.map(() => 0);
  return {
    start: async () => {
      await real.start();
      await simulated.start();
    },
    stop: async () => {
      await simulated.stop();
      await real.stop();
    },
    records: () => {
      parts.forEach((part, index) => {
        const records = part.records();
        merged.push(...records.slice(taken[index]));
        taken[index] = records.length;
      });
      return merged;
    },
    decode: real.decode,
    ...(real.checkContainers === undefined ? {} : { checkContainers: (snapshot) => real.checkContainers!(snapshot) }),
  };
}
