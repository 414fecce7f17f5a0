import { expect } from 'chai';
import { ALLOCATED_ANNOTATION } from '../../../src/hami/wire.js';
import {
  containerAllocationSamples,
  coreRatio,
  HAMI_CONTAINER_FAMILIES,
  HAMI_QUOTA_FAMILIES,
  type AllocationPod,
  type ContainerAllocationSample,
  type ContainerAllocationView,
  type QuotaSample,
} from '../../../src/telemetry/hami-pod-metrics.js';
import { WardenMetrics } from '../../../src/telemetry/metrics.js';
import { seriesOf } from '../../support/scrape-metrics.js';

const MIB = 1024 * 1024;

function pod(
  name: string,
  allocated: string | undefined,
  over: { node?: string; nodeName?: string; phase?: string; namespace?: string } = {},
): AllocationPod {
  const annotations: Record<string, string> = {};
  if (allocated !== undefined) annotations[ALLOCATED_ANNOTATION] = allocated;
  if (over.node !== undefined) annotations['hami.io/vgpu-node'] = over.node;
  return {
    metadata: { namespace: over.namespace ?? 'ml', name, annotations },
    spec: over.nodeName === undefined ? {} : { nodeName: over.nodeName },
    status: { phase: over.phase ?? 'Running' },
  };
}

function view(
  pods: AllocationPod[],
  inventories: Record<string, { uuid: string; cores: number }[]> = {},
): ContainerAllocationView {
  return {
    allPods: () => pods,
    inventory: (node) => (inventories[node] === undefined ? undefined : { devices: inventories[node] }),
  };
}

describe('hami-pod-metrics: containerAllocationSamples', () => {
  const inventory = {
    'gpu-1': [
      { uuid: 'GPU-a', cores: 100 },
      { uuid: 'GPU-b', cores: 200 },
    ],
  };

  it('gives one sample per container and GPU, container index counting init containers first and GPU-less containers too', () => {
    // One init container on GPU-a, a GPU-less app container, an app container on both GPUs.
    const staged = pod('staged', 'GPU-a,NVIDIA,1000,10:;;GPU-a,NVIDIA,3000,30:GPU-b,NVIDIA,2000,0:;', {
      node: 'gpu-1',
      nodeName: 'gpu-1',
    });
    expect(containerAllocationSamples(view([staged], inventory))).to.deep.equal([
      {
        namespace: 'ml',
        node: 'gpu-1',
        pod: 'staged',
        containerIndex: 0,
        uuid: 'GPU-a',
        memoryMiB: 1000,
        cores: 10,
        gpuCores: 100,
      },
      {
        namespace: 'ml',
        node: 'gpu-1',
        pod: 'staged',
        containerIndex: 2,
        uuid: 'GPU-a',
        memoryMiB: 3000,
        cores: 30,
        gpuCores: 100,
      },
      {
        namespace: 'ml',
        node: 'gpu-1',
        pod: 'staged',
        containerIndex: 2,
        uuid: 'GPU-b',
        memoryMiB: 2000,
        cores: 0,
        gpuCores: 200,
      },
    ]);
  });

  it('takes the node from hami.io/vgpu-node, else spec.nodeName, and leaves the GPU core capacity 0 when the inventory does not list the GPU', () => {
    const samples = containerAllocationSamples(
      view(
        [
          pod('annotated', 'GPU-a,NVIDIA,1000,10:;', { node: 'gpu-1', nodeName: 'elsewhere' }),
          pod('bound-only', 'GPU-b,NVIDIA,1000,10:;', { nodeName: 'gpu-1' }),
          pod('unknown-gpu', 'GPU-z,NVIDIA,1000,10:;', { node: 'gpu-1' }),
          pod('unknown-node', 'GPU-a,NVIDIA,1000,10:;', { node: 'gpu-9' }),
        ],
        inventory,
      ),
    );
    expect(samples.map((s) => [s.pod, s.node, s.gpuCores])).to.deep.equal([
      ['annotated', 'gpu-1', 100],
      ['bound-only', 'gpu-1', 200],
      ['unknown-gpu', 'gpu-1', 0],
      ['unknown-node', 'gpu-9', 0],
    ]);
  });

  it('leaves out finished pods, pods without the annotation or a node, and pods whose annotation cannot be decoded', () => {
    const samples = containerAllocationSamples(
      view(
        [
          pod('pending', 'GPU-a,NVIDIA,1000,0:;', { node: 'gpu-1', phase: 'Pending' }),
          pod('done', 'GPU-a,NVIDIA,1000,0:;', { node: 'gpu-1', phase: 'Succeeded' }),
          pod('failed', 'GPU-a,NVIDIA,1000,0:;', { node: 'gpu-1', phase: 'Failed' }),
          pod('unannotated', undefined, { node: 'gpu-1' }),
          pod('nowhere', 'GPU-a,NVIDIA,1000,0:;'),
          pod('empty-node', 'GPU-a,NVIDIA,1000,0:;', { node: '' }),
          pod('garbled', 'GPU-a,NVIDIA,lots,0:;', { node: 'gpu-1' }),
          pod('truncated', 'GPU-a,NVIDIA,1000', { node: 'gpu-1' }),
          pod('empty-uuid', ',NVIDIA,1000,0:;', { node: 'gpu-1' }),
        ],
        inventory,
      ),
    );
    expect(samples.map((s) => s.pod)).to.deep.equal(['pending']);
  });

  it('coreRatio: 0 without capacity, else a rounded-up percentage; on a 100-core GPU exactly the core count', () => {
    expect(coreRatio(0, 30)).to.deep.equal({ limit: 0, allocated: 0 });
    expect(coreRatio(-1, 30)).to.deep.equal({ limit: 0, allocated: 0 });
    expect(coreRatio(200, 33)).to.deep.equal({ limit: 100, allocated: 17 });
    expect(coreRatio(100, 30)).to.deep.equal({ limit: 100, allocated: 30 });
    // Floating point made 7, 14, 28, 55 and 56 of 100 into 8, 15, 29, 56 and 57.
    for (let cores = 0; cores <= 100; cores++)
      expect(coreRatio(100, cores).allocated, `${cores} of 100`).to.equal(cores);
  });
});

describe('hami-pod-metrics: per-container families in a scrape', () => {
  const share = (over: Partial<ContainerAllocationSample> = {}): ContainerAllocationSample => ({
    namespace: 'ml',
    node: 'gpu-1',
    pod: 'train-0',
    containerIndex: 1,
    uuid: 'GPU-a',
    memoryMiB: 3000,
    cores: 33,
    gpuCores: 200,
    ...over,
  });

  it('exports HAMi\'s four families with HAMi\'s label names, zone="vGPU", bytes from MiB, ratio rounded up and legacy raw cores', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    metrics.setContainerAllocationSource(() => [share()]);
    const text = await metrics.text();
    expect(HAMI_CONTAINER_FAMILIES.map((family) => family.name)).to.deep.equal([
      'hami_vgpu_memory_allocated_bytes',
      'hami_vgpu_core_allocated_ratio',
      'vGPUMemoryAllocated',
      'vGPUCoreAllocated',
    ]);
    const current = {
      zone: 'vGPU',
      namespace: 'ml',
      node: 'gpu-1',
      pod: 'train-0',
      container_index: '1',
      device_uuid: 'GPU-a',
    };
    const legacy = {
      zone: 'vGPU',
      podnamespace: 'ml',
      nodename: 'gpu-1',
      podname: 'train-0',
      containeridx: '1',
      deviceuuid: 'GPU-a',
    };
    expect(seriesOf(text, 'hami_vgpu_memory_allocated_bytes')).to.deep.equal([{ labels: current, value: 3000 * MIB }]);
    expect(seriesOf(text, 'hami_vgpu_core_allocated_ratio')).to.deep.equal([{ labels: current, value: 17 }]); // ceil(33 / 200 × 100)
    expect(seriesOf(text, 'vGPUMemoryAllocated')).to.deep.equal([{ labels: legacy, value: 3000 * MIB }]);
    expect(seriesOf(text, 'vGPUCoreAllocated')).to.deep.equal([{ labels: legacy, value: 33 }]);
    for (const family of HAMI_CONTAINER_FAMILIES) {
      expect(text).to.include(`# TYPE ${family.name} gauge\n`);
      expect(text).to.include(`# HELP ${family.name} vGPU `);
    }
  });

  it('reports a core ratio of 0 for a GPU the inventory does not list, as HAMi does', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    metrics.setContainerAllocationSource(() => [share({ gpuCores: 0 })]);
    const text = await metrics.text();
    expect(seriesOf(text, 'hami_vgpu_core_allocated_ratio').map((s) => s.value)).to.deep.equal([0]);
    expect(seriesOf(text, 'vGPUCoreAllocated').map((s) => s.value)).to.deep.equal([33]);
  });

  it("builds the series from the store view: a pod's series drop out once it is gone or finished, and all are absent while the source knows nothing", async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    const pods = [
      pod('a', 'GPU-a,NVIDIA,1000,10:;GPU-b,NVIDIA,2000,20:;', { node: 'gpu-1' }),
      pod('b', ';GPU-a,NVIDIA,4000,50:;', { node: 'gpu-1' }),
    ];
    let synced = true;
    let reads = 0;
    const store = view(pods, {
      'gpu-1': [
        { uuid: 'GPU-a', cores: 100 },
        { uuid: 'GPU-b', cores: 100 },
      ],
    });
    metrics.setContainerAllocationSource(() => {
      reads += 1;
      return synced ? containerAllocationSamples(store) : undefined;
    });

    const keyed = (text: string, family: string): string[] =>
      seriesOf(text, family).map(
        (s) =>
          `${s.labels.pod ?? s.labels.podname ?? ''}/${s.labels.container_index ?? s.labels.containeridx ?? ''}/${s.labels.device_uuid ?? s.labels.deviceuuid ?? ''}=${s.value}`,
      );
    const first = await metrics.text();
    expect(reads).to.equal(1);
    expect(keyed(first, 'hami_vgpu_memory_allocated_bytes')).to.have.members([
      `a/0/GPU-a=${1000 * MIB}`,
      `a/1/GPU-b=${2000 * MIB}`,
      `b/1/GPU-a=${4000 * MIB}`,
    ]);
    expect(keyed(first, 'vGPUCoreAllocated')).to.have.members(['a/0/GPU-a=10', 'a/1/GPU-b=20', 'b/1/GPU-a=50']);

    pods.splice(0, 1);
    const second = await metrics.text();
    expect(keyed(second, 'hami_vgpu_memory_allocated_bytes')).to.deep.equal([`b/1/GPU-a=${4000 * MIB}`]);
    expect(keyed(second, 'hami_vgpu_core_allocated_ratio')).to.deep.equal(['b/1/GPU-a=50']);
    expect(keyed(second, 'vGPUMemoryAllocated')).to.deep.equal([`b/1/GPU-a=${4000 * MIB}`]);

    pods[0] = pod('b', ';GPU-a,NVIDIA,4000,50:;', { node: 'gpu-1', phase: 'Succeeded' });
    expect(seriesOf(await metrics.text(), 'hami_vgpu_memory_allocated_bytes')).to.deep.equal([]);

    pods.push(pod('c', 'GPU-b,NVIDIA,500,0:;', { node: 'gpu-1' }));
    synced = false;
    const unsynced = await metrics.text();
    for (const family of HAMI_CONTAINER_FAMILIES)
      expect(seriesOf(unsynced, family.name), family.name).to.deep.equal([]);
    expect(reads).to.equal(4);
  });
});

describe('hami-pod-metrics: quota families in a scrape', () => {
  const quota = (over: Partial<QuotaSample> = {}): QuotaSample => ({
    namespace: 'team-a',
    resource: 'nvidia.com/gpumem',
    used: 6000,
    limit: 8000,
    ...over,
  });

  it("exports hami_resource_quota_used (limit as a label), hami_resource_quota_limit and legacy QuotaUsed with HAMi's labels", async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    metrics.setQuotaSource(() => [quota(), quota({ resource: 'nvidia.com/gpu', used: 1, limit: 4 })]);
    const text = await metrics.text();
    expect(HAMI_QUOTA_FAMILIES.map((family) => family.name)).to.deep.equal([
      'hami_resource_quota_used',
      'hami_resource_quota_limit',
      'QuotaUsed',
    ]);
    expect(seriesOf(text, 'hami_resource_quota_used')).to.have.deep.members([
      { labels: { zone: 'vGPU', namespace: 'team-a', quota_name: 'nvidia.com/gpumem', limit: '8000' }, value: 6000 },
      { labels: { zone: 'vGPU', namespace: 'team-a', quota_name: 'nvidia.com/gpu', limit: '4' }, value: 1 },
    ]);
    expect(seriesOf(text, 'hami_resource_quota_limit')).to.have.deep.members([
      { labels: { zone: 'vGPU', namespace: 'team-a', quota_name: 'nvidia.com/gpumem' }, value: 8000 },
      { labels: { zone: 'vGPU', namespace: 'team-a', quota_name: 'nvidia.com/gpu' }, value: 4 },
    ]);
    expect(seriesOf(text, 'QuotaUsed')).to.have.deep.members([
      {
        labels: { zone: 'vGPU', quotanamespace: 'team-a', quotaName: 'nvidia.com/gpumem', limit: '8000' },
        value: 6000,
      },
      { labels: { zone: 'vGPU', quotanamespace: 'team-a', quotaName: 'nvidia.com/gpu', limit: '4' }, value: 1 },
    ]);
    expect(text).to.include('# HELP hami_resource_quota_used resourcequota usage for a certain device\n');
    expect(text).to.include('# HELP hami_resource_quota_limit resourcequota limit for a certain device\n');
  });

  it('reads the source once per scrape, drops a quota that went away (old limit label included) and is absent while the source knows nothing', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    expect(seriesOf(await metrics.text(), 'hami_resource_quota_used')).to.deep.equal([]);
    let quotas: QuotaSample[] | undefined = [quota(), quota({ namespace: 'team-b', used: 0, limit: 0 })];
    let reads = 0;
    metrics.setQuotaSource(() => {
      reads += 1;
      return quotas;
    });
    expect(seriesOf(await metrics.text(), 'hami_resource_quota_used')).to.have.length(2);
    expect(reads).to.equal(1);

    quotas = [quota({ used: 7000, limit: 9000 })];
    const changed = await metrics.text();
    expect(reads).to.equal(2);
    expect(seriesOf(changed, 'hami_resource_quota_used')).to.deep.equal([
      { labels: { zone: 'vGPU', namespace: 'team-a', quota_name: 'nvidia.com/gpumem', limit: '9000' }, value: 7000 },
    ]);
    expect(seriesOf(changed, 'QuotaUsed').map((s) => s.labels.limit)).to.deep.equal(['9000']);
    expect(seriesOf(changed, 'hami_resource_quota_limit').map((s) => [s.labels.namespace, s.value])).to.deep.equal([
      ['team-a', 9000],
    ]);

    quotas = undefined;
    const unknown = await metrics.text();
    for (const family of HAMI_QUOTA_FAMILIES) expect(seriesOf(unknown, family.name), family.name).to.deep.equal([]);
  });
});
