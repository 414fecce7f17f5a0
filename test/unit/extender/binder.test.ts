import { ApiException, type CoreV1Api, type V1Node, type V1NodeSystemInfo, type V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterCache } from '../../../src/cluster/cluster-cache.js';
import type { ListWatchSource, WatchEventType } from '../../../src/cluster/reflector.js';
import { ALLOCATED_ANNOTATION, NODE_LOCK_ANNOTATION, TO_ALLOCATE_ANNOTATION } from '../../../src/hami/wire.js';
import { DEFAULT_REQUEST_DEFAULTS } from '../../../src/devices/requests.js';
import { Binder } from '../../../src/extender/binder.js';
import type { BoundPod } from '../../../src/extender/binding-label-follow-up.js';
import { WriteConflictError } from '../../../src/lock/lock-errors.js';
import { parseLockValue, type PodRef } from '../../../src/lock/lock-value.js';
import type { NodeLockApi, NodeSnapshot } from '../../../src/lock/node-lock-api.js';
import { NodeLocks } from '../../../src/lock/node-locks.js';
import { ownerPodFrom, type OwnerPod } from '../../../src/lock/owner-pod.js';
import { simulatedGpuNode } from '../../../src/local/simulated-gpu-node.js';
import type { EventRecorder } from '../../../src/telemetry/events.js';
import { eventually, notYet } from '../../support/eventually.js';
import type { Clock } from '../../../src/base/clock.js';
import { untilAborted } from '../../../src/base/abort.js';

/** A list-watch source over a fixed list whose watch stays open; `emit` pushes events. */
class StaticSource<T> implements ListWatchSource<T> {
  private handlers: ((type: WatchEventType, object: T) => void)[] = [];
  constructor(
    private readonly items: () => T[],
    private readonly version: () => string = () => '1',
  ) {}
  list(): Promise<{ items: T[]; resourceVersion: string }> {
    return Promise.resolve({ items: this.items(), resourceVersion: this.version() });
  }
  watch(_rv: string, handlers: { onEvent(type: WatchEventType, object: T): void }, signal: AbortSignal): Promise<void> {
    this.handlers.push((type, object) => {
      handlers.onEvent(type, object);
    });
    return untilAborted(signal);
  }
  emit(type: WatchEventType, object: T): void {
    for (const handler of this.handlers) handler(type, object);
  }
}

type Fault = 'lose-answer' | 'hang' | 'conflict' | undefined;

/** The apiserver as far as bind is concerned: one node, pods, Bindings with UID preconditions. */
class FakeApi implements NodeLockApi {
  node: V1Node;
  pods = new Map<string, V1Pod>();
  calls: string[] = [];
  bindingFault: Fault;
  lockWriteFault: Fault;
  /** Faults for the next node reads, one each. */
  readFaults: Fault[] = [];
  rv = 10;
  /** kube-apiserver 1.35+ copies a Binding's labels onto the pod (PodTopologyLabelsAdmission); older ones drop them. */
  bindingCopiesLabels = true;

  constructor(node: V1Node) {
    this.node = { ...node, metadata: { ...node.metadata, resourceVersion: '10' } };
  }

  private async fault<T>(fault: Fault, signal: AbortSignal | undefined, commit: () => T): Promise<T> {
    if (fault === 'hang') {
      // fetch rejects with the signal's reason when it aborts.
      await new Promise<void>((_resolve, reject) => {
        signal?.addEventListener(
          'abort',
          () => {
            reject(signal.reason as Error);
          },
          { once: true },
        );
      });
    }
    if (fault === 'conflict') throw new ApiException(409, 'Conflict', '{"message":"conflict"}', {});
    const result = commit();
    if (fault === 'lose-answer') throw new Error('socket hang up');
    return result;
  }

  readNode(_name: string, signal?: AbortSignal): Promise<NodeSnapshot> {
    this.calls.push('GET node');
    return this.fault(this.readFaults.shift(), signal, () => this.snapshot());
  }

  writeLock(_name: string, resourceVersion: string, value: string | null, signal?: AbortSignal): Promise<NodeSnapshot> {
    this.calls.push('PATCH node');
    return this.fault(this.lockWriteFault, signal, () => {
      if (resourceVersion !== this.node.metadata?.resourceVersion) throw new WriteConflictError('conflict');
      const others = Object.fromEntries(
        Object.entries(this.node.metadata.annotations ?? {}).filter(([key]) => key !== NODE_LOCK_ANNOTATION),
      );
      const annotations = value === null ? others : { ...others, [NODE_LOCK_ANNOTATION]: value };
      this.node = {
        ...this.node,
        metadata: { ...this.node.metadata, annotations, resourceVersion: String(++this.rv) },
      };
      return this.snapshot();
    });
  }

  readPod(pod: PodRef): Promise<OwnerPod | undefined> {
    this.calls.push('GET pod');
    const found = this.pods.get(`${pod.namespace}/${pod.name}`);
    return Promise.resolve(found === undefined ? undefined : ownerPodFrom(found));
  }

  get lock(): string | undefined {
    return this.node.metadata?.annotations?.[NODE_LOCK_ANNOTATION];
  }

  snapshot(): NodeSnapshot {
    return {
      name: this.node.metadata?.name ?? '',
      resourceVersion: this.node.metadata?.resourceVersion ?? '',
      lock: this.lock,
      object: this.node,
    };
  }

  core(): CoreV1Api {
    const api = {
      readNamespacedPod: ({ name, namespace }: { name: string; namespace: string }) => {
        this.calls.push('GET pod');
        const pod = this.pods.get(`${namespace}/${name}`);
        return pod
          ? Promise.resolve(pod)
          : Promise.reject(new ApiException(404, 'NotFound', '{"message":"not found"}', {}));
      },
      createNamespacedPodBinding: (
        request: {
          name: string;
          namespace: string;
          body: {
            metadata: { uid: string; annotations?: Record<string, string>; labels?: Record<string, string> };
            target: { name: string };
          };
        },
        options?: { middleware?: { pre(context: unknown): unknown }[] },
      ) => {
        this.calls.push('POST binding');
        const signal = signalOf(options);
        return this.fault(this.bindingFault, signal, () => {
          const key = `${request.namespace}/${request.name}`;
          const pod = this.pods.get(key);
          if (!pod) throw new ApiException(404, 'NotFound', '{"message":"not found"}', {});
          if (pod.metadata?.uid !== request.body.metadata.uid)
            throw new ApiException(409, 'Conflict', '{"message":"Precondition failed: UID"}', {});
          if (pod.spec?.nodeName) throw new ApiException(409, 'Conflict', '{"message":"pod is already assigned"}', {});
          this.pods.set(key, {
            ...pod,
            metadata: {
              ...pod.metadata,
              annotations: { ...pod.metadata.annotations, ...request.body.metadata.annotations },
              ...(this.bindingCopiesLabels
                ? { labels: { ...pod.metadata.labels, ...request.body.metadata.labels } }
                : {}),
            },
            spec: { ...pod.spec, containers: pod.spec?.containers ?? [], nodeName: request.body.target.name },
          });
          return {};
        });
      },
      listPodForAllNamespaces: ({ fieldSelector }: { fieldSelector?: string }) => {
        this.calls.push('LIST pods');
        const node = /^spec\.nodeName=(.+)$/.exec(fieldSelector ?? '')?.[1];
        return Promise.resolve({
          items: [...this.pods.values()].filter((pod) => node === undefined || pod.spec?.nodeName === node),
        });
      },
      patchNamespacedPod: ({
        name,
        namespace,
        body,
      }: {
        name: string;
        namespace: string;
        body: { metadata: { uid?: string; labels?: Record<string, string> } };
      }) => {
        this.calls.push('PATCH pod');
        const key = `${namespace}/${name}`;
        const pod = this.pods.get(key);
        if (!pod || pod.metadata?.uid !== body.metadata.uid)
          return Promise.reject(new ApiException(409, 'Conflict', '{"message":"uid"}', {}));
        this.pods.set(key, {
          ...pod,
          metadata: { ...pod.metadata, labels: { ...pod.metadata?.labels, ...body.metadata.labels } },
        });
        return Promise.resolve(pod);
      },
    };
    return api as unknown as CoreV1Api;
  }
}

/** The AbortSignal a withSignal() middleware would put on the request. */
function signalOf(options: { middleware?: { pre(context: unknown): unknown }[] } | undefined): AbortSignal | undefined {
  let signal: AbortSignal | undefined;
  for (const middleware of options?.middleware ?? [])
    middleware.pre({
      setSignal: (value: AbortSignal) => {
        signal = value;
      },
      setHeaderParam: () => undefined,
    });
  return signal;
}

function gpuPod(name: string, uid: string, gpumem = '4000'): V1Pod {
  return {
    metadata: { name, namespace: 'ns', uid, resourceVersion: '5' },
    spec: {
      schedulerName: 'hami-scheduler',
      containers: [{ name: 'main', resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': gpumem } } }],
    },
    status: { phase: 'Pending' },
  };
}

const events = { record: () => undefined } as unknown as EventRecorder;
const defaults = {
  nodePolicy: 'binpack' as const,
  gpuPolicy: 'spread' as const,
  requestDefaults: DEFAULT_REQUEST_DEFAULTS,
};

/** Pod `holder` is bound to gpu-1, awaiting allocation, and holds its lock (API and store agree). */
async function holdLockByAllocatingPod(
  parts: Pick<Awaited<ReturnType<typeof setup>>, 'api' | 'podSource' | 'nodeSource'>,
): Promise<void> {
  const holder = {
    ...gpuPod('holder', 'uid-h'),
    metadata: { ...gpuPod('holder', 'uid-h').metadata, annotations: { 'hami.io/bind-phase': 'allocating' } },
    spec: { containers: [], nodeName: 'gpu-1' },
  };
  parts.api.pods.set('ns/holder', holder);
  parts.podSource.emit('MODIFIED', holder);
  await parts.api.writeLock('gpu-1', '10', `${new Date().toISOString().replace(/\.\d+Z$/, 'Z')},ns,holder`);
  parts.nodeSource.emit('MODIFIED', parts.api.node);
}

/** The node as a registered kubelet reports it: with its version. */
function withKubelet(node: V1Node): V1Node {
  return { ...node, status: { ...node.status, nodeInfo: { kubeletVersion: 'v1.34.4' } as V1NodeSystemInfo } };
}

/** `name` bound to gpu-1 earlier, served by the device plugin, not yet acknowledged by kubelet (no startTime). */
function allocatedPod(name: string, uid: string): V1Pod {
  const pod = gpuPod(name, uid);
  return {
    ...pod,
    metadata: {
      ...pod.metadata,
      annotations: {
        [ALLOCATED_ANNOTATION]: 'GPU-gpu-1-0,NVIDIA,4000,0:;',
        'hami.io/vgpu-node': 'gpu-1',
        'hami.io/bind-phase': 'success',
      },
    },
    spec: { ...pod.spec, containers: pod.spec?.containers ?? [], nodeName: 'gpu-1' },
  };
}

function acknowledged(pod: V1Pod): V1Pod {
  return {
    ...pod,
    metadata: { ...pod.metadata, resourceVersion: '11' },
    status: { ...pod.status, startTime: new Date() },
  };
}

interface SetupOptions {
  timeoutMs?: number;
  lockWaitMs?: number;
  events?: EventRecorder;
  kubelet?: boolean;
  successEvents?: boolean;
  lockWaitEventAfterMs?: number;
  labels?: { follow(pod: BoundPod): void };
  clock?: Clock;
  pluginReleaseWaitMs?: number;
}

async function setup(pods: V1Pod[], options: SetupOptions = {}) {
  const node = simulatedGpuNode({ name: 'gpu-1', gpus: 2 });
  const api = new FakeApi(options.kubelet === true ? withKubelet(node) : node);
  for (const pod of pods) api.pods.set(`ns/${pod.metadata?.name ?? ''}`, pod);
  const nodeSource = new StaticSource<V1Node>(() => [api.node]);
  // The pod store has seen everything up to the API's version at start-up.
  const podSource = new StaticSource<V1Pod>(
    () => [...api.pods.values()],
    () => String(api.rv),
  );
  const cache = new ClusterCache({ sources: { nodes: nodeSource, pods: podSource } });
  await cache.start();
  const locks = new NodeLocks({
    api,
    view: cache.lockView,
    config: { bindGraceMs: 60_000, expireMs: 300_000 },
    sleep: () => Promise.resolve(),
  });
  const binder = new Binder({
    core: api.core(),
    cache,
    locks,
    events: options.events ?? events,
    defaults,
    lockWaitMs: options.lockWaitMs ?? 1000,
    timeoutMs: options.timeoutMs ?? 6000,
    cleanupReserveMs: 1000,
    waitPollMs: 50,
    ...(options.successEvents === undefined ? {} : { successEvents: options.successEvents }),
    ...(options.lockWaitEventAfterMs === undefined ? {} : { lockWaitEventAfterMs: options.lockWaitEventAfterMs }),
    ...(options.labels === undefined ? {} : { labels: options.labels }),
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    ...(options.pluginReleaseWaitMs === undefined ? {} : { pluginReleaseWaitMs: options.pluginReleaseWaitMs }),
  });
  return { api, cache, binder, nodeSource, podSource, locks };
}

const args = (name: string, uid: string) => ({ podName: name, podNamespace: 'ns', podUid: uid, node: 'gpu-1' });

describe('Binder (bind against a fake API with faults)', () => {
  let stop: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await stop?.();
    stop = undefined;
  });

  it('happy path: one lock write and one Binding carrying HAMi annotations and the hami.io/vgpu-node label with the UID precondition; nothing else', async () => {
    const followed: BoundPod[] = [];
    const { api, cache, binder } = await setup([gpuPod('a', 'uid-a')], {
      labels: {
        follow: (pod) => {
          followed.push(pod);
        },
      },
    });
    stop = () => cache.stop();
    expect(await binder.bind(args('a', 'uid-a'))).to.deep.equal({});
    expect(api.calls).to.deep.equal(['PATCH node', 'POST binding']);
    // The label's follow-up checks that it arrived (an apiserver before 1.35 drops a Binding's labels).
    expect(followed).to.deep.equal([{ namespace: 'ns', name: 'a', uid: 'uid-a', node: 'gpu-1' }]);
    const pod = api.pods.get('ns/a');
    expect(pod?.spec?.nodeName).to.equal('gpu-1');
    expect(pod?.metadata?.annotations?.[TO_ALLOCATE_ANNOTATION]).to.match(/^GPU-gpu-1-\d,NVIDIA,4000,0:;$/);
    expect(pod?.metadata?.annotations?.[ALLOCATED_ANNOTATION]).to.equal(
      pod?.metadata?.annotations?.[TO_ALLOCATE_ANNOTATION],
    );
    expect(pod?.metadata?.annotations?.['hami.io/bind-phase']).to.equal('allocating');
    expect(pod?.metadata?.labels?.['hami.io/vgpu-node']).to.equal('gpu-1');
    const lock = parseLockValue(api.lock ?? '');
    expect(lock.kind === 'owned' && lock.owner.name).to.equal('a');
  });

  it("records no BindingSucceed by default (kube-scheduler's Scheduled says it), and BindingFailed on failure", async () => {
    const recorded: string[] = [];
    const recorder = {
      record: (target: { name: string }, type: string, reason: string, message: string) => {
        recorded.push(`${target.name} ${type} ${reason}: ${message}`);
      },
    } as unknown as EventRecorder;
    const { api, cache, binder } = await setup([gpuPod('a', 'uid-a'), gpuPod('b', 'uid-b')], { events: recorder });
    stop = () => cache.stop();
    expect(await binder.bind(args('a', 'uid-a'))).to.deep.equal({});
    expect(recorded).to.deep.equal([]);
    api.bindingFault = 'conflict';
    expect((await binder.bind(args('b', 'uid-b'))).error).to.be.a('string');
    expect(recorded.map((line) => line.split(':')[0])).to.deep.equal(['b Warning BindingFailed']);
  });

  it("with successEvents (SUCCESS_EVENTS=true) records HAMi's BindingSucceed with HAMi's message on success, and BindingFailed (never BindingSucceed) on failure", async () => {
    const recorded: string[] = [];
    const recorder = {
      record: (target: { name: string }, type: string, reason: string, message: string) => {
        recorded.push(`${target.name} ${type} ${reason}: ${message}`);
      },
    } as unknown as EventRecorder;
    const { api, cache, binder } = await setup([gpuPod('a', 'uid-a'), gpuPod('b', 'uid-b')], {
      events: recorder,
      successEvents: true,
    });
    stop = () => cache.stop();
    expect(await binder.bind(args('a', 'uid-a'))).to.deep.equal({});
    expect(recorded).to.deep.equal(['a Normal BindingSucceed: Successfully binding node [gpu-1] to ns/a']);
    recorded.length = 0;
    api.bindingFault = 'conflict';
    expect((await binder.bind(args('b', 'uid-b'))).error).to.be.a('string');
    expect(recorded.some((line) => line.includes('BindingSucceed'))).to.equal(false);
    expect(recorded.some((line) => line.startsWith('b Warning BindingFailed: '))).to.equal(true);
  });

  it('a Binding that commits and loses its answer is a success: lock and annotations stay', async () => {
    const { api, cache, binder } = await setup([gpuPod('a', 'uid-a')]);
    stop = () => cache.stop();
    api.bindingFault = 'lose-answer';
    expect(await binder.bind(args('a', 'uid-a'))).to.deep.equal({});
    expect(api.pods.get('ns/a')?.spec?.nodeName).to.equal('gpu-1');
    expect(api.pods.get('ns/a')?.metadata?.annotations?.[ALLOCATED_ANNOTATION]).to.be.a('string');
    expect(api.lock).to.match(/,ns,a$/);
    expect(cache.isAssumed('uid-a')).to.equal(true);
  });

  it('a Binding refused for another incarnation releases exactly our lock and forgets the usage', async () => {
    const { api, cache, binder } = await setup([gpuPod('a', 'uid-a')]);
    stop = () => cache.stop();
    api.pods.set('ns/a', gpuPod('a', 'uid-new'));
    // The store still has the old incarnation (watch lag), so the bind gets as far as the Binding.
    const result = await binder.bind(args('a', 'uid-a'));
    expect(result.error).to.match(/Precondition failed: UID/);
    expect(api.lock).to.equal(undefined);
    expect(api.pods.get('ns/a')?.metadata?.annotations).to.equal(undefined);
    expect(cache.isAssumed('uid-a')).to.equal(false);
  });

  // Issue #42 item 6: the apiserver may still commit a Binding whose request was cut off; released
  // then, the lock would be gone when kubelet calls Allocate for the bound pod. It is left to the
  // rules (held within the bind grace, then released if the pod is not bound here).
  it('a Binding that hangs past the deadline fails within BIND_TIMEOUT and leaves its lock to the rules', async () => {
    const { api, cache, binder } = await setup([gpuPod('a', 'uid-a')], { timeoutMs: 2500 });
    stop = () => cache.stop();
    api.bindingFault = 'hang';
    const started = Date.now();
    const result = await binder.bind(args('a', 'uid-a'));
    expect(Date.now() - started).to.be.lessThan(2500);
    expect(result.error).to.match(/deadline/);
    expect(api.lock, 'kept: the cut-off Binding may still commit').to.match(/,ns,a$/);
    expect(cache.isAssumed('uid-a'), 'the pod still counts where it may be bound').to.equal(true);
  });

  it('a lock write whose answer is lost and whose re-read fails leaves no lock behind', async () => {
    const { api, cache, binder } = await setup([gpuPod('a', 'uid-a')], { timeoutMs: 2500 });
    stop = () => cache.stop();
    api.lockWriteFault = 'lose-answer';
    api.readFaults = ['hang'];
    const result = await binder.bind(args('a', 'uid-a'));
    expect(result.error).to.match(/may have landed/);
    expect(api.lock).to.equal(undefined);
    expect(api.pods.get('ns/a')?.spec?.nodeName).to.equal(undefined);
  });

  it('is idempotent: already bound here answers success with no write; bound elsewhere is an error with no write', async () => {
    const here = { ...gpuPod('a', 'uid-a'), spec: { ...gpuPod('a', 'uid-a').spec, containers: [], nodeName: 'gpu-1' } };
    const elsewhere = {
      ...gpuPod('b', 'uid-b'),
      spec: { ...gpuPod('b', 'uid-b').spec, containers: [], nodeName: 'gpu-2' },
    };
    const { api, cache, binder } = await setup([here, elsewhere]);
    stop = () => cache.stop();
    expect(await binder.bind(args('a', 'uid-a'))).to.deep.equal({});
    expect((await binder.bind(args('b', 'uid-b'))).error).to.match(/already bound to node gpu-2/);
    expect(api.calls).to.deep.equal([]);
  });

  it('refuses a GPU pod whose share cannot be read, writing nothing', async () => {
    const { api, cache, binder } = await setup([gpuPod('a', 'uid-a', '99999999999999')]);
    stop = () => cache.stop();
    expect((await binder.bind(args('a', 'uid-a'))).error).to.match(/unreadable GPU request.*nvidia.com\/gpumem/);
    expect(api.calls).to.deep.equal([]);
  });

  it('re-stamps a lock it already holds with an RV-guarded write (a retried bind renews its age)', async () => {
    const { api, cache, binder } = await setup([gpuPod('a', 'uid-a')]);
    stop = () => cache.stop();
    api.node = {
      ...api.node,
      metadata: {
        ...api.node.metadata,
        annotations: { ...api.node.metadata?.annotations, [NODE_LOCK_ANNOTATION]: '2020-01-01T00:00:00Z,ns,a' },
      },
    };
    cache.lockView.observeWrite({
      ...api.snapshot(),
      object: { ...api.node, metadata: { ...api.node.metadata, resourceVersion: '10' } },
    });
    expect(await binder.bind(args('a', 'uid-a'))).to.deep.equal({});
    expect(api.lock).to.not.equal('2020-01-01T00:00:00Z,ns,a');
    expect(api.calls[0]).to.equal('PATCH node');
  });

  it("counts pods another binder bound while this store's pod watch lagged: lists the node's pods and refuses what no longer fits", async () => {
    const { api, cache, binder } = await setup([gpuPod('a', 'uid-a')]);
    stop = () => cache.stop();
    // Another replica took the lock, bound x and y onto both GPUs in full and the lock was released:
    // the node moved on (rv 12), this store's pod watch delivered none of it.
    for (const [name, gpu] of [
      ['x', 0],
      ['y', 1],
    ] as const) {
      const bound = gpuPod(name, `uid-${name}`, '24576');
      api.pods.set(`ns/${name}`, {
        ...bound,
        metadata: {
          ...bound.metadata,
          annotations: { [ALLOCATED_ANNOTATION]: `GPU-gpu-1-${gpu},NVIDIA,24576,0:;`, 'hami.io/vgpu-node': 'gpu-1' },
        },
        spec: { ...bound.spec, containers: bound.spec?.containers ?? [], nodeName: 'gpu-1' },
      });
    }
    api.rv = 12;
    api.node = { ...api.node, metadata: { ...api.node.metadata, resourceVersion: '12' } };
    expect(cache.usageOn('gpu-1').size, 'the store knows of no usage').to.equal(0);

    const result = await binder.bind(args('a', 'uid-a'));

    expect(result.error).to.match(/no longer fits on node gpu-1/);
    expect(api.calls).to.include('LIST pods');
    expect(api.calls).to.not.include('POST binding');
    expect(api.lock, 'the lock taken for the refused bind is released').to.equal(undefined);
  });

  it("fits against the API's pods while the store lags, picking the GPU the unseen bind left free", async () => {
    const { api, cache, binder } = await setup([gpuPod('a', 'uid-a', '20000')]);
    stop = () => cache.stop();
    const bound = gpuPod('x', 'uid-x', '20000');
    api.pods.set('ns/x', {
      ...bound,
      metadata: {
        ...bound.metadata,
        annotations: { [ALLOCATED_ANNOTATION]: 'GPU-gpu-1-0,NVIDIA,20000,0:;', 'hami.io/vgpu-node': 'gpu-1' },
      },
      spec: { ...bound.spec, containers: bound.spec?.containers ?? [], nodeName: 'gpu-1' },
    });
    api.rv = 12;
    api.node = { ...api.node, metadata: { ...api.node.metadata, resourceVersion: '12' } };

    expect(await binder.bind(args('a', 'uid-a'))).to.deep.equal({});

    expect(api.pods.get('ns/a')?.metadata?.annotations?.[ALLOCATED_ANNOTATION]).to.equal(
      'GPU-gpu-1-1,NVIDIA,20000,0:;',
    );
    // The lock write from the lagging view meets a conflict, is re-read and retried, then the LIST.
    expect(api.calls.slice(-3)).to.deep.equal(['PATCH node', 'LIST pods', 'POST binding']);
  });

  it("a lock taken over from a holder that is gone is followed by a LIST of the node's pods, even with a store that looks current", async () => {
    const { api, cache, binder, nodeSource } = await setup([gpuPod('a', 'uid-a')]);
    stop = () => cache.stop();
    await api.writeLock('gpu-1', '10', '2020-01-01T00:00:00Z,ns,gone');
    nodeSource.emit('MODIFIED', api.node);
    api.calls = [];

    expect(await binder.bind(args('a', 'uid-a'))).to.deep.equal({});

    expect(api.calls).to.include('LIST pods');
    expect(api.lock).to.match(/,ns,a$/);
  });

  it('a bind waiting for a busy node gives up without touching the lock when its pod is recreated meanwhile', async () => {
    const { api, cache, binder, podSource, nodeSource } = await setup(
      [gpuPod('sts-0', 'uid-old'), gpuPod('holder', 'uid-h')],
      { lockWaitMs: 3000 },
    );
    stop = () => cache.stop();
    // Another pod holds the lock, bound and awaiting allocation.
    await holdLockByAllocatingPod({ api, podSource, nodeSource });
    api.calls = [];
    const waiting = binder.bind(args('sts-0', 'uid-old'));
    await new Promise((resolve) => setTimeout(resolve, 100));
    // sts-0 is deleted and recreated under the same name; then the holder's lock is freed.
    podSource.emit('DELETED', gpuPod('sts-0', 'uid-old'));
    podSource.emit('ADDED', gpuPod('sts-0', 'uid-new'));
    api.pods.set('ns/sts-0', gpuPod('sts-0', 'uid-new'));
    const lockValue = api.lock;
    expect(lockValue).to.be.a('string');
    const result = await waiting;
    expect(result.error).to.match(/recreated/);
    expect(api.calls.filter((call) => call !== 'GET pod')).to.deep.equal([]);
    expect(api.lock).to.equal(lockValue);
  });

  it('a bind waiting for a busy node gives up without taking the lock when its pod is deleted meanwhile', async () => {
    const { api, cache, binder, podSource, nodeSource } = await setup(
      [gpuPod('gone-0', 'uid-g'), gpuPod('holder', 'uid-h')],
      { lockWaitMs: 3000 },
    );
    stop = () => cache.stop();
    await holdLockByAllocatingPod({ api, podSource, nodeSource });
    const waiting = binder.bind(args('gone-0', 'uid-g'));
    await new Promise((resolve) => setTimeout(resolve, 100));
    // gone-0 is force-deleted; then the holder's lock is freed, which wakes the waiting bind.
    podSource.emit('DELETED', gpuPod('gone-0', 'uid-g'));
    api.pods.delete('ns/gone-0');
    await api.writeLock('gpu-1', api.node.metadata?.resourceVersion ?? '', null);
    nodeSource.emit('MODIFIED', api.node);
    api.calls = [];
    const result = await waiting;
    expect(result.error).to.match(/deleted while this bind waited/);
    expect(
      api.calls.filter((call) => call.startsWith('PATCH') || call.startsWith('POST')),
      'no lock write, no Binding',
    ).to.deep.equal([]);
    expect(api.lock).to.equal(undefined);
  });

  describe("reserves the pod's share while it waits for the lock", () => {
    it("counts a waiting bind's share on the node at once, so the pods placed meanwhile see it, and replaces it by the fit under the lock", async () => {
      const { api, cache, binder, podSource, nodeSource } = await setup(
        [gpuPod('waiter', 'uid-w', '20000'), gpuPod('holder', 'uid-h')],
        { lockWaitMs: 3000 },
      );
      stop = () => cache.stop();
      await holdLockByAllocatingPod({ api, podSource, nodeSource });
      const waiting = binder.bind(args('waiter', 'uid-w'));
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(cache.isAssumed('uid-w'), 'reserved while waiting').to.equal(true);
      const reserved = [...cache.usageOn('gpu-1').values()].reduce((sum, use) => sum + use.memoryMiB, 0);
      expect(reserved).to.equal(20_000);
      await api.writeLock('gpu-1', api.node.metadata?.resourceVersion ?? '', null);
      nodeSource.emit('MODIFIED', api.node);
      const result = await waiting;
      expect(result.error).to.equal(undefined);
      expect(cache.isAssumed('uid-w'), 'assumed as bound').to.equal(true);
      expect(
        [...cache.usageOn('gpu-1').values()].reduce((sum, use) => sum + use.memoryMiB, 0),
        'counted once',
      ).to.equal(20_000);
    });

    it('counts a sidecar init container (restartPolicy Always) beside the app container in the reservation and in the usage assumed for the bind', async () => {
      const gpu = { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '6000' } };
      const base = gpuPod('side', 'uid-s');
      // binpack: both on one 24 GiB GPU, where a sidecar's share adds to the app container's.
      const pod: V1Pod = {
        ...base,
        metadata: { ...base.metadata, annotations: { 'hami.io/gpu-scheduler-policy': 'binpack' } },
        spec: {
          ...base.spec,
          initContainers: [{ name: 'sidecar', restartPolicy: 'Always', resources: gpu }],
          containers: [{ name: 'main', resources: gpu }],
        },
      };
      const { api, cache, binder, podSource, nodeSource } = await setup([pod, gpuPod('holder', 'uid-h')], {
        lockWaitMs: 3000,
      });
      stop = () => cache.stop();
      await holdLockByAllocatingPod({ api, podSource, nodeSource });
      const waiting = binder.bind(args('side', 'uid-s'));
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect([...cache.usageOn('gpu-1').values()], 'reserved while waiting').to.deep.equal([
        { slots: 2, memoryMiB: 12_000, cores: 0 },
      ]);
      await api.writeLock('gpu-1', api.node.metadata?.resourceVersion ?? '', null);
      nodeSource.emit('MODIFIED', api.node);
      expect((await waiting).error).to.equal(undefined);
      expect(cache.isAssumed('uid-s')).to.equal(true);
      expect([...cache.usageOn('gpu-1').values()], 'assumed as bound').to.deep.equal([
        { slots: 2, memoryMiB: 12_000, cores: 0 },
      ]);
    });

    it('forgets the reservation when the wait for the lock runs out', async () => {
      const { api, cache, binder, podSource, nodeSource } = await setup(
        [gpuPod('waiter', 'uid-w'), gpuPod('holder', 'uid-h')],
        { lockWaitMs: 200 },
      );
      stop = () => cache.stop();
      await holdLockByAllocatingPod({ api, podSource, nodeSource });
      const result = await binder.bind(args('waiter', 'uid-w'));
      expect(result.error).to.match(/is locked by pod ns\/holder.*must wait/);
      expect(cache.isAssumed('uid-w')).to.equal(false);
      expect(cache.usageOn('gpu-1').size).to.equal(0);
    });

    it('fails at once, writing nothing, when the node has no room left for the pod beside the binds already waiting', async () => {
      const { api, cache, binder, podSource, nodeSource } = await setup(
        [
          gpuPod('first', 'uid-1', '24576'),
          gpuPod('second', 'uid-2', '24576'),
          gpuPod('third', 'uid-3', '24576'),
          gpuPod('holder', 'uid-h'),
        ],
        { lockWaitMs: 3000 },
      );
      stop = () => cache.stop();
      await holdLockByAllocatingPod({ api, podSource, nodeSource });
      // Two GPUs of 24 GiB: the first two waiting binds take them.
      const first = binder.bind(args('first', 'uid-1'));
      const second = binder.bind(args('second', 'uid-2'));
      await new Promise((resolve) => setTimeout(resolve, 50));
      api.calls = [];
      const third = await binder.bind(args('third', 'uid-3'));
      expect(third.error).to.match(/no longer fits on node gpu-1/);
      expect(
        api.calls.filter((call) => call.startsWith('PATCH') || call.startsWith('POST')),
        'no write',
      ).to.deep.equal([]);
      expect(cache.isAssumed('uid-3')).to.equal(false);
      await api.writeLock('gpu-1', api.node.metadata?.resourceVersion ?? '', null);
      nodeSource.emit('MODIFIED', api.node);
      // The first takes the lock; the second waits behind it until the test's end.
      expect((await first).error).to.equal(undefined);
      void second;
    });
  });

  describe("a lock whose allocation is over is the device plugin's to delete", () => {
    /**
     * `holder` bound to gpu-1 and allocated (bind-phase success), its lock still on the node: the
     * plugin is about to delete it.
     */
    async function finishedHolder(
      parts: Pick<Awaited<ReturnType<typeof setup>>, 'api' | 'podSource' | 'nodeSource'>,
    ): Promise<string> {
      const holder = allocatedPod('holder', 'uid-h');
      parts.api.pods.set('ns/holder', holder);
      parts.podSource.emit('MODIFIED', holder);
      const value = `${new Date().toISOString().replace(/\.\d+Z$/, 'Z')},ns,holder`;
      await parts.api.writeLock('gpu-1', parts.api.node.metadata?.resourceVersion ?? '', value);
      parts.nodeSource.emit('MODIFIED', parts.api.node);
      return value;
    }

    it("waits for the plugin's own release instead of racing it, then takes the free lock with one write", async () => {
      // A clock that stands still: however loaded the machine, the plugin's time never runs out here.
      const now = Date.now();
      const parts = await setup([gpuPod('a', 'uid-a')], { lockWaitMs: 5000, clock: () => now });
      const { api, cache, binder, nodeSource } = parts;
      stop = () => cache.stop();
      await finishedHolder(parts);
      api.calls = [];
      const bind = binder.bind(args('a', 'uid-a'));
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(api.calls, 'no take-over while the plugin may still delete it').to.deep.equal([]);
      // The plugin deletes its lock (HAMi: right after writing bind-phase success).
      await api.writeLock('gpu-1', api.node.metadata?.resourceVersion ?? '', null);
      api.calls = [];
      nodeSource.emit('MODIFIED', api.node);
      expect(await bind).to.deep.equal({});
      // One lock write on the free lock; no conflict and no re-reads of node or holder.
      expect(api.calls.filter((call) => call !== 'LIST pods')).to.deep.equal(['PATCH node', 'POST binding']);
      expect(api.lock).to.match(/,ns,a$/);
    });

    it('takes it over once the plugin has had pluginReleaseWaitMs to delete it (a plugin that died before its release)', async () => {
      let now = Date.now();
      const parts = await setup([gpuPod('a', 'uid-a')], {
        lockWaitMs: 5000,
        clock: () => now,
        pluginReleaseWaitMs: 2000,
      });
      const { api, cache, binder } = parts;
      stop = () => cache.stop();
      await finishedHolder(parts);
      const bind = binder.bind(args('a', 'uid-a'));
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(api.lock, 'left to the plugin for now').to.match(/,ns,holder$/);
      now += 2000;
      // waitPollMs is 50: the next try finds the wait over and takes the lock over (confirmed by API reads).
      expect(await bind).to.deep.equal({});
      expect(api.lock).to.match(/,ns,a$/);
    });
  });

  describe('waits for kubelet to acknowledge the allocation before it on the node', () => {
    it("while a pod past the lock has no startTime, the lock stays free; kubelet's status for it lets the bind through", async () => {
      const recorded: string[] = [];
      const recorder = {
        record: (_target: unknown, _type: string, reason: string, message: string) => {
          recorded.push(`${reason}: ${message}`);
        },
      } as unknown as EventRecorder;
      const { api, cache, binder, podSource } = await setup([gpuPod('a', 'uid-a'), allocatedPod('prev', 'uid-p')], {
        kubelet: true,
        lockWaitMs: 5000,
        events: recorder,
        lockWaitEventAfterMs: 0,
      });
      stop = () => cache.stop();
      const bind = binder.bind(args('a', 'uid-a'));
      await new Promise((resolve) => setTimeout(resolve, 150));
      expect(api.lock, 'no lock written while kubelet may still call Allocate for prev again').to.equal(undefined);
      expect(api.calls).to.not.include('PATCH node');
      expect(recorded.join('\n')).to.match(/NodeLockWait: .*kubelet has not acknowledged the allocation of ns\/prev/);

      const ack = acknowledged(allocatedPod('prev', 'uid-p'));
      api.pods.set('ns/prev', ack);
      podSource.emit('MODIFIED', ack);

      expect(await bind).to.deep.equal({});
      expect(api.lock).to.match(/,ns,a$/);
    });

    it("records NodeLockWait only once the wait outlasts lockWaitEventAfterMs: a burst's routine short waits write no Event", async () => {
      const recorded: string[] = [];
      const recorder = {
        record: (_target: unknown, _type: string, reason: string) => {
          recorded.push(reason);
        },
      } as unknown as EventRecorder;
      // The wait is judged by the bind's clock, moved by hand: a loaded machine cannot make it look long.
      let now = Date.now();
      const { api, cache, binder, podSource } = await setup([gpuPod('a', 'uid-a'), allocatedPod('prev', 'uid-p')], {
        kubelet: true,
        lockWaitMs: 5000,
        events: recorder,
        lockWaitEventAfterMs: 3000,
        clock: () => now,
      });
      stop = () => cache.stop();
      const bind = binder.bind(args('a', 'uid-a'));
      // waitPollMs is 50: the bind tries again a few times meanwhile, each time still busy.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(recorded, 'a wait shorter than 3 s is routine').to.deep.equal([]);
      expect(api.calls).to.not.include('PATCH node');
      now += 3000;
      await eventually(
        'the NodeLockWait of a wait past 3 s',
        () => Promise.resolve(recorded.length > 0 ? true : notYet('none yet')),
        5000,
        10,
      );
      const ack = acknowledged(allocatedPod('prev', 'uid-p'));
      api.pods.set('ns/prev', ack);
      podSource.emit('MODIFIED', ack);
      expect(await bind).to.deep.equal({});
      expect(recorded, 'once per kind of wait').to.deep.equal(['NodeLockWait']);
    });

    it('gives up after BIND_LOCK_WAIT naming the pod kubelet has not acknowledged, with nothing written', async () => {
      const { api, cache, binder } = await setup([gpuPod('a', 'uid-a'), allocatedPod('prev', 'uid-p')], {
        kubelet: true,
        lockWaitMs: 300,
      });
      stop = () => cache.stop();
      const result = await binder.bind(args('a', 'uid-a'));
      expect(result.error).to.match(
        /kubelet has not acknowledged the allocation of ns\/prev .*must wait \(waited 0s\)$/,
      );
      expect(api.lock).to.equal(undefined);
      expect(api.calls.filter((call) => call.startsWith('PATCH') || call.startsWith('POST'))).to.deep.equal([]);
    });

    it('a terminal pod, or one on a node no kubelet registered, keeps nobody waiting', async () => {
      const failed = { ...allocatedPod('prev', 'uid-p'), status: { phase: 'Failed' } };
      const terminal = await setup([gpuPod('a', 'uid-a'), failed], { kubelet: true });
      stop = () => terminal.cache.stop();
      expect(await terminal.binder.bind(args('a', 'uid-a'))).to.deep.equal({});
      await terminal.cache.stop();

      const noKubelet = await setup([gpuPod('a', 'uid-a'), allocatedPod('prev', 'uid-p')], { kubelet: false });
      stop = () => noKubelet.cache.stop();
      expect(await noKubelet.binder.bind(args('a', 'uid-a'))).to.deep.equal({});
    });

    it("reads the node's pods from the API when the pod store lags the node, finds the unacknowledged pod it has not seen, and fits with that read", async () => {
      const { api, cache, binder } = await setup([gpuPod('a', 'uid-a')], { kubelet: true, lockWaitMs: 300 });
      stop = () => cache.stop();
      // Another replica bound prev and the plugin served it; this store's pod watch delivered none of it.
      api.pods.set('ns/prev', allocatedPod('prev', 'uid-p'));
      api.rv = 12;
      api.node = { ...api.node, metadata: { ...api.node.metadata, resourceVersion: '12' } };
      const waited = await binder.bind(args('a', 'uid-a'));
      expect(waited.error).to.match(/has not acknowledged the allocation of ns\/prev/);
      expect(api.lock).to.equal(undefined);

      api.pods.set('ns/prev', acknowledged(allocatedPod('prev', 'uid-p')));
      api.calls = [];
      expect(await binder.bind(args('a', 'uid-a'))).to.deep.equal({});
      // One LIST serves both the precondition and the fit: prev's GPU 0 is counted, a gets GPU 1... or shares it.
      expect(api.calls.filter((call) => call === 'LIST pods')).to.have.length(1);
      expect(api.lock).to.match(/,ns,a$/);
    });
  });
});
