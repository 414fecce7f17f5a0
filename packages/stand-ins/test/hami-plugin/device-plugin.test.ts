import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import {
  AllocateError,
  getPendingPod,
  HamiDevicePlugin,
  MemoryApiError,
  MemoryPluginApi,
  PendingPodError,
  PluginStoppedError,
  wire,
  type AllocateAction,
  type AllocateRequest,
  type HamiDevicePluginOptions,
  type PodIdentity,
} from '../../src/hami-plugin/index.js';
import { LOCK, REGISTER, UUID } from './appendix-a.js';

interface PodSpec {
  namespace?: string;
  name: string;
  toAllocate?: string;
  phase?: string;
  bindPhase?: string;
  nodeName?: string;
  containers?: string[];
  initContainers?: string[];
}

function pod(spec: PodSpec): V1Pod {
  const annotations: Record<string, string> = {
    [wire.VGPU_NODE]: 'gpu-1',
    [wire.BIND_TIME]: '1787293240',
    [wire.BIND_PHASE]: spec.bindPhase ?? 'allocating',
    ...(spec.toAllocate === undefined
      ? {}
      : { [wire.DEVICES_TO_ALLOCATE]: spec.toAllocate, 'hami.io/vgpu-devices-allocated': spec.toAllocate }),
  };
  return {
    metadata: { namespace: spec.namespace ?? 'ml', name: spec.name, annotations },
    spec: {
      nodeName: spec.nodeName ?? 'gpu-1',
      initContainers: spec.initContainers?.map((name) => ({ name, image: 'x' })),
      containers: (spec.containers ?? ['main']).map((name) => ({ name, image: 'x' })),
    },
    status: { phase: spec.phase ?? 'Pending' },
  };
}

function identity(stored: V1Pod): PodIdentity {
  return {
    namespace: stored.metadata?.namespace ?? '',
    name: stored.metadata?.name ?? '',
    uid: stored.metadata?.uid ?? '',
  };
}

function request(admitted: V1Pod, container = 'main', devices = 1): AllocateRequest {
  return {
    node: 'gpu-1',
    admitted: identity(admitted),
    container,
    deviceIds: Array.from({ length: devices }, (_, index) => `${UUID}-${index}`),
  };
}

function annotation(api: MemoryPluginApi, name: string, key: string, namespace = 'ml'): string | undefined {
  return api.pod(namespace, name)?.metadata?.annotations?.[key];
}

describe('HAMi stand-in: Allocate for the pod kubelet admits (§5)', () => {
  let api: MemoryPluginApi;
  const plugin = (options: Partial<HamiDevicePluginOptions> = {}) =>
    new HamiDevicePlugin({ api, sleep: () => Promise.resolve(), ...options });

  beforeEach(() => {
    api = new MemoryPluginApi();
    api.addNode('gpu-1', { [wire.NODE_REGISTER]: REGISTER });
  });

  it('runs the Appendix A worked example: env, ";;", bind-phase success, lock deleted', async () => {
    const train = api.addPod(pod({ name: 'train-0', toAllocate: `${UUID},NVIDIA,3000,0:;` }));
    api.setLock('gpu-1', LOCK);
    const response = await plugin({ cacheId: () => 'cache-1' }).allocate(request(train));
    expect(response.envs).to.deep.equal({
      NVIDIA_VISIBLE_DEVICES: UUID,
      CUDA_DEVICE_MEMORY_LIMIT_0: '3000m',
      CUDA_DEVICE_SM_LIMIT: '0',
      CUDA_DEVICE_MEMORY_SHARED_CACHE: '/usr/local/vgpu/cache-1.cache',
      LIBCUDA_LOG_LEVEL: '1',
    });
    expect(response.record.envs).to.deep.equal(response.envs);
    expect(annotation(api, 'train-0', wire.DEVICES_TO_ALLOCATE)).to.equal(';;');
    expect(annotation(api, 'train-0', wire.BIND_PHASE)).to.equal('success');
    expect(api.lock('gpu-1')).to.equal(undefined);
    expect(response.record).to.deep.include({
      outcome: 'allocated',
      admitted: identity(train),
      resolvedTo: identity(train),
      via: 'lock',
      lock: LOCK,
      segment: 0,
      resolvedContainer: 'main',
      bindPhase: 'success',
      lockRelease: 'released',
    });
  });

  it('advertises count replicas per healthy GPU to kubelet (ListAndWatch)', async () => {
    const ids = await plugin().listDevices('gpu-1');
    expect(ids).to.have.length(10);
    expect(ids[0]).to.equal(`${UUID}-0`);
    api.addNode('gpu-2', {
      [wire.NODE_REGISTER]: `[{"id":"GPU-b","count":4,"devmem":1,"devcore":100,"type":"T","mode":"hami-core"}]`,
    });
    expect(await plugin().listDevices('gpu-2'), 'health omitted means false').to.deep.equal([]);
  });

  it('gives pod X the devices of pod P when the lock names P, and records it (HAMi #3096)', async () => {
    const victim = api.addPod(pod({ name: 'x', toAllocate: 'GPU-x,NVIDIA,1000,10:;' }));
    api.addPod(pod({ name: 'p', toAllocate: 'GPU-p,NVIDIA,8000,80:;' }));
    api.setLock('gpu-1', '2026-08-21T06:20:40Z,ml,p');
    const stand = plugin();
    const response = await stand.allocate(request(victim));
    expect(response.envs.NVIDIA_VISIBLE_DEVICES).to.equal('GPU-p');
    expect(response.record.admitted.name).to.equal('x');
    expect(response.record.resolvedTo?.name).to.equal('p');
    // P's annotation was consumed and P marked done; X's is untouched.
    expect(annotation(api, 'p', wire.DEVICES_TO_ALLOCATE)).to.equal(';;');
    expect(annotation(api, 'p', wire.BIND_PHASE)).to.equal('success');
    expect(annotation(api, 'x', wire.DEVICES_TO_ALLOCATE)).to.equal('GPU-x,NVIDIA,1000,10:;');
    expect(stand.foreignAllocations().map((record) => record.admitted.name)).to.deep.equal(['x']);
  });

  it('counts a same-name pod of another incarnation as another pod (UIDs differ)', async () => {
    const old = api.addPod(pod({ name: 'same', toAllocate: 'GPU-1,NVIDIA,1,1:;' }));
    api.pods.delete('ml/same');
    api.addPod(pod({ name: 'same', toAllocate: 'GPU-2,NVIDIA,1,1:;' }));
    api.setLock('gpu-1', '2026-08-21T06:20:40Z,ml,same');
    const stand = plugin();
    await stand.allocate(request(old));
    expect(stand.foreignAllocations()).to.have.length(1);
  });

  it('consumes one container per call, init containers first, and releases the lock after the last', async () => {
    const multi = api.addPod(
      pod({
        name: 'multi',
        initContainers: ['setup'],
        containers: ['main', 'side'],
        toAllocate: 'GPU-i,NVIDIA,1,1:;GPU-m,NVIDIA,2,2:;;',
      }),
    );
    api.setLock('gpu-1', '2026-08-21T06:20:40Z,ml,multi');
    const stand = plugin();
    const first = await stand.allocate(request(multi, 'setup'));
    expect(first.record).to.deep.include({ segment: 0, resolvedContainer: 'setup' });
    expect(first.record.bindPhase, 'NVIDIA still left: keep the lock').to.equal(undefined);
    expect(api.lock('gpu-1')).to.not.equal(undefined);
    const second = await stand.allocate(request(multi, 'main'));
    expect(second.record).to.deep.include({
      segment: 1,
      resolvedContainer: 'main',
      bindPhase: 'success',
      lockRelease: 'released',
    });
    expect(second.devices.map((device) => device.uuid)).to.deep.equal(['GPU-m']);
    expect(annotation(api, 'multi', wire.DEVICES_TO_ALLOCATE)).to.equal(';;;;;');
    expect(api.lock('gpu-1')).to.equal(undefined);
  });

  describe('failures, as HAMi reports them', () => {
    it('no lock and no fallback: the call fails, nothing is written', async () => {
      const lone = api.addPod(pod({ name: 'lone', toAllocate: 'GPU-a,NVIDIA,1,1:;' }));
      const stand = plugin();
      const error: unknown = await stand.allocate(request(lone)).catch((caught: unknown) => caught);
      expect(error).to.be.instanceOf(AllocateError);
      expect((error as Error).message).to.equal('no binding pod found on node gpu-1');
      expect(annotation(api, 'lone', wire.BIND_PHASE)).to.equal('allocating');
      expect(api.calls.filter((call) => call.startsWith('patch'))).to.deep.equal([]);
      expect(stand.records[0]).to.deep.include({ outcome: 'failed', error: 'no binding pod found on node gpu-1' });
      expect(stand.records[0]?.resolvedTo).to.equal(undefined);
    });

    it('the pod the lock names is gone: the call fails and the lock stays', async () => {
      const admitted = api.addPod(pod({ name: 'admitted', toAllocate: 'GPU-a,NVIDIA,1,1:;' }));
      api.setLock('gpu-1', '2026-08-21T06:20:40Z,ml,ghost');
      const error: unknown = await plugin()
        .allocate(request(admitted))
        .catch((caught: unknown) => caught);
      expect((error as Error).message)
        .to.include('ml/ghost')
        .and.include('not found');
      expect(api.lock('gpu-1')).to.equal('2026-08-21T06:20:40Z,ml,ghost');
    });

    it("device count not matching kubelet's request: bind-phase failed and the lock released", async () => {
      const two = api.addPod(pod({ name: 'two', toAllocate: 'GPU-a,NVIDIA,1,1:GPU-b,NVIDIA,1,1:;' }));
      api.setLock('gpu-1', '2026-08-21T06:20:40Z,ml,two');
      const stand = plugin();
      const error: unknown = await stand.allocate(request(two, 'main', 1)).catch((caught: unknown) => caught);
      expect((error as Error).message).to.equal('device number not matched');
      expect(annotation(api, 'two', wire.BIND_PHASE)).to.equal('failed');
      expect(annotation(api, 'two', wire.DEVICES_TO_ALLOCATE), 'nothing consumed').to.equal(
        'GPU-a,NVIDIA,1,1:GPU-b,NVIDIA,1,1:;',
      );
      expect(api.lock('gpu-1')).to.equal(undefined);
      expect(stand.records[0]).to.deep.include({ outcome: 'failed', bindPhase: 'failed', lockRelease: 'released' });
    });

    for (const [title, value, message] of [
      ['missing', undefined, 'device request not found'],
      ['already consumed', ';;', 'device request not found'],
      [
        'undecodable',
        'GPU-a,NVIDIA:;',
        'pod annotation format error, missing fields, do not use nodeName in task spec',
      ],
    ] as const) {
      it(`to-allocate ${title}: "${message}", bind-phase failed, lock released`, async () => {
        const bad = api.addPod(pod({ name: 'bad', ...(value === undefined ? {} : { toAllocate: value }) }));
        api.setLock('gpu-1', '2026-08-21T06:20:40Z,ml,bad');
        const error: unknown = await plugin()
          .allocate(request(bad))
          .catch((caught: unknown) => caught);
        expect((error as Error).message).to.equal(message);
        expect(annotation(api, 'bad', wire.BIND_PHASE)).to.equal('failed');
        expect(api.lock('gpu-1')).to.equal(undefined);
      });
    }

    it('releases only a lock it owns: a lock another pod took meanwhile is kept', async () => {
      const slow = api.addPod(pod({ name: 'slow', toAllocate: 'GPU-a,NVIDIA,1,1:;' }));
      api.setLock('gpu-1', '2026-08-21T06:20:40Z,ml,slow');
      api.before = (call, target) => {
        if (call === 'patchPodAnnotations' && target === 'ml/slow')
          api.setLock('gpu-1', '2026-08-21T06:20:41Z,ml,other');
      };
      const response = await plugin().allocate(request(slow));
      expect(response.record.lockRelease).to.equal('not-owner');
      expect(api.lock('gpu-1')).to.equal('2026-08-21T06:20:41Z,ml,other');
    });

    it('a failing annotation patch fails the call as PodAllocationFailed', async () => {
      const stuck = api.addPod(pod({ name: 'stuck', toAllocate: 'GPU-a,NVIDIA,1,1:;' }));
      api.setLock('gpu-1', '2026-08-21T06:20:40Z,ml,stuck');
      let failed = false;
      api.before = (call) => {
        if (call === 'patchPodAnnotations' && !failed) {
          failed = true;
          throw new MemoryApiError(500, 'boom');
        }
      };
      const error: unknown = await plugin()
        .allocate(request(stuck))
        .catch((caught: unknown) => caught);
      expect((error as Error).message).to.include('boom');
      expect(annotation(api, 'stuck', wire.BIND_PHASE)).to.equal('failed');
      expect(api.lock('gpu-1')).to.equal(undefined);
    });
  });

  describe('configured behaviours', () => {
    const behaviour = (action: AllocateAction) => () => action;

    it('fail after the lookup: as PodAllocationFailed (bind-phase failed, lock released)', async () => {
      const target = api.addPod(pod({ name: 't', toAllocate: 'GPU-a,NVIDIA,1,1:;' }));
      api.setLock('gpu-1', '2026-08-21T06:20:40Z,ml,t');
      const error: unknown = await plugin({ behaviour: behaviour({ kind: 'fail', message: 'nvml gone' }) })
        .allocate(request(target))
        .catch((caught: unknown) => caught);
      expect((error as Error).message).to.equal('nvml gone');
      expect(annotation(api, 't', wire.BIND_PHASE)).to.equal('failed');
      expect(api.lock('gpu-1')).to.equal(undefined);
    });

    it('fail before the lookup: nothing read, nothing written', async () => {
      const target = api.addPod(pod({ name: 't', toAllocate: 'GPU-a,NVIDIA,1,1:;' }));
      api.setLock('gpu-1', '2026-08-21T06:20:40Z,ml,t');
      await plugin({ behaviour: behaviour({ kind: 'fail', stage: 'before-lookup' }) })
        .allocate(request(target))
        .catch(() => undefined);
      expect(api.calls).to.deep.equal([]);
      expect(api.lock('gpu-1')).to.not.equal(undefined);
    });

    it('stall: never answers, holds up later calls on the node, and stop() fails them all', async () => {
      const a = api.addPod(pod({ name: 'a', toAllocate: 'GPU-a,NVIDIA,1,1:;' }));
      const b = api.addPod(pod({ name: 'b', toAllocate: 'GPU-b,NVIDIA,1,1:;' }));
      api.setLock('gpu-1', '2026-08-21T06:20:40Z,ml,a');
      const stand = plugin({
        behaviour: (call) => (call.admitted.name === 'a' ? { kind: 'stall' } : { kind: 'allocate' }),
      });
      const settled: string[] = [];
      const first = stand.allocate(request(a)).catch((error: unknown) => {
        settled.push(`a:${(error as Error).name}`);
      });
      const second = stand.allocate(request(b)).catch((error: unknown) => {
        settled.push(`b:${(error as Error).name}`);
      });
      await new Promise((resolve) => setTimeout(resolve, 30));
      expect(settled).to.deep.equal([]);
      expect(api.calls, 'b waits behind the stalled call').to.deep.equal([]);
      stand.stop();
      await Promise.all([first, second]);
      expect(settled).to.deep.equal([`a:${PluginStoppedError.name}`, `b:${PluginStoppedError.name}`]);
      expect(stand.records.map((record) => record.outcome)).to.deep.equal(['stalled']);
    });

    it('stall for a while: then fails as a broken connection, nothing written', async () => {
      const a = api.addPod(pod({ name: 'a', toAllocate: 'GPU-a,NVIDIA,1,1:;' }));
      api.setLock('gpu-1', '2026-08-21T06:20:40Z,ml,a');
      const stand = plugin({ behaviour: behaviour({ kind: 'stall', forMs: 10 }) });
      const error: unknown = await stand.allocate(request(a)).catch((caught: unknown) => caught);
      expect(error).to.be.instanceOf(AllocateError).and.not.instanceOf(PluginStoppedError);
      expect((error as AllocateError).code).to.equal('Unavailable');
      expect(stand.records.map((record) => record.outcome)).to.deep.equal(['stalled', 'failed']);
      expect(api.lock('gpu-1')).to.not.equal(undefined);
    });

    it('delay: applied before the lookup, per call', async () => {
      const a = api.addPod(pod({ name: 'a', toAllocate: 'GPU-a,NVIDIA,1,1:;' }));
      api.setLock('gpu-1', '2026-08-21T06:20:40Z,ml,a');
      const slept: number[] = [];
      await plugin({
        delayMs: (call) => (call.admitted.name === 'a' ? 42 : 0),
        sleep: (ms) => {
          slept.push(ms);
          return Promise.resolve();
        },
      }).allocate(request(a));
      expect(slept).to.deep.equal([42]);
    });
  });
});

describe('HAMi stand-in: GetPendingPod (§5 "Finding the pod")', () => {
  let api: MemoryPluginApi;
  beforeEach(() => {
    api = new MemoryPluginApi();
    api.addNode('gpu-1');
  });

  it('takes the pod the lock names with no phase, node or UID check', async () => {
    api.addPod(pod({ name: 'elsewhere', nodeName: 'gpu-9', phase: 'Running', bindPhase: 'success' }));
    api.setLock('gpu-1', '2026-08-21T06:20:40Z,ml,elsewhere');
    const found = await getPendingPod(api, 'gpu-1', { fallback: true });
    expect(found.via).to.equal('lock');
    expect(found.pod.metadata?.name).to.equal('elsewhere');
  });

  it('refuses a lock it cannot parse', async () => {
    api.setLock('gpu-1', 'lock');
    const error: unknown = await getPendingPod(api, 'gpu-1', { fallback: true }).catch((caught: unknown) => caught);
    expect(error).to.be.instanceOf(PendingPodError);
    expect((error as Error).message).to.include('parsing time "lock"');
  });

  for (const lock of [undefined, '2026-07-03T15:35:10+08:00', '2026-08-21T06:20:40Z,,']) {
    const what = lock === undefined ? 'no lock' : `lock "${lock}" (names no pod)`;

    it(`${what}: fails without the fallback`, async () => {
      api.addPod(pod({ name: 'binding' }));
      if (lock !== undefined) api.setLock('gpu-1', lock);
      const error: unknown = await getPendingPod(api, 'gpu-1', { fallback: false }).catch((caught: unknown) => caught);
      expect((error as Error).message).to.equal('no binding pod found on node gpu-1');
      expect(api.calls.some((call) => call.startsWith('listPodsOnNode'))).to.equal(false);
    });

    it(`${what}: HAMi's fallback takes the first Pending pod of the node with bind-time, bind-phase allocating/success and vgpu-node`, async () => {
      api.addPod(pod({ name: 'running', phase: 'Running' }));
      api.addPod(pod({ name: 'failed-phase', bindPhase: 'failed' }));
      api.addPod(pod({ name: 'other-node', nodeName: 'gpu-2' }));
      api.addPod(pod({ name: 'binding', bindPhase: 'success' }));
      if (lock !== undefined) api.setLock('gpu-1', lock);
      const found = await getPendingPod(api, 'gpu-1', { fallback: true });
      expect(found.via).to.equal('fallback');
      expect(found.pod.metadata?.name).to.equal('binding');
    });
  }
});
