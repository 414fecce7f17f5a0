import { expect } from 'chai';
import { initContainersAllSucceeded, PodUsageIndex } from '../../../src/cluster/pod-usage-index.js';
import { ALLOCATED_ANNOTATION, VGPU_NODE_ANNOTATION } from '../../../src/hami/wire.js';
import type { GpuUse } from '../../../src/devices/usage.js';

/**
 * HAMi's accounting of one pod, written from its code (pkg/device/initcontainer.go collapse /
 * CollapseInitContainerUsage / AppContainersOnly / InitContainersAllSucceeded, and the pod
 * manager's sticky ShrinkToAppOnly), independently of src/: per GPU, count and each resource are
 * max(sum over app containers, max over single init containers); once every init container has
 * terminated with exit code 0 the pod counts its app containers only, and stays so.
 */
class HamiPodAccounting {
  private shrunk = false;
  constructor(
    private readonly segments: string[],
    private readonly initCount: number,
  ) {}

  observe(pod: TestPod): Map<string, GpuUse> {
    if (!this.shrunk && hamiInitContainersAllSucceeded(pod)) this.shrunk = true;
    return this.collapse(this.shrunk);
  }

  private collapse(appOnly: boolean): Map<string, GpuUse> {
    const acc = new Map<
      string,
      { appCount: number; appMem: number; appCores: number; initCount: number; initMem: number; initCores: number }
    >();
    this.segments.forEach((segment, index) => {
      const isInit = index < this.initCount;
      if (isInit && appOnly) return;
      const perContainer = new Map<string, { count: number; mem: number; cores: number }>();
      for (const device of segment.split(':').filter((piece) => piece !== '')) {
        const [uuid = '', , mem = '0', cores = '0'] = device.split(',');
        const entry = perContainer.get(uuid) ?? { count: 0, mem: 0, cores: 0 };
        perContainer.set(uuid, {
          count: entry.count + 1,
          mem: entry.mem + Number(mem),
          cores: entry.cores + Number(cores),
        });
      }
      for (const [uuid, use] of perContainer) {
        const a = acc.get(uuid) ?? { appCount: 0, appMem: 0, appCores: 0, initCount: 0, initMem: 0, initCores: 0 };
        if (isInit)
          acc.set(uuid, {
            ...a,
            initCount: Math.max(a.initCount, use.count),
            initMem: Math.max(a.initMem, use.mem),
            initCores: Math.max(a.initCores, use.cores),
          });
        else
          acc.set(uuid, {
            ...a,
            appCount: a.appCount + use.count,
            appMem: a.appMem + use.mem,
            appCores: a.appCores + use.cores,
          });
      }
    });
    const result = new Map<string, GpuUse>();
    for (const [uuid, a] of acc) {
      const slots = Math.max(a.appCount, a.initCount);
      if (slots > 0)
        result.set(uuid, { slots, memoryMiB: Math.max(a.appMem, a.initMem), cores: Math.max(a.appCores, a.initCores) });
    }
    return result;
  }
}

function hamiInitContainersAllSucceeded(pod: TestPod): boolean {
  const init = pod.spec.initContainers.length;
  const statuses = pod.status.initContainerStatuses ?? [];
  if (init === 0 || statuses.length < init) return false;
  return statuses.every((status) => status.state.terminated !== undefined && status.state.terminated.exitCode === 0);
}

interface TestPod {
  metadata: { uid: string; namespace: string; name: string; annotations: Record<string, string> };
  spec: { nodeName?: string; initContainers: { name: string }[]; containers: { name: string }[] };
  status: {
    phase: string;
    initContainerStatuses?: {
      name: string;
      state: { running?: object; waiting?: object; terminated?: { exitCode: number } };
    }[];
  };
}

// init container "fetch" takes 20000 MiB of GPU-a; app "train" 8000 MiB and 30 cores of GPU-a;
// app "serve" 4000 MiB of GPU-a and 1000 MiB of GPU-b.
const SEGMENTS = ['GPU-a,NVIDIA,20000,0:', 'GPU-a,NVIDIA,8000,30:', 'GPU-a,NVIDIA,4000,0:GPU-b,NVIDIA,1000,10:'];
const ENCODED = `${SEGMENTS.join(';')};`;

function pod(phase: string, init?: 'waiting' | 'running' | { exitCode: number }): TestPod {
  return {
    metadata: {
      uid: 'u1',
      namespace: 'ml',
      name: 'train-0',
      annotations: { [ALLOCATED_ANNOTATION]: ENCODED, [VGPU_NODE_ANNOTATION]: 'gpu-1' },
    },
    spec: {
      nodeName: 'gpu-1',
      initContainers: [{ name: 'fetch' }],
      containers: [{ name: 'train' }, { name: 'serve' }],
    },
    status: {
      phase,
      ...(init === undefined
        ? {}
        : {
            initContainerStatuses: [
              {
                name: 'fetch',
                state:
                  init === 'waiting' ? { waiting: {} } : init === 'running' ? { running: {} } : { terminated: init },
              },
            ],
          }),
    },
  };
}

const asObject = (usage: ReadonlyMap<string, GpuUse>): Record<string, GpuUse> =>
  Object.fromEntries([...usage].sort(([a], [b]) => a.localeCompare(b)));

describe('init-container accounting (HAMi: app containers only once the init containers have succeeded)', () => {
  it("HAMi's view and ours agree at every step of a pod's life, Pending with an init container to Running to Succeeded", () => {
    const ours = new PodUsageIndex();
    const hami = new HamiPodAccounting(SEGMENTS, 1);
    const life: [string, TestPod][] = [
      ['bound, not started', pod('Pending')],
      ['init container waiting', pod('Pending', 'waiting')],
      ['init container running', pod('Pending', 'running')],
      ['init container done, apps starting', pod('Pending', { exitCode: 0 })],
      ['Running', pod('Running', { exitCode: 0 })],
      ['sandbox restarted, init container running again', pod('Running', 'running')],
    ];
    const seen: Record<string, Record<string, GpuUse>> = {};
    for (const [step, object] of life) {
      ours.upsert(object);
      // A fresh index is how a bind counts pods its store has not seen (usageIncluding): it must agree too.
      const fresh = new PodUsageIndex();
      fresh.upsert(object);
      const expected = asObject(hami.observe(object));
      expect(asObject(ours.usageOn('gpu-1')), step).to.deep.equal(expected);
      seen[step] = expected;
      if (step !== 'sandbox restarted, init container running again')
        expect(asObject(fresh.usageOn('gpu-1')), `${step} (fresh)`).to.deep.equal(expected);
    }
    // The figures themselves: the init container's 20000 MiB dominates GPU-a until it has finished.
    expect(seen['init container running']?.['GPU-a']).to.deep.equal({ slots: 2, memoryMiB: 20000, cores: 30 });
    expect(seen.Running).to.deep.equal({
      'GPU-a': { slots: 2, memoryMiB: 12000, cores: 30 },
      'GPU-b': { slots: 1, memoryMiB: 1000, cores: 10 },
    });
    ours.upsert(pod('Succeeded', { exitCode: 0 }));
    expect(ours.usageOn('gpu-1').size).to.equal(0);
  });

  it('a failed init container (exit code 1, about to be retried) keeps the init-inclusive usage, in both views', () => {
    const ours = new PodUsageIndex();
    const hami = new HamiPodAccounting(SEGMENTS, 1);
    const failed = pod('Pending', { exitCode: 1 });
    ours.upsert(failed);
    expect(asObject(ours.usageOn('gpu-1'))).to.deep.equal(asObject(hami.observe(failed)));
    expect(ours.usageOn('gpu-1').get('GPU-a')?.memoryMiB).to.equal(20000);
  });

  it('initContainersAllSucceeded: none declared, a status missing, one still running or failed is false', () => {
    const base = pod('Pending', { exitCode: 0 });
    expect(initContainersAllSucceeded(base)).to.equal(true);
    expect(initContainersAllSucceeded({ ...base, spec: { ...base.spec, initContainers: [] } })).to.equal(false);
    expect(
      initContainersAllSucceeded({
        ...base,
        spec: { ...base.spec, initContainers: [{ name: 'fetch' }, { name: 'second' }] },
      }),
    ).to.equal(false);
    expect(initContainersAllSucceeded(pod('Pending', 'running'))).to.equal(false);
    expect(initContainersAllSucceeded(pod('Pending', { exitCode: 2 }))).to.equal(false);
  });

  it("shrinking frees capacity for the next pod: the node's usage drops as soon as the status says so", () => {
    const changed: string[] = [];
    const index = new PodUsageIndex(Date.now, undefined, (node) => {
      changed.push(node);
    });
    index.upsert(pod('Pending', 'running'));
    changed.length = 0;
    index.upsert(pod('Pending', 'running'));
    expect(changed, 'an update that changes nothing does not touch the node').to.deep.equal([]);
    index.upsert(pod('Running', { exitCode: 0 }));
    expect(changed).to.include('gpu-1');
    expect(index.usageOn('gpu-1').get('GPU-a')?.memoryMiB).to.equal(12000);
  });
});
