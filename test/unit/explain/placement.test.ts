import { expect } from 'chai';
import { DEFAULT_LIMITS } from '../../../src/explain/explanation.js';
import { placementOf, reasonSummary } from '../../../src/explain/placement.js';
import { snapshotCache } from '../../../src/explain/snapshot-cache.js';
import { simulatedGpuNode } from '../../../src/local/simulated-gpu-node.js';
import { gpuNode, gpuPod, SETTINGS } from './scenario.js';

const ref = { namespace: 'team-a', name: 'p' };

describe("placementOf: filter's verdicts grouped by reason", () => {
  it('stays bounded over many nodes: names capped per reason, in name order, counts exact', async () => {
    const nodes = Array.from({ length: 300 }, (_, index) =>
      simulatedGpuNode({
        name: `gpu-${String(index).padStart(3, '0')}`,
        gpus: 1,
        gpuMemoryMiB: index % 3 === 0 ? 8000 : 24576,
        gpuType: index % 3 === 1 ? 'AMD-MI300' : 'NVIDIA-A10',
      }),
    );
    const cache = await snapshotCache(nodes.reverse(), []);

    const report = placementOf(gpuPod('p'), ref, cache, SETTINGS.defaults, DEFAULT_LIMITS);

    expect(report.evaluated).to.equal(300);
    expect(report.fitting.count).to.equal(100);
    expect(report.fitting.nodes).to.deep.equal(['gpu-002', 'gpu-005', 'gpu-008', 'gpu-011', 'gpu-014']);
    // A GPU whose type is not NVIDIA is not a candidate at all: the request needs more GPUs than the node has.
    expect(
      report.failing.map((group) => [group.reason, group.count, group.nodes.map((entry) => entry.node)]),
    ).to.deep.equal([
      ['CardInsufficientMemory', 100, ['gpu-000', 'gpu-003', 'gpu-006']],
      ['NodeInsufficientDevice', 100, ['gpu-001', 'gpu-004', 'gpu-007']],
    ]);
    expect(reasonSummary(report)).to.equal('300 nodes: 100 CardInsufficientMemory, 100 NodeInsufficientDevice');
  });

  it('caps the reasons listed and counts the rest', async () => {
    const cache = await snapshotCache(
      [
        simulatedGpuNode({ name: 'a', gpus: 1, gpuMemoryMiB: 100 }),
        simulatedGpuNode({ name: 'b', gpus: 1, gpuType: 'AMD-MI300' }),
        simulatedGpuNode({ name: 'c', gpus: 1, register: false }),
      ],
      [],
    );
    const report = placementOf(gpuPod('p'), ref, cache, SETTINGS.defaults, { ...DEFAULT_LIMITS, reasons: 1 });
    expect(report.failing).to.have.length(1);
    expect(report.moreReasons).to.equal(2);
    expect(reasonSummary(report)).to.match(/^3 nodes: 1 \w+, …$/);
  });

  it('marks fitting nodes whose lock names another pod (not the pod itself)', async () => {
    const cache = await snapshotCache(
      [
        gpuNode({ name: 'mine', gpus: 1 }, { holder: ref, ageSeconds: 5 }),
        gpuNode({ name: 'theirs', gpus: 1 }, { holder: { namespace: 'team-b', name: 'x' }, ageSeconds: 5 }),
        gpuNode({ name: 'free', gpus: 1 }),
      ],
      [],
    );
    const report = placementOf(gpuPod('p'), ref, cache, SETTINGS.defaults, DEFAULT_LIMITS);
    expect(report.fitting.nodes).to.deep.equal(['free', 'mine', 'theirs']);
    expect(report.lockedFitting).to.deep.equal(['theirs']);
  });
});
