import { expect } from 'chai';
import { BIND_PHASE_ANNOTATION } from '../../src/lock/owner-pod.js';
import { ExtenderFixture, gpuPodSpec, loadPerGpu } from '../support/extender-fixture.js';
import { scrapeMetrics } from '../support/scrape-metrics.js';
import { eventually, sharedControlPlane, testCluster } from '../support/test-cluster.js';

/** Per-GPU samples of one family on one node: uuid -> { labels text, value }. */
function perGpu(text: string, family: string, node: string, nodeLabel = 'node', uuidLabel = 'device_uuid'): Map<string, { line: string; value: number }> {
  const found = new Map<string, { line: string; value: number }>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${family}{`) || !line.includes(`${nodeLabel}="${node}"`)) continue;
    const uuid = new RegExp(`${uuidLabel}="([^"]*)"`).exec(line)?.[1];
    if (uuid !== undefined) found.set(uuid, { line, value: Number(line.slice(line.lastIndexOf(' ') + 1)) });
  }
  return found;
}

const MIB = 1024 * 1024;

describe('HAMi scheduler metric families and event reasons (real kube-scheduler, apiserver, kubelet simulator, HAMi stand-in)', function () {
  this.timeout(120_000);

  it('a scrape after binds shows HAMi\'s per-GPU families matching the pods\' allocations, and each pod gets FilteringSucceed and BindingSucceed', async () => {
    const { core, namespace } = testCluster();
    const fixture = new ExtenderFixture(sharedControlPlane(), { LEADER_ELECTION: 'false' });
    await fixture.start();
    try {
      const { group, nodes } = await fixture.createNodes(1, 2, 16_000);
      const node = nodes[0] ?? '';
      const pods = [
        gpuPodSpec('small', group, { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '3000', 'nvidia.com/gpucores': '30' }),
        gpuPodSpec('medium', group, { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '5000' }),
        gpuPodSpec('pair', group, { 'nvidia.com/gpu': '2', 'nvidia.com/gpumem': '1000', 'nvidia.com/gpucores': '10' }),
      ];
      for (const body of pods) await core.createNamespacedPod({ namespace, body });
      await eventually('every pod allocated', async () => {
        const list = (await core.listNamespacedPod({ namespace })).items;
        return list.length === pods.length && list.every((pod) => pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION] === 'success') ? true : undefined;
      }, 60_000, 200);

      const load = loadPerGpu((await core.listNamespacedPod({ namespace })).items);
      expect([...load.values()].reduce((sum, gpu) => sum + gpu.slots, 0)).to.equal(4);
      // The store catches up with the pods' annotations through its watch: poll the scrape until it does.
      const text = await eventually('a scrape matching the allocations', async () => {
        const scraped = await scrapeMetrics(fixture.server?.metricsPort ?? 0);
        const used = perGpu(scraped, 'hami_gpu_memory_allocated_bytes', node);
        return [...load].every(([uuid, gpu]) => used.get(uuid)?.value === gpu.memoryMiB * MIB) ? scraped : undefined;
      }, 20_000, 200);

      const limits = perGpu(text, 'hami_gpu_memory_limit_bytes', node);
      expect(limits.size).to.equal(2);
      for (const [uuid, limit] of limits) {
        const gpu = load.get(uuid) ?? { slots: 0, memoryMiB: 0, cores: 0 };
        expect(limit.value, uuid).to.equal(16_000 * MIB);
        expect(limit.line).to.include('zone="vGPU"');
        expect(perGpu(text, 'hami_gpu_memory_allocated_bytes', node).get(uuid)?.value, uuid).to.equal(gpu.memoryMiB * MIB);
        expect(perGpu(text, 'hami_gpu_shared_count', node).get(uuid)?.value, uuid).to.equal(gpu.slots);
        expect(perGpu(text, 'hami_gpu_core_allocated_ratio', node).get(uuid)?.value, uuid).to.equal(gpu.cores);
        expect(perGpu(text, 'hami_gpu_core_limit_ratio', node).get(uuid)?.value, uuid).to.equal(100);
        expect(perGpu(text, 'hami_node_gpu_memory_allocated_ratio', node).get(uuid)?.value, uuid).to.be.closeTo(gpu.memoryMiB / 16_000, 1e-9);
        expect(perGpu(text, 'GPUDeviceMemoryAllocated', node, 'nodeid', 'deviceuuid').get(uuid)?.value, uuid).to.equal(gpu.memoryMiB * MIB);
        expect(perGpu(text, 'GPUDeviceSharedNum', node, 'nodeid', 'deviceuuid').get(uuid)?.value, uuid).to.equal(gpu.slots);
        expect(perGpu(text, 'GPUDeviceCoreAllocated', node, 'nodeid', 'deviceuuid').get(uuid)?.value, uuid).to.equal(gpu.cores);
      }

      for (const name of ['small', 'medium', 'pair']) {
        const reasons = await eventually(`${name}'s FilteringSucceed and BindingSucceed events`, async () => {
          const events = (await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` })).items;
          const found = events.map((event) => event.reason ?? '');
          return found.includes('FilteringSucceed') && found.includes('BindingSucceed') ? events : undefined;
        }, 20_000, 200);
        const bind = reasons.find((event) => event.reason === 'BindingSucceed');
        expect(bind?.type).to.equal('Normal');
        expect(bind?.message).to.equal(`Successfully binding node [${node}] to ${namespace}/${name}`);
        expect(reasons.map((event) => event.reason)).to.not.include('FilteringFailed');
      }
    } finally {
      await fixture.stop();
    }
  });
});
