import { expect } from 'chai';
import { register as globalRegistry } from 'prom-client';
import { WardenMetrics, type LockSample } from '../../../src/telemetry/metrics.js';
import { gpuSamples, HAMI_GPU_FAMILIES, type GpuSample } from '../../../src/telemetry/gpu-samples.js';

/** The sample lines of one metric family (no HELP/TYPE), e.g. `name{labels} value`. */
function samplesOf(text: string, name: string): string[] {
  return text.split('\n').filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `));
}

describe('WardenMetrics', () => {
  it('exposes every documented family with HELP and TYPE, in its own registry', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    const text = await metrics.text();
    const families: [string, string][] = [
      ['vgpu_warden_node_locks_held', 'gauge'],
      ['vgpu_warden_node_lock_age_seconds', 'gauge'],
      ['vgpu_warden_lock_releases_total', 'counter'],
      ['vgpu_warden_lock_acquisitions_total', 'counter'],
      ['vgpu_warden_lock_contentions_total', 'counter'],
      ['vgpu_warden_stalled_lock_reports_total', 'counter'],
      ['vgpu_warden_bind_duration_seconds', 'histogram'],
      ['vgpu_warden_filter_duration_seconds', 'histogram'],
      ['vgpu_warden_extender_request_seconds', 'histogram'],
      ['vgpu_warden_admission_duration_seconds', 'histogram'],
      ['vgpu_warden_sweep_duration_seconds', 'histogram'],
      ['vgpu_warden_sweep_passes_total', 'counter'],
      ['vgpu_warden_unreadable_allocations', 'gauge'],
    ];
    for (const [name, type] of families) {
      expect(text).to.include(`# TYPE ${name} ${type}\n`);
      expect(text).to.match(new RegExp(`^# HELP ${name} \\S`, 'm'));
    }
    expect(await globalRegistry.metrics()).not.to.include('vgpu_warden_');
    expect(metrics.contentType).to.match(/^text\/plain; version=0\.0\.4/);
  });

  it('starts known label values at zero so the series exist before the first event', async () => {
    const text = await new WardenMetrics({ processMetrics: false }).text();
    expect(samplesOf(text, 'vgpu_warden_lock_acquisitions_total')).to.have.members([
      'vgpu_warden_lock_acquisitions_total{outcome="acquired"} 0',
      'vgpu_warden_lock_acquisitions_total{outcome="reentrant"} 0',
      'vgpu_warden_lock_acquisitions_total{outcome="taken-over"} 0',
    ]);
    expect(samplesOf(text, 'vgpu_warden_sweep_passes_total')).to.have.members([
      'vgpu_warden_sweep_passes_total{result="ok"} 0',
      'vgpu_warden_sweep_passes_total{result="error"} 0',
    ]);
  });

  it('counts lock outcomes with their labels', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    metrics.recordRelease('owner-not-found', 'sweeper');
    metrics.recordRelease('owner-not-found', 'sweeper');
    metrics.recordRelease('owner-request', 'bind-failure');
    metrics.recordExternalRelease('gpu-node-1');
    metrics.recordAcquisition('taken-over');
    metrics.recordContention();
    metrics.recordStalledReport();
    metrics.recordStalledReport();
    const text = await metrics.text();
    expect(samplesOf(text, 'vgpu_warden_lock_releases_total')).to.have.members([
      'vgpu_warden_lock_releases_total{reason="owner-not-found",path="sweeper"} 2',
      'vgpu_warden_lock_releases_total{reason="owner-request",path="bind-failure"} 1',
      'vgpu_warden_lock_releases_total{reason="external",path="device-plugin"} 1',
    ]);
    expect(samplesOf(text, 'vgpu_warden_lock_acquisitions_total')).to.include(
      'vgpu_warden_lock_acquisitions_total{outcome="taken-over"} 1',
    );
    expect(samplesOf(text, 'vgpu_warden_lock_contentions_total')).to.deep.equal([
      'vgpu_warden_lock_contentions_total 1',
    ]);
    expect(samplesOf(text, 'vgpu_warden_stalled_lock_reports_total')).to.deep.equal([
      'vgpu_warden_stalled_lock_reports_total 2',
    ]);
  });

  it('observes durations in seconds into histograms with their labels', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    metrics.observeBind(0.02, 'success');
    metrics.observeBind(26, 'error');
    metrics.observeFilter(0.0007);
    metrics.observeExtenderCall('prioritize', { read: 0.1, decode: 0.4, handle: 2, answer: 30 });
    metrics.observeAdmission('DELETE', 0.004);
    metrics.observeAdmission('CREATE', 0.001);
    metrics.observeSweep(1.5, 'ok');
    metrics.observeSweep(0.2, 'error');
    const text = await metrics.text();
    expect(text).to.include('vgpu_warden_bind_duration_seconds_bucket{le="0.025",outcome="success"} 1');
    expect(text).to.include('vgpu_warden_bind_duration_seconds_bucket{le="25",outcome="error"} 0');
    expect(text).to.include('vgpu_warden_bind_duration_seconds_bucket{le="30",outcome="error"} 1');
    expect(text).to.include('vgpu_warden_bind_duration_seconds_count{outcome="error"} 1');
    expect(text).to.include('vgpu_warden_filter_duration_seconds_bucket{le="0.001"} 1');
    expect(text).to.include('vgpu_warden_filter_duration_seconds_sum 0.0007');
    expect(text).to.include(
      'vgpu_warden_extender_request_seconds_bucket{le="0.0005",verb="prioritize",phase="decode"} 1',
    );
    expect(text).to.include(
      'vgpu_warden_extender_request_seconds_bucket{le="0.025",verb="prioritize",phase="answer"} 0',
    );
    expect(text).to.include('vgpu_warden_extender_request_seconds_sum{verb="prioritize",phase="handle"} 0.002');
    expect(text).to.include('vgpu_warden_admission_duration_seconds_count{operation="DELETE"} 1');
    expect(text).to.include('vgpu_warden_admission_duration_seconds_count{operation="CREATE"} 1');
    expect(text).to.include('vgpu_warden_sweep_duration_seconds_count 2');
    expect(text).to.include('vgpu_warden_sweep_duration_seconds_sum 1.7');
    expect(samplesOf(text, 'vgpu_warden_sweep_passes_total')).to.have.members([
      'vgpu_warden_sweep_passes_total{result="ok"} 1',
      'vgpu_warden_sweep_passes_total{result="error"} 1',
    ]);
  });

  describe('node-lock gauges', () => {
    it('are absent while no lock source is set (this replica does not know)', async () => {
      const text = await new WardenMetrics({ processMetrics: false }).text();
      expect(samplesOf(text, 'vgpu_warden_node_locks_held')).to.deep.equal([]);
      expect(samplesOf(text, 'vgpu_warden_node_lock_age_seconds')).to.deep.equal([]);
    });

    it('are computed from the source on every scrape, with one call per scrape', async () => {
      const metrics = new WardenMetrics({ processMetrics: false });
      let samples: LockSample[] = [
        { node: 'gpu-a', ageSeconds: 12.5, state: 'held' },
        { node: 'gpu-b', ageSeconds: 400, state: 'stalled' },
        { node: 'gpu-c', ageSeconds: 90, state: 'releasable' },
        { node: 'gpu-d', ageSeconds: undefined, state: 'releasable' },
      ];
      let calls = 0;
      metrics.setLockSource(() => {
        calls++;
        return samples;
      });

      const first = await metrics.text();
      expect(calls).to.equal(1);
      expect(samplesOf(first, 'vgpu_warden_node_locks_held')).to.have.members([
        'vgpu_warden_node_locks_held{state="held"} 1',
        'vgpu_warden_node_locks_held{state="stalled"} 1',
        'vgpu_warden_node_locks_held{state="releasable"} 2',
      ]);
      expect(samplesOf(first, 'vgpu_warden_node_lock_age_seconds')).to.have.members([
        'vgpu_warden_node_lock_age_seconds{node="gpu-a"} 12.5',
        'vgpu_warden_node_lock_age_seconds{node="gpu-b"} 400',
        'vgpu_warden_node_lock_age_seconds{node="gpu-c"} 90',
      ]);

      samples = [{ node: 'gpu-a', ageSeconds: 20, state: 'held' }];
      const second = await metrics.text();
      expect(calls).to.equal(2);
      expect(samplesOf(second, 'vgpu_warden_node_locks_held')).to.have.members([
        'vgpu_warden_node_locks_held{state="held"} 1',
        'vgpu_warden_node_locks_held{state="stalled"} 0',
        'vgpu_warden_node_locks_held{state="releasable"} 0',
      ]);
      expect(samplesOf(second, 'vgpu_warden_node_lock_age_seconds')).to.deep.equal([
        'vgpu_warden_node_lock_age_seconds{node="gpu-a"} 20',
      ]);
    });

    it('are left out when the source answers undefined (not known on this replica)', async () => {
      const metrics = new WardenMetrics({ processMetrics: false });
      metrics.setLockSource(() => undefined);
      const text = await metrics.text();
      expect(samplesOf(text, 'vgpu_warden_node_locks_held')).to.deep.equal([]);
      expect(samplesOf(text, 'vgpu_warden_lock_source_errors_total')).to.deep.equal([
        'vgpu_warden_lock_source_errors_total 0',
      ]);
    });

    it('accept an async source', async () => {
      const metrics = new WardenMetrics({ processMetrics: false });
      metrics.setLockSource(() => Promise.resolve([{ node: 'gpu-a', ageSeconds: 3, state: 'held' }]));
      expect(await metrics.text()).to.include('vgpu_warden_node_lock_age_seconds{node="gpu-a"} 3');
    });

    it('leave the lock gauges out, count the failure and keep the rest of the scrape when the source fails', async () => {
      const seen: unknown[] = [];
      const metrics = new WardenMetrics({ processMetrics: false, onLockSourceError: (error) => seen.push(error) });
      metrics.setLockSource(() => {
        throw new Error('cache not synced');
      });
      metrics.recordContention();
      const text = await metrics.text();
      expect(samplesOf(text, 'vgpu_warden_node_locks_held')).to.deep.equal([]);
      expect(samplesOf(text, 'vgpu_warden_lock_source_errors_total')).to.deep.equal([
        'vgpu_warden_lock_source_errors_total 1',
      ]);
      expect(samplesOf(text, 'vgpu_warden_lock_contentions_total')).to.deep.equal([
        'vgpu_warden_lock_contentions_total 1',
      ]);
      expect(seen).to.have.length(1);
    });
  });

  it('counts pods with an unreadable allocation by how they are counted, absent without a source', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    expect(samplesOf(await metrics.text(), 'vgpu_warden_unreadable_allocations')).to.deep.equal([]);
    metrics.setUnreadableAllocationSource(() => [
      { counted: 'whole-node' },
      { counted: 'last-readable' },
      { counted: 'whole-node' },
    ]);
    expect(samplesOf(await metrics.text(), 'vgpu_warden_unreadable_allocations')).to.have.members([
      'vgpu_warden_unreadable_allocations{counted="last-readable"} 1',
      'vgpu_warden_unreadable_allocations{counted="whole-node"} 2',
    ]);
    metrics.setUnreadableAllocationSource(() => []);
    expect(samplesOf(await metrics.text(), 'vgpu_warden_unreadable_allocations')).to.have.members([
      'vgpu_warden_unreadable_allocations{counted="last-readable"} 0',
      'vgpu_warden_unreadable_allocations{counted="whole-node"} 0',
    ]);
  });

  it('adds the standard process metrics when asked, unprefixed as Prometheus expects', async () => {
    const text = await new WardenMetrics().text();
    expect(text).to.include('# TYPE process_cpu_seconds_total counter');
    expect(text).to.include('# TYPE nodejs_eventloop_lag_seconds gauge');
  });
});

describe('WardenMetrics: HAMi scheduler families', () => {
  // Names and label names exactly as HAMi's cmd/scheduler/metrics.go registers them; every
  // series also carries zone="vGPU", the constant label HAMi wraps its registry with.
  const HAMI: [string, string[]][] = [
    ['hami_gpu_memory_limit_bytes', ['node', 'device_uuid', 'device_index', 'device_type']],
    ['hami_gpu_core_limit_ratio', ['node', 'device_uuid', 'device_index', 'device_type']],
    ['hami_gpu_memory_allocated_bytes', ['node', 'device_uuid', 'device_index', 'device_cores', 'device_type']],
    ['hami_gpu_shared_count', ['node', 'device_uuid', 'device_index', 'device_type']],
    ['hami_gpu_core_allocated_ratio', ['node', 'device_uuid', 'device_index', 'device_type']],
    [
      'hami_node_gpu_overview',
      ['node', 'device_uuid', 'device_index', 'device_cores', 'device_memory_limit', 'device_type'],
    ],
    ['hami_node_gpu_memory_allocated_ratio', ['node', 'device_uuid', 'device_index']],
    ['GPUDeviceMemoryLimit', ['nodeid', 'deviceuuid', 'deviceidx', 'devicetype']],
    ['GPUDeviceCoreLimit', ['nodeid', 'deviceuuid', 'deviceidx', 'devicetype']],
    ['GPUDeviceMemoryAllocated', ['nodeid', 'deviceuuid', 'deviceidx', 'devicecores', 'devicetype']],
    ['GPUDeviceSharedNum', ['nodeid', 'deviceuuid', 'deviceidx', 'devicetype']],
    ['GPUDeviceCoreAllocated', ['nodeid', 'deviceuuid', 'deviceidx', 'devicetype']],
    ['nodeGPUOverview', ['nodeid', 'deviceuuid', 'deviceidx', 'devicecores', 'devicememorylimit', 'devicetype']],
    ['nodeGPUMemoryPercentage', ['nodeid', 'deviceuuid', 'deviceidx']],
  ];
  const gpu = (over: Partial<GpuSample> = {}): GpuSample => ({
    node: 'n1',
    uuid: 'GPU-a',
    index: 0,
    type: 'NVIDIA-T4',
    memoryMiB: 16_000,
    cores: 100,
    usedMemoryMiB: 4000,
    usedCores: 30,
    shared: 2,
    ...over,
  });
  const labelNamesOf = (line: string): string[] =>
    [...(/\{(.*)\}/.exec(line)?.[1] ?? '').matchAll(/(\w+)="/g)].map((m) => m[1] ?? '');

  it("registers exactly HAMi's gauge families with HAMi's label names", async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    metrics.setGpuSource(() => [gpu()]);
    const text = await metrics.text();
    expect(HAMI_GPU_FAMILIES.map((family) => family.name)).to.have.members(HAMI.map(([name]) => name));
    for (const [name, labels] of HAMI) {
      expect(text).to.include(`# TYPE ${name} gauge\n`);
      const lines = samplesOf(text, name);
      expect(lines, name).to.have.length(1);
      expect(labelNamesOf(lines[0] ?? ''), name).to.have.members(['zone', ...labels]);
      expect(lines[0], name).to.include('zone="vGPU"');
    }
  });

  it("reports HAMi's values: bytes from MiB, core ratios rounded up, legacy raw cores, memory fraction", async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    metrics.setGpuSource(() => [gpu({ cores: 200, usedCores: 33 })]);
    const text = await metrics.text();
    const value = (name: string): number => Number(samplesOf(text, name)[0]?.split(' ').pop());
    expect(value('hami_gpu_memory_limit_bytes')).to.equal(16_000 * 1024 * 1024);
    expect(value('hami_gpu_memory_allocated_bytes')).to.equal(4000 * 1024 * 1024);
    expect(value('hami_node_gpu_overview')).to.equal(4000 * 1024 * 1024);
    expect(value('hami_gpu_core_limit_ratio')).to.equal(100);
    expect(value('hami_gpu_core_allocated_ratio')).to.equal(17); // ceil(33 / 200 × 100)
    expect(value('hami_gpu_shared_count')).to.equal(2);
    expect(value('hami_node_gpu_memory_allocated_ratio')).to.equal(0.25);
    expect(value('GPUDeviceCoreLimit')).to.equal(200);
    expect(value('GPUDeviceCoreAllocated')).to.equal(33);
    expect(value('GPUDeviceSharedNum')).to.equal(2);
    expect(value('nodeGPUMemoryPercentage')).to.equal(0.25);
    expect(samplesOf(text, 'hami_node_gpu_overview')[0])
      .to.include('device_cores="200"')
      .and.include('device_memory_limit="16000"')
      .and.include('device_index="0"');
  });

  it('are absent without a source or when it answers undefined, read the source once per scrape, and drop a GPU that went away', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    expect(samplesOf(await metrics.text(), 'hami_gpu_shared_count')).to.deep.equal([]);
    let calls = 0;
    let gpus: GpuSample[] | undefined = [
      gpu(),
      gpu({ uuid: 'GPU-b', index: 1, shared: 0, usedMemoryMiB: 0, usedCores: 0 }),
    ];
    metrics.setGpuSource(() => {
      calls += 1;
      return gpus;
    });
    expect(samplesOf(await metrics.text(), 'hami_gpu_shared_count')).to.have.length(2);
    expect(calls).to.equal(1);
    gpus = [gpu()];
    expect(samplesOf(await metrics.text(), 'hami_gpu_shared_count')).to.have.length(1);
    expect(calls).to.equal(2);
    gpus = undefined;
    expect(samplesOf(await metrics.text(), 'GPUDeviceSharedNum')).to.deep.equal([]);
  });

  it('leave out the memory fraction of a GPU with no memory, as HAMi does', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    metrics.setGpuSource(() => [gpu({ memoryMiB: 0, usedMemoryMiB: 0 })]);
    const text = await metrics.text();
    expect(samplesOf(text, 'hami_node_gpu_memory_allocated_ratio')).to.deep.equal([]);
    expect(samplesOf(text, 'nodeGPUMemoryPercentage')).to.deep.equal([]);
    expect(samplesOf(text, 'hami_gpu_memory_limit_bytes')).to.have.length(1);
  });

  it('reads each HAMi source once per scrape and independently: a source that knows nothing leaves out only its own families', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    const reads = { gpus: 0, containers: 0, quotas: 0 };
    let containersKnown = true;
    metrics.setGpuSource(() => {
      reads.gpus += 1;
      return [gpu()];
    });
    metrics.setContainerAllocationSource(() => {
      reads.containers += 1;
      return containersKnown
        ? [
            {
              namespace: 'ml',
              node: 'n1',
              pod: 'p',
              containerIndex: 0,
              uuid: 'GPU-a',
              memoryMiB: 4000,
              cores: 30,
              gpuCores: 100,
            },
          ]
        : undefined;
    });
    metrics.setQuotaSource(() => {
      reads.quotas += 1;
      return [{ namespace: 'ml', resource: 'nvidia.com/gpumem', used: 4000, limit: 8000 }];
    });

    const text = await metrics.text();
    expect(reads).to.deep.equal({ gpus: 1, containers: 1, quotas: 1 });
    expect(samplesOf(text, 'hami_vgpu_memory_allocated_bytes')).to.deep.equal([
      `hami_vgpu_memory_allocated_bytes{zone="vGPU",namespace="ml",node="n1",pod="p",container_index="0",device_uuid="GPU-a"} ${4000 * 1024 * 1024}`,
    ]);
    expect(samplesOf(text, 'hami_vgpu_core_allocated_ratio')).to.deep.equal([
      'hami_vgpu_core_allocated_ratio{zone="vGPU",namespace="ml",node="n1",pod="p",container_index="0",device_uuid="GPU-a"} 30',
    ]);
    expect(samplesOf(text, 'hami_resource_quota_used')).to.deep.equal([
      'hami_resource_quota_used{zone="vGPU",namespace="ml",quota_name="nvidia.com/gpumem",limit="8000"} 4000',
    ]);

    containersKnown = false;
    const partial = await metrics.text();
    expect(reads).to.deep.equal({ gpus: 2, containers: 2, quotas: 2 });
    for (const name of [
      'hami_vgpu_memory_allocated_bytes',
      'hami_vgpu_core_allocated_ratio',
      'vGPUMemoryAllocated',
      'vGPUCoreAllocated',
    ]) {
      expect(samplesOf(partial, name), name).to.deep.equal([]);
      expect(partial).to.include(`# TYPE ${name} gauge\n`);
    }
    expect(samplesOf(partial, 'hami_gpu_shared_count')).to.have.length(1);
    expect(samplesOf(partial, 'QuotaUsed')).to.have.length(1);
  });

  it("gpuSamples joins each node's inventory with its usage, zero where a GPU is unused, skipping nodes without inventory", () => {
    const samples = gpuSamples({
      nodeNames: () => ['n1', 'plain'],
      inventory: (node) =>
        node === 'n1'
          ? {
              devices: [
                { uuid: 'GPU-0', index: 0, memoryMiB: 8000, cores: 100, type: 'T4' },
                { uuid: 'GPU-1', index: 1, memoryMiB: 8000, cores: 100, type: 'T4' },
              ],
            }
          : undefined,
      usageOn: () => new Map([['GPU-1', { slots: 1, memoryMiB: 2000, cores: 25 }]]),
    });
    expect(samples).to.deep.equal([
      {
        node: 'n1',
        uuid: 'GPU-0',
        index: 0,
        type: 'T4',
        memoryMiB: 8000,
        cores: 100,
        usedMemoryMiB: 0,
        usedCores: 0,
        shared: 0,
      },
      {
        node: 'n1',
        uuid: 'GPU-1',
        index: 1,
        type: 'T4',
        memoryMiB: 8000,
        cores: 100,
        usedMemoryMiB: 2000,
        usedCores: 25,
        shared: 1,
      },
    ]);
  });
});

describe('WardenMetrics: leader-only families, build_info and the leader gauge', () => {
  const gpu: GpuSample = {
    node: 'n1',
    uuid: 'GPU-a',
    index: 0,
    type: 'T4',
    memoryMiB: 16_000,
    cores: 100,
    usedMemoryMiB: 4000,
    usedCores: 30,
    shared: 2,
  };
  const lock: LockSample = { node: 'n1', ageSeconds: 12, state: 'held' };
  /** Every family name a scrape carries (from its TYPE lines). */
  const familiesOf = (text: string): string[] => [...text.matchAll(/^# TYPE (\S+) /gm)].map((match) => match[1] ?? '');
  const LEADER_ONLY = [
    'vgpu_warden_node_locks_held',
    'vgpu_warden_node_lock_age_seconds',
    'vgpu_warden_unreadable_allocations',
  ];

  function withSources(leading: { now: boolean }): { metrics: WardenMetrics; reads: Record<string, number> } {
    const reads = { locks: 0, gpus: 0, containers: 0, quotas: 0, unreadable: 0 };
    const metrics = new WardenMetrics({ processMetrics: false, version: '1.2.3' });
    metrics.setLeadership(() => leading.now);
    metrics.setLockSource(() => {
      reads.locks += 1;
      return [lock];
    });
    metrics.setUnreadableAllocationSource(() => {
      reads.unreadable += 1;
      return [{ counted: 'whole-node' }];
    });
    metrics.setGpuSource(() => {
      reads.gpus += 1;
      return [gpu];
    });
    metrics.setContainerAllocationSource(() => {
      reads.containers += 1;
      return [
        {
          namespace: 'ml',
          node: 'n1',
          pod: 'p',
          containerIndex: 0,
          uuid: 'GPU-a',
          memoryMiB: 4000,
          cores: 30,
          gpuCores: 100,
        },
      ];
    });
    metrics.setQuotaSource(() => {
      reads.quotas += 1;
      return [{ namespace: 'ml', resource: 'nvidia.com/gpumem', used: 4000, limit: 8000 }];
    });
    metrics.recordContention();
    metrics.observeBind(0.01, 'success');
    return { metrics, reads };
  }

  it("a follower leaves out HAMi's families and the cluster-wide gauges without reading their sources, and keeps its own process and request metrics", async () => {
    const leading = { now: false };
    const { metrics, reads } = withSources(leading);
    const text = await metrics.text();
    const families = familiesOf(text);
    expect(families.filter((name) => /^(hami_|GPUDevice|nodeGPU|vGPU|QuotaUsed)/.test(name))).to.deep.equal([]);
    for (const name of LEADER_ONLY) expect(samplesOf(text, name), name).to.deep.equal([]);
    expect(reads).to.deep.equal({ locks: 0, gpus: 0, containers: 0, quotas: 0, unreadable: 0 });
    expect(samplesOf(text, 'vgpu_warden_leader')).to.deep.equal(['vgpu_warden_leader 0']);
    expect(samplesOf(text, 'vgpu_warden_build_info')).to.deep.equal(['vgpu_warden_build_info{version="1.2.3"} 1']);
    expect(samplesOf(text, 'vgpu_warden_lock_contentions_total')).to.deep.equal([
      'vgpu_warden_lock_contentions_total 1',
    ]);
    expect(samplesOf(text, 'vgpu_warden_bind_duration_seconds_count')).to.deep.equal([
      'vgpu_warden_bind_duration_seconds_count{outcome="success"} 1',
    ]);
  });

  it('the leader exports them all; leadership is asked at every scrape, so a takeover shows in the next one', async () => {
    const leading = { now: true };
    const { metrics } = withSources(leading);
    const leaderText = await metrics.text();
    expect(samplesOf(leaderText, 'vgpu_warden_leader')).to.deep.equal(['vgpu_warden_leader 1']);
    expect(samplesOf(leaderText, 'vgpu_warden_build_info')).to.deep.equal([
      'vgpu_warden_build_info{version="1.2.3"} 1',
    ]);
    expect(samplesOf(leaderText, 'hami_gpu_shared_count')).to.have.length(1);
    expect(samplesOf(leaderText, 'hami_vgpu_memory_allocated_bytes')).to.have.length(1);
    expect(samplesOf(leaderText, 'hami_resource_quota_used')).to.have.length(1);
    expect(samplesOf(leaderText, 'vgpu_warden_node_locks_held')).to.include(
      'vgpu_warden_node_locks_held{state="held"} 1',
    );
    expect(samplesOf(leaderText, 'vgpu_warden_node_lock_age_seconds')).to.deep.equal([
      'vgpu_warden_node_lock_age_seconds{node="n1"} 12',
    ]);
    expect(samplesOf(leaderText, 'vgpu_warden_unreadable_allocations')).to.include(
      'vgpu_warden_unreadable_allocations{counted="whole-node"} 1',
    );

    leading.now = false;
    const followerText = await metrics.text();
    expect(samplesOf(followerText, 'vgpu_warden_leader')).to.deep.equal(['vgpu_warden_leader 0']);
    expect(samplesOf(followerText, 'hami_gpu_shared_count')).to.deep.equal([]);
    expect(samplesOf(followerText, 'vgpu_warden_node_lock_age_seconds')).to.deep.equal([]);
    leading.now = true;
    expect(samplesOf(await metrics.text(), 'hami_gpu_shared_count')).to.have.length(1);
  });

  it('without a leadership source the process counts as the leader (it runs alone), and the version defaults to unknown', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    metrics.setGpuSource(() => [gpu]);
    const text = await metrics.text();
    expect(samplesOf(text, 'vgpu_warden_leader')).to.deep.equal(['vgpu_warden_leader 1']);
    expect(samplesOf(text, 'vgpu_warden_build_info')).to.deep.equal(['vgpu_warden_build_info{version="unknown"} 1']);
    expect(samplesOf(text, 'hami_gpu_shared_count')).to.have.length(1);
  });
});
