import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { BIND_PHASE_ANNOTATION } from '../../src/hami/wire.js';
import type { Wake } from '../support/eventually.js';
import { ExtenderFixture, gpuPodSpec, loadPerGpu } from '../support/extender-fixture.js';
import { describePod, podStory } from '../support/observations.js';
import { scrapeMetrics, seriesOf } from '../support/scrape-metrics.js';
import { eventually, notYet, sharedControlPlane, testCluster } from '../support/test-cluster.js';

/** Per-GPU samples of one family on one node: uuid -> { labels text, value }. */
function perGpu(
  text: string,
  family: string,
  node: string,
  nodeLabel = 'node',
  uuidLabel = 'device_uuid',
): Map<string, { line: string; value: number }> {
  const found = new Map<string, { line: string; value: number }>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${family}{`) || !line.includes(`${nodeLabel}="${node}"`)) continue;
    const uuid = new RegExp(`${uuidLabel}="([^"]*)"`).exec(line)?.[1];
    if (uuid !== undefined) found.set(uuid, { line, value: Number(line.slice(line.lastIndexOf(' ') + 1)) });
  }
  return found;
}

const MIB = 1024 * 1024;

/**
 * Re-runs a wait as soon as the extender's store sees a pod of `namespace` change: the pods' state
 * and the scrape (read from the store) change only then. The poll stays as the fallback.
 */
function onPodsOf(fixture: ExtenderFixture, namespace: string): Wake {
  return (recheck) =>
    fixture.server!.cache.onPodChange((pod) => {
      if (pod.metadata?.namespace === namespace) recheck();
    });
}

const CURRENT = { namespace: 'namespace', node: 'node', pod: 'pod', index: 'container_index', uuid: 'device_uuid' };
const LEGACY = {
  namespace: 'podnamespace',
  node: 'nodename',
  pod: 'podname',
  index: 'containeridx',
  uuid: 'deviceuuid',
};

/**
 * One per-container family's series in `namespace`, as `pod/index/uuid@node` -> value, every series
 * checked to carry exactly HAMi's label names plus zone="vGPU".
 */
function perContainer(text: string, family: string, namespace: string, names = CURRENT): Record<string, number> {
  const found: Record<string, number> = {};
  for (const { labels, value } of seriesOf(text, family)) {
    if (labels[names.namespace] !== namespace) continue;
    expect(Object.keys(labels), family).to.have.members(['zone', ...Object.values(names)]);
    expect(labels.zone, family).to.equal('vGPU');
    found[
      `${labels[names.pod] ?? ''}/${labels[names.index] ?? ''}/${labels[names.uuid] ?? ''}@${labels[names.node] ?? ''}`
    ] = value;
  }
  return found;
}

/** Each GPU's core capacity, read from the node's register annotation as HAMi's device plugin wrote it. */
async function gpuCoresOf(core: CoreV1Api, node: string): Promise<Map<string, number>> {
  const annotation =
    (await core.readNode({ name: node })).metadata?.annotations?.['hami.io/node-nvidia-register'] ?? '[]';
  return new Map((JSON.parse(annotation) as { id: string; devcore: number }[]).map((gpu) => [gpu.id, gpu.devcore]));
}

/**
 * What HAMi's per-container families should show for these pods, straight from each pod's
 * hami.io/vgpu-devices-allocated read back from the API (`<uuid>,NVIDIA,<MiB>,<cores>:` per device,
 * `;` per container, init containers first), decoded here independently of src/.
 */
function expectedPerContainer(
  pods: V1Pod[],
  gpuCores: Map<string, number>,
): Record<'memory' | 'ratio' | 'cores', Record<string, number>> {
  const expected = {
    memory: {} as Record<string, number>,
    ratio: {} as Record<string, number>,
    cores: {} as Record<string, number>,
  };
  for (const pod of pods) {
    const encoded = pod.metadata?.annotations?.['hami.io/vgpu-devices-allocated'];
    if (encoded === undefined || pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') continue;
    const node = pod.metadata?.annotations?.['hami.io/vgpu-node'] ?? '';
    encoded
      .split(';')
      .slice(0, -1)
      .forEach((container, index) => {
        for (const device of container.split(':').slice(0, -1)) {
          const [uuid = '', , memory = '', cores = ''] = device.split(',');
          const key = `${pod.metadata?.name ?? ''}/${index}/${uuid}@${node}`;
          const total = gpuCores.get(uuid) ?? 0;
          expected.memory[key] = Number(memory) * MIB;
          expected.ratio[key] = total > 0 ? Math.ceil((Number(cores) / total) * 100) : 0;
          expected.cores[key] = Number(cores);
        }
      });
  }
  return expected;
}

/** Polls the scrape until HAMi's per-container memory family matches the pods, then checks all four families. */
async function expectPerContainerSeries(
  port: number,
  core: CoreV1Api,
  namespace: string,
  gpuCores: Map<string, number>,
  wake: Wake,
): Promise<Record<string, number>> {
  const expected = expectedPerContainer((await core.listNamespacedPod({ namespace })).items, gpuCores);
  const text = await eventually(
    'a scrape with one per-container series per container and GPU',
    async () => {
      const scraped = await scrapeMetrics(port);
      const memory = perContainer(scraped, 'hami_vgpu_memory_allocated_bytes', namespace);
      if (JSON.stringify(Object.entries(memory).sort()) === JSON.stringify(Object.entries(expected.memory).sort()))
        return scraped;
      const differing = Object.keys(expected.memory).filter((key) => memory[key] !== expected.memory[key]);
      const unexpected = Object.keys(memory).filter((key) => !(key in expected.memory));
      return notYet(
        `${Object.keys(memory).length} hami_vgpu_memory_allocated_bytes series (${Object.keys(expected.memory).length} expected); ` +
          `missing or differing: ${differing.slice(0, 3).join(', ') || 'none'}; unexpected: ${unexpected.slice(0, 3).join(', ') || 'none'}`,
      );
    },
    20_000,
    200,
    wake,
  );
  expect(perContainer(text, 'hami_vgpu_memory_allocated_bytes', namespace)).to.deep.equal(expected.memory);
  expect(perContainer(text, 'hami_vgpu_core_allocated_ratio', namespace)).to.deep.equal(expected.ratio);
  expect(perContainer(text, 'vGPUMemoryAllocated', namespace, LEGACY)).to.deep.equal(expected.memory);
  expect(perContainer(text, 'vGPUCoreAllocated', namespace, LEGACY)).to.deep.equal(expected.cores);
  return expected.memory;
}

/**
 * Simulated nodes: the families are computed from the pods and nodes the scheduler's store holds,
 * apart from kubelet, and the per-GPU layouts checked here (several nodes, 4 GPUs each) would need more
 * kubelets than two cores carry.
 */
describe('HAMi scheduler metric families and event reasons (real kube-scheduler, apiserver, kubelet simulator, HAMi stand-in)', function () {
  this.timeout(120_000);

  it("a scrape after binds shows HAMi's per-GPU and per-container families matching the pods' allocations (gone with the pods), and with SUCCESS_EVENTS=true each pod gets FilteringSucceed and BindingSucceed", async () => {
    const { core, namespace } = testCluster();
    const fixture = new ExtenderFixture(sharedControlPlane(), { LEADER_ELECTION: 'false', SUCCESS_EVENTS: 'true' });
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
      await eventually(
        'every pod allocated',
        async () => {
          const list = (await core.listNamespacedPod({ namespace })).items;
          if (
            list.length === pods.length &&
            list.every((pod) => pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION] === 'success')
          )
            return true;
          const waiting = list.filter((pod) => pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION] !== 'success');
          return notYet(
            `${list.length - waiting.length} of ${list.length} pods allocated${waiting.map((pod) => `; ${pod.metadata?.name ?? '?'}: ${describePod(pod)}`).join('')}`,
          );
        },
        60_000,
        200,
        onPodsOf(fixture, namespace),
      );

      const load = loadPerGpu((await core.listNamespacedPod({ namespace })).items);
      expect([...load.values()].reduce((sum, gpu) => sum + gpu.slots, 0)).to.equal(4);
      // The store catches up with the pods' annotations through its watch: poll the scrape until it does.
      const text = await eventually(
        'a scrape matching the allocations',
        async () => {
          const scraped = await scrapeMetrics(fixture.server?.metricsPort ?? 0);
          const used = perGpu(scraped, 'hami_gpu_memory_allocated_bytes', node);
          if ([...load].every(([uuid, gpu]) => used.get(uuid)?.value === gpu.memoryMiB * MIB)) return scraped;
          const values = [...load].map(
            ([uuid, gpu]) => `${uuid} ${used.get(uuid)?.value ?? 'absent'} (want ${gpu.memoryMiB * MIB})`,
          );
          return notYet(`hami_gpu_memory_allocated_bytes on ${node}: ${values.join(', ')}`);
        },
        20_000,
        200,
        onPodsOf(fixture, namespace),
      );

      const limits = perGpu(text, 'hami_gpu_memory_limit_bytes', node);
      expect(limits.size).to.equal(2);
      for (const [uuid, limit] of limits) {
        const gpu = load.get(uuid) ?? { slots: 0, memoryMiB: 0, cores: 0 };
        expect(limit.value, uuid).to.equal(16_000 * MIB);
        expect(limit.line).to.include('zone="vGPU"');
        expect(perGpu(text, 'hami_gpu_memory_allocated_bytes', node).get(uuid)?.value, uuid).to.equal(
          gpu.memoryMiB * MIB,
        );
        expect(perGpu(text, 'hami_gpu_shared_count', node).get(uuid)?.value, uuid).to.equal(gpu.slots);
        expect(perGpu(text, 'hami_gpu_core_allocated_ratio', node).get(uuid)?.value, uuid).to.equal(gpu.cores);
        expect(perGpu(text, 'hami_gpu_core_limit_ratio', node).get(uuid)?.value, uuid).to.equal(100);
        expect(perGpu(text, 'hami_node_gpu_memory_allocated_ratio', node).get(uuid)?.value, uuid).to.be.closeTo(
          gpu.memoryMiB / 16_000,
          1e-9,
        );
        expect(perGpu(text, 'GPUDeviceMemoryAllocated', node, 'nodeid', 'deviceuuid').get(uuid)?.value, uuid).to.equal(
          gpu.memoryMiB * MIB,
        );
        expect(perGpu(text, 'GPUDeviceSharedNum', node, 'nodeid', 'deviceuuid').get(uuid)?.value, uuid).to.equal(
          gpu.slots,
        );
        expect(perGpu(text, 'GPUDeviceCoreAllocated', node, 'nodeid', 'deviceuuid').get(uuid)?.value, uuid).to.equal(
          gpu.cores,
        );
      }

      for (const name of ['small', 'medium', 'pair']) {
        const reasons = await eventually(
          `${name}'s FilteringSucceed and BindingSucceed events`,
          async () => {
            const events = (await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` }))
              .items;
            const found = events.map((event) => event.reason ?? '');
            return found.includes('FilteringSucceed') && found.includes('BindingSucceed')
              ? events
              : notYet(`${name}'s event reasons: ${found.join(', ') || 'none'}`);
          },
          20_000,
          200,
        );
        const bind = reasons.find((event) => event.reason === 'BindingSucceed');
        expect(bind?.type).to.equal('Normal');
        expect(bind?.message).to.equal(`Successfully binding node [${node}] to ${namespace}/${name}`);
        expect(reasons.map((event) => event.reason)).to.not.include('FilteringFailed');
      }

      // HAMi's per-container families: one series per container and GPU of each pod, from its annotation.
      const port = fixture.server?.metricsPort ?? 0;
      const gpuCores = await gpuCoresOf(core, node);
      const before = await expectPerContainerSeries(port, core, namespace, gpuCores, onPodsOf(fixture, namespace));
      expect(Object.keys(before).map((key) => key.split('/')[0])).to.have.members(['small', 'medium', 'pair', 'pair']);
      const seriesOfPod = (series: Record<string, number>, pod: string): [string, number][] =>
        Object.entries(series)
          .filter(([key]) => key.startsWith(`${pod}/`))
          .map(([key, value]) => [key.split('/')[1] ?? '', value]);
      expect(seriesOfPod(before, 'small')).to.deep.equal([['0', 3000 * MIB]]);

      // A pod with a GPU init container: container_index counts the init container first, as HAMi's annotation does.
      const staged = gpuPodSpec('staged', group, {
        'nvidia.com/gpu': '1',
        'nvidia.com/gpumem': '1000',
        'nvidia.com/gpucores': '20',
      });
      staged.spec = {
        ...staged.spec,
        containers: staged.spec?.containers ?? [],
        initContainers: [
          {
            name: 'warmup',
            image: 'cuda',
            resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '2000', 'nvidia.com/gpucores': '40' } },
          },
        ],
      };
      await core.createNamespacedPod({ namespace, body: staged });
      await eventually(
        'staged allocated',
        async () => {
          const read = await core.readNamespacedPod({ name: 'staged', namespace });
          return read.metadata?.annotations?.[BIND_PHASE_ANNOTATION] === 'success'
            ? true
            : notYet(await podStory(core, namespace, 'staged', read));
        },
        60_000,
        200,
        onPodsOf(fixture, namespace),
      );
      const withStaged = await expectPerContainerSeries(port, core, namespace, gpuCores, onPodsOf(fixture, namespace));
      expect(seriesOfPod(withStaged, 'staged')).to.have.deep.members([
        ['0', 2000 * MIB],
        ['1', 1000 * MIB],
      ]);

      // Deleted pods' series drop out; the others stay.
      await core.deleteNamespacedPod({ name: 'staged', namespace });
      await core.deleteNamespacedPod({ name: 'small', namespace });
      await eventually(
        'staged and small gone from the API',
        async () => {
          const left = (await core.listNamespacedPod({ namespace })).items.filter(
            (pod) => pod.metadata?.name === 'staged' || pod.metadata?.name === 'small',
          );
          return left.length === 0
            ? true
            : notYet(
                `still listed: ${left.map((pod) => `${pod.metadata?.name ?? '?'} (${describePod(pod)})`).join(', ')}`,
              );
        },
        60_000,
        200,
        onPodsOf(fixture, namespace),
      );
      const after = await expectPerContainerSeries(port, core, namespace, gpuCores, onPodsOf(fixture, namespace));
      expect(Object.keys(after).map((key) => key.split('/')[0])).to.have.members(['medium', 'pair', 'pair']);
    } finally {
      await fixture.stop();
    }
  });
});
