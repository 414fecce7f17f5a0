import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterCache } from '../../src/cluster/cluster-cache.js';
import {
  ALLOCATED_ANNOTATION,
  BIND_PHASE_ANNOTATION,
  TO_ALLOCATE_ANNOTATION,
  VGPU_NODE_ANNOTATION,
} from '../../src/hami/wire.js';
import { decodeAllocation, encodeAllocation, isDecodeError } from '../../src/devices/allocation-codec.js';
import { DEFAULT_REQUEST_DEFAULTS } from '../../src/devices/requests.js';
import { Binder } from '../../src/extender/binder.js';
import { BindingLabelFollowUp, kubeLabelPatch } from '../../src/extender/binding-label-follow-up.js';
import { KubeNodeLockApi } from '../../src/lock/kube-node-lock-api.js';
import { formatLockValue, parseLockValue } from '../../src/lock/lock-value.js';
import { NodeLocks } from '../../src/lock/node-locks.js';
import { simulatedGpuNode } from '../../src/local/simulated-gpu-node.js';
import { EventRecorder } from '../../src/telemetry/events.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { readLock, setLock } from '../support/lock-helpers.js';
import type { Wake } from '../support/eventually.js';
import { describePod } from '../support/observations.js';
import { eventually, notYet, sharedControlPlane, testCluster, uniqueName } from '../support/test-cluster.js';
import { kubeSources } from '../../src/cluster/kube-list-watch.js';

const FULL_CARD_MIB = 24576;
const defaults = {
  nodePolicy: 'binpack' as const,
  gpuPolicy: 'spread' as const,
  requestDefaults: DEFAULT_REQUEST_DEFAULTS,
};

/** A full-card GPU pod that nothing else will bind. */
function gpuPod(name: string): V1Pod {
  return {
    metadata: { name },
    spec: {
      schedulerName: 'nobody',
      containers: [
        {
          name: 'main',
          image: 'registry.invalid/none:1',
          resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': String(FULL_CARD_MIB) } },
        },
      ],
    },
  };
}

async function createGpuPod(core: CoreV1Api, namespace: string, name: string): Promise<string> {
  const created = await core.createNamespacedPod({ namespace, body: gpuPod(name) });
  const uid = created.metadata?.uid;
  if (uid === undefined) throw new Error(`pod ${name} was created without a uid`);
  return uid;
}

async function createGpuNode(core: CoreV1Api, gpus = 2): Promise<string> {
  const name = uniqueName('bind-faults');
  await core.createNode({ body: simulatedGpuNode({ name, gpus }) });
  return name;
}

/** GPU memory per device UUID used by the pods bound to `node` (from their allocated annotation). */
async function gpuMemoryOn(core: CoreV1Api, namespace: string, node: string): Promise<Map<string, number>> {
  const used = new Map<string, number>();
  const pods = await core.listNamespacedPod({ namespace });
  for (const pod of pods.items) {
    if (pod.spec?.nodeName !== node) continue;
    const encoded = pod.metadata?.annotations?.[ALLOCATED_ANNOTATION];
    if (encoded === undefined) continue;
    const allocation = decodeAllocation(encoded);
    if (isDecodeError(allocation))
      throw new Error(`unreadable allocation on ${pod.metadata?.name ?? '?'}: ${allocation.error}`);
    for (const container of allocation)
      for (const device of container) used.set(device.uuid, (used.get(device.uuid) ?? 0) + device.memoryMiB);
  }
  return used;
}

interface Harness {
  proxy: FaultProxy;
  core: CoreV1Api;
  cache: ClusterCache;
  binder: Binder;
  logs: string[];
}

describe('Binder against the real apiserver through a fault proxy', function () {
  this.timeout(60_000);
  const cleanups: (() => Promise<void>)[] = [];

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) {
      try {
        await cleanup();
      } catch (error) {
        process.stderr.write(`cleanup failed: ${(error as Error).message}\n`);
      }
    }
  });

  async function startProxy(): Promise<FaultProxy> {
    const proxy = await FaultProxy.start({ upstream: sharedControlPlane() });
    cleanups.push(() => proxy.stop());
    return proxy;
  }

  /** Proxy, cache, locks and binder wired as in serve/start-server.ts, every client going through the proxy. */
  async function harness(): Promise<Harness> {
    const proxy = await startProxy();
    const kubeConfig = proxy.kubeConfig();
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const logs: string[] = [];
    const cache = new ClusterCache({
      sources: kubeSources(kubeConfig),
      log: (level, message) => {
        logs.push(`[cache ${level}] ${message}`);
      },
    });
    cleanups.push(() => cache.stop());
    const started = cache.start();
    expect(await cache.waitForSync(20_000), 'cache synced through the proxy').to.equal(true);
    await started;
    const locks = new NodeLocks({
      api: new KubeNodeLockApi(core),
      view: cache.lockView,
      config: { bindGraceMs: 60_000, expireMs: 300_000 },
    });
    const labels = new BindingLabelFollowUp({
      pods: cache,
      patchLabel: kubeLabelPatch(core),
      log: (message) => {
        logs.push(`[label] ${message}`);
      },
    });
    labels.start();
    cleanups.push(() => {
      labels.stop();
      return Promise.resolve();
    });
    const binder = new Binder({
      core,
      cache,
      locks,
      events: new EventRecorder(core, 'test'),
      defaults,
      lockWaitMs: 5000,
      timeoutMs: 8000,
      labels,
      log: (level, message) => {
        logs.push(`[bind ${level}] ${message}`);
      },
    });
    return { proxy, core, cache, binder, logs };
  }

  /** Waits until the store has the node's inventory and this incarnation of the pod. */
  async function cacheHas(
    cache: ClusterCache,
    node: string,
    namespace: string,
    pod: string,
    uid: string,
  ): Promise<void> {
    await eventually(
      `the store to have node ${node} and pod ${pod} (${uid})`,
      () => {
        const seenUid = cache.pod(namespace, pod)?.metadata?.uid;
        return Promise.resolve(
          cache.inventory(node) !== undefined && seenUid === uid
            ? true
            : notYet(
                `node ${cache.inventory(node) === undefined ? 'without inventory' : 'with inventory'}, pod ${seenUid === undefined ? 'absent' : `uid ${seenUid}`}; ${describeStore(cache)}`,
              ),
        );
      },
      10_000,
      20,
      (recheck) => {
        const unsubscribe = [cache.onNodeChange(recheck), cache.onPodChange(recheck)];
        return () => {
          for (const off of unsubscribe) off();
        };
      },
    );
  }

  /** Whether the store is synced and watching, and its problems: why it may not have caught up. */
  function describeStore(cache: ClusterCache): string {
    const problems = cache.problems();
    return `store ${cache.synced ? 'synced' : 'not synced'}, ${cache.watching() ? 'watching' : 'not watching'}${problems.length === 0 ? '' : `, problems: ${problems.join('; ').slice(0, 300)}`}`;
  }

  /** The node's lock as the store has it. */
  function storeLock(cache: ClusterCache, node: string): string {
    return `store lock ${cache.lockOf(node)?.raw ?? 'none'}`;
  }

  /** Wakes a wait on the store when the node's lock or the pod it names changes. */
  function lockChanges(cache: ClusterCache, node: string): Wake {
    return (recheck) => cache.onLockChange(node, recheck);
  }

  /** Waits until the API no longer has the pod (deleted with no grace period). */
  async function gone(core: CoreV1Api, namespace: string, name: string): Promise<void> {
    await eventually(
      `${name} to be gone`,
      () =>
        core.readNamespacedPod({ namespace, name }).then(
          (pod) => notYet(`${name}: ${describePod(pod)}`),
          () => true,
        ),
      10_000,
      20,
    );
  }

  it('a Binding whose answer is dropped after commit is a success; annotations and lock stay', async () => {
    const { namespace, core: direct } = testCluster();
    const { proxy, cache, binder, logs } = await harness();
    const node = await createGpuNode(direct);
    const uid = await createGpuPod(direct, namespace, 'dropped');
    await cacheHas(cache, node, namespace, 'dropped', uid);
    const rule = proxy.addRule({
      match: { method: 'POST', path: new RegExp(`^/api/v1/namespaces/${namespace}/pods/dropped/binding$`) },
      action: { kind: 'drop-after-commit' },
      times: 1,
    });

    const outcome = await binder.bind({ podName: 'dropped', podNamespace: namespace, podUid: uid, node });

    expect(outcome, logs.join('\n')).to.deep.equal({});
    expect(rule.hits, 'the Binding answer was dropped').to.equal(1);
    expect(
      proxy.requestsWhere({ fault: 'drop-after-commit' }).map((entry) => [entry.status, entry.upstreamStatus]),
    ).to.deep.equal([['dropped', 201]]);
    const pod = await direct.readNamespacedPod({ namespace, name: 'dropped' });
    expect(pod.spec?.nodeName).to.equal(node);
    const annotations = pod.metadata?.annotations ?? {};
    expect(annotations[ALLOCATED_ANNOTATION]).to.match(new RegExp(`^GPU-${node}-\\d,NVIDIA,${FULL_CARD_MIB},\\d+:;$`));
    expect(annotations[TO_ALLOCATE_ANNOTATION]).to.equal(annotations[ALLOCATED_ANNOTATION]);
    expect(annotations[BIND_PHASE_ANNOTATION]).to.equal('allocating');
    expect(annotations[VGPU_NODE_ANNOTATION]).to.equal(node);
    const lock = parseLockValue((await readLock(direct, node)) ?? '');
    expect(lock.kind === 'owned' ? `${lock.owner.namespace}/${lock.owner.name}` : lock.kind).to.equal(
      `${namespace}/dropped`,
    );
  });

  it('a GPU pod bind makes 2 API requests (lock write, Binding carrying the label), and nothing follows for the label', async () => {
    const { namespace, core: direct } = testCluster();
    const { proxy, cache, binder, logs } = await harness();
    const node = await createGpuNode(direct);
    const uid = await createGpuPod(direct, namespace, 'counted');
    await cacheHas(cache, node, namespace, 'counted', uid);

    const firstSeq = proxy.requests.at(-1)?.seq ?? 0;
    const outcome = await binder.bind({ podName: 'counted', podNamespace: namespace, podUid: uid, node });
    const lastSeq = proxy.requests.at(-1)?.seq ?? 0;

    expect(outcome, logs.join('\n')).to.deep.equal({});
    const during = { watch: false, where: (entry: { seq: number }) => entry.seq > firstSeq && entry.seq <= lastSeq };
    const count = proxy.countRequests(during);
    const tally = proxy.tally(during);
    console.log(`      API requests for one GPU pod bind: ${count} ${JSON.stringify(tally)}`);
    expect(count, JSON.stringify(tally)).to.be.at.most(2);
    expect(tally).to.deep.equal({
      [`PATCH /api/v1/nodes/${node}`]: 1,
      [`POST /api/v1/namespaces/${namespace}/pods/counted/binding`]: 1,
    });
    // kube-apiserver 1.35+ copied the Binding's label onto the pod; the follow-up sees it there and writes nothing.
    const pod = await direct.readNamespacedPod({ namespace, name: 'counted' });
    expect(pod.spec?.nodeName).to.equal(node);
    expect(pod.metadata?.labels?.[VGPU_NODE_ANNOTATION]).to.equal(node);
    await eventually(
      'the store to show counted bound',
      () => Promise.resolve(cache.pod(namespace, 'counted')?.spec?.nodeName === node ? true : notYet('not yet')),
      10_000,
      20,
    );
    // The follow-up decided on that same watch event; a patch it sent would reach the proxy within this.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(
      proxy.tally({ watch: false, where: (entry: { seq: number }) => entry.seq > lastSeq, method: ['PATCH'] }),
      'no label patch after the bind',
    ).to.deep.equal({});
  });

  it('a bind waiting for the lock fails when its pod is recreated, writes nothing onto the new incarnation, which then binds', async () => {
    const { namespace, core: direct } = testCluster();
    const { cache, binder, logs } = await harness();
    const node = await createGpuNode(direct, 2);

    // holder: bound to the node with a full card, awaiting allocation, holding the lock.
    const holderUid = await createGpuPod(direct, namespace, 'holder');
    const holderAllocation = `GPU-${node}-0,NVIDIA,${FULL_CARD_MIB},0:;`;
    await direct.createNamespacedPodBinding({
      name: 'holder',
      namespace,
      body: {
        metadata: {
          name: 'holder',
          uid: holderUid,
          annotations: {
            [VGPU_NODE_ANNOTATION]: node,
            [TO_ALLOCATE_ANNOTATION]: holderAllocation,
            [ALLOCATED_ANNOTATION]: holderAllocation,
            [BIND_PHASE_ANNOTATION]: 'allocating',
          },
        },
        target: { apiVersion: 'v1', kind: 'Node', name: node },
      },
    });
    const holderLock = formatLockValue(new Date(), { namespace, name: 'holder' });
    await setLock(direct, node, holderLock);

    const uidA = await createGpuPod(direct, namespace, 'sts-0');
    await cacheHas(cache, node, namespace, 'sts-0', uidA);
    await eventually(
      'the store to see the holder bound and the lock',
      () =>
        Promise.resolve(
          cache.lockOf(node)?.raw === holderLock && cache.pod(namespace, 'holder')?.spec?.nodeName === node
            ? true
            : notYet(
                `${storeLock(cache, node)}, holder ${cache.pod(namespace, 'holder') === undefined ? 'absent' : `on ${cache.pod(namespace, 'holder')?.spec?.nodeName ?? 'no node'}`} in the store`,
              ),
        ),
      10_000,
      20,
      lockChanges(cache, node),
    );

    const started = Date.now();
    const oldBind = binder.bind({ podName: 'sts-0', podNamespace: namespace, podUid: uidA, node });
    let settled = false;
    void oldBind.then(() => {
      settled = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(settled, 'the bind of sts-0 waits while holder holds the lock').to.equal(false);

    await direct.deleteNamespacedPod({ namespace, name: 'sts-0', gracePeriodSeconds: 0 });
    await gone(direct, namespace, 'sts-0');
    const uidB = await createGpuPod(direct, namespace, 'sts-0');
    expect(uidB).to.not.equal(uidA);
    await cacheHas(cache, node, namespace, 'sts-0', uidB);
    await setLock(direct, node, null);

    const oldOutcome = await oldBind;
    console.log(`      old incarnation's bind after ${Date.now() - started} ms: ${JSON.stringify(oldOutcome)}`);
    expect(oldOutcome.error, logs.join('\n'))
      .to.be.a('string')
      .and.match(/recreated/);
    const afterOld = await direct.readNamespacedPod({ namespace, name: 'sts-0' });
    expect(afterOld.metadata?.uid).to.equal(uidB);
    expect(afterOld.spec?.nodeName ?? '', 'the new sts-0 was not bound by the old bind').to.equal('');
    expect(
      Object.keys(afterOld.metadata?.annotations ?? {}).filter((key) => key.startsWith('hami.io/vgpu-')),
    ).to.deep.equal([]);
    expect(afterOld.metadata?.labels?.[VGPU_NODE_ANNOTATION]).to.equal(undefined);
    const lockAfterOld = await readLock(direct, node);
    expect(lockAfterOld, 'the old bind left no lock behind').to.equal(undefined);

    const newOutcome = await binder.bind({ podName: 'sts-0', podNamespace: namespace, podUid: uidB, node });
    expect(newOutcome, logs.join('\n')).to.deep.equal({});
    const bound = await direct.readNamespacedPod({ namespace, name: 'sts-0' });
    expect(bound.metadata?.uid).to.equal(uidB);
    expect(bound.spec?.nodeName).to.equal(node);
    const annotations = bound.metadata?.annotations ?? {};
    // holder has GPU 0 in full; the new incarnation must get GPU 1.
    expect(annotations[ALLOCATED_ANNOTATION]).to.match(new RegExp(`^GPU-${node}-1,NVIDIA,${FULL_CARD_MIB},\\d+:;$`));
    expect(annotations[TO_ALLOCATE_ANNOTATION]).to.equal(annotations[ALLOCATED_ANNOTATION]);
    expect(annotations[BIND_PHASE_ANNOTATION]).to.equal('allocating');
    expect(annotations[VGPU_NODE_ANNOTATION]).to.equal(node);
    const lock = parseLockValue((await readLock(direct, node)) ?? '');
    expect(lock.kind === 'owned' ? lock.owner.name : lock.kind).to.equal('sts-0');

    const used = await gpuMemoryOn(direct, namespace, node);
    for (const [uuid, mib] of used) expect(mib, `GPU ${uuid} memory in use`).to.be.at.most(FULL_CARD_MIB);
    expect([...used.keys()].sort()).to.deep.equal([`GPU-${node}-0`, `GPU-${node}-1`]);
  });

  /**
   * holder (bound, allocating) holds the lock on a 2-GPU node; sts-0 (uid A) is created and seen by
   * the store. Then the pod watch goes dark for `lagMs` (every pods watch is delayed) and sts-0 is
   * deleted and recreated (uid B) behind the store's back.
   */
  async function recreateBehindLaggingStore(lagMs: number) {
    const { namespace, core: direct } = testCluster();
    const h = await harness();
    const { proxy, cache } = h;
    const node = await createGpuNode(direct, 2);
    const holderUid = await createGpuPod(direct, namespace, 'holder');
    await direct.createNamespacedPodBinding({
      name: 'holder',
      namespace,
      body: {
        metadata: { name: 'holder', uid: holderUid, annotations: { [BIND_PHASE_ANNOTATION]: 'allocating' } },
        target: { apiVersion: 'v1', kind: 'Node', name: node },
      },
    });
    const holderLock = formatLockValue(new Date(), { namespace, name: 'holder' });
    await setLock(direct, node, holderLock);
    const uidA = await createGpuPod(direct, namespace, 'sts-0');
    await cacheHas(cache, node, namespace, 'sts-0', uidA);
    await eventually(
      'the store to see the lock',
      () =>
        Promise.resolve(
          cache.lockOf(node)?.raw === holderLock ? true : notYet(`${storeLock(cache, node)}; ${describeStore(cache)}`),
        ),
      10_000,
      20,
      lockChanges(cache, node),
    );
    const goDark = async () => {
      const dark = proxy.addRule({
        match: { path: /^\/api\/v1\/pods$/, watch: true },
        action: { kind: 'delay', ms: lagMs },
        times: 1,
      });
      proxy.breakWatches();
      await dark.whenHit();
      await direct.deleteNamespacedPod({ namespace, name: 'sts-0', gracePeriodSeconds: 0 });
      await gone(direct, namespace, 'sts-0');
      const uidB = await createGpuPod(direct, namespace, 'sts-0');
      expect(cache.pod(namespace, 'sts-0')?.metadata?.uid, 'the store still has the old incarnation').to.equal(uidA);
      return uidB;
    };
    return { ...h, namespace, direct, node, uidA, goDark };
  }

  it('a recreate the store has not seen yet: the Binding UID precondition refuses the old bind, which releases its lock and writes nothing', async () => {
    const { proxy, cache, binder, logs, namespace, direct, node, uidA, goDark } =
      await recreateBehindLaggingStore(4000);

    const oldBind = binder.bind({ podName: 'sts-0', podNamespace: namespace, podUid: uidA, node });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const uidB = await goDark();
    await setLock(direct, node, null);

    const oldOutcome = await oldBind;
    console.log(
      `      old bind with a lagging store: ${JSON.stringify(oldOutcome)}; writes: ${JSON.stringify(proxy.tally({ watch: false, method: ['POST', 'PATCH'] }))}`,
    );
    expect(oldOutcome.error, logs.join('\n'))
      .to.be.a('string')
      .and.match(/recreated|Precondition failed: UID/i);
    const after = await direct.readNamespacedPod({ namespace, name: 'sts-0' });
    expect(after.metadata?.uid).to.equal(uidB);
    expect(after.spec?.nodeName ?? '').to.equal('');
    expect(Object.keys(after.metadata?.annotations ?? {}).filter((key) => key.startsWith('hami.io/'))).to.deep.equal(
      [],
    );
    expect(after.metadata?.labels?.[VGPU_NODE_ANNOTATION]).to.equal(undefined);
    expect(await readLock(direct, node), 'the old bind released the lock it took').to.equal(undefined);
    expect(cache.isAssumed(uidA)).to.equal(false);

    await cacheHas(cache, node, namespace, 'sts-0', uidB);
    const newOutcome = await binder.bind({ podName: 'sts-0', podNamespace: namespace, podUid: uidB, node });
    expect(newOutcome, logs.join('\n')).to.deep.equal({});
    const bound = await direct.readNamespacedPod({ namespace, name: 'sts-0' });
    expect(bound.spec?.nodeName).to.equal(node);
    expect(bound.metadata?.annotations?.[ALLOCATED_ANNOTATION]).to.match(
      new RegExp(`^GPU-${node}-\\d,NVIDIA,${FULL_CARD_MIB},\\d+:;$`),
    );
  });

  it('binds the new incarnation while the store still has the old one (the API read is newer than the store)', async () => {
    const { cache, binder, logs, namespace, direct, node, uidA, goDark } = await recreateBehindLaggingStore(4000);
    const uidB = await goDark();
    await setLock(direct, node, null);

    const started = Date.now();
    const outcome = await binder.bind({ podName: 'sts-0', podNamespace: namespace, podUid: uidB, node });
    const elapsed = Date.now() - started;

    expect(outcome, logs.join('\n')).to.deep.equal({});
    expect(cache.pod(namespace, 'sts-0')?.metadata?.uid, 'the bind finished while the store still lagged').to.equal(
      uidA,
    );
    expect(elapsed).to.be.lessThan(3000);
    const bound = await direct.readNamespacedPod({ namespace, name: 'sts-0' });
    expect(bound.metadata?.uid).to.equal(uidB);
    expect(bound.spec?.nodeName).to.equal(node);
    expect(bound.metadata?.annotations?.[ALLOCATED_ANNOTATION]).to.match(
      new RegExp(`^GPU-${node}-\\d,NVIDIA,${FULL_CARD_MIB},\\d+:;$`),
    );
    const lock = parseLockValue((await readLock(direct, node)) ?? '');
    expect(lock.kind === 'owned' ? lock.owner.name : lock.kind).to.equal('sts-0');
  });

  it('a lock write whose answer is dropped after commit: the bind still succeeds and the lock names the pod', async () => {
    const { namespace, core: direct } = testCluster();
    const { proxy, cache, binder, logs } = await harness();
    const node = await createGpuNode(direct);
    const uid = await createGpuPod(direct, namespace, 'lockdrop');
    await cacheHas(cache, node, namespace, 'lockdrop', uid);
    const rule = proxy.addRule({
      match: { method: 'PATCH', path: new RegExp(`^/api/v1/nodes/${node}$`) },
      action: { kind: 'drop-after-commit' },
      times: 1,
    });

    const outcome = await binder.bind({ podName: 'lockdrop', podNamespace: namespace, podUid: uid, node });
    console.log(
      `      lock-write drop: ${JSON.stringify(outcome)} ${JSON.stringify(proxy.tally({ watch: false, where: (entry) => !entry.path.endsWith('/events') && entry.path !== '/api/v1/pods' && entry.path !== '/api/v1/nodes' }))}`,
    );
    expect(rule.hits).to.equal(1);
    expect(outcome, logs.join('\n')).to.deep.equal({});
    expect((await direct.readNamespacedPod({ namespace, name: 'lockdrop' })).spec?.nodeName).to.equal(node);
    const lock = parseLockValue((await readLock(direct, node)) ?? '');
    expect(lock.kind === 'owned' ? lock.owner.name : lock.kind).to.equal('lockdrop');
  });

  // Issue #42 item 6: a Binding cut off by the bind's deadline may still be committed by the apiserver
  // after the bind re-read the pod and found it unbound; released then, the lock would be gone when
  // kubelet calls Allocate for the bound pod (HAMi's plugin finds its pod through the lock).
  it('a Binding cut off by the deadline and committed afterwards leaves the pod bound with its lock', async () => {
    const { namespace, core: direct } = testCluster();
    const { proxy, cache, binder, logs } = await harness();
    const node = await createGpuNode(direct);
    const uid = await createGpuPod(direct, namespace, 'late');
    await cacheHas(cache, node, namespace, 'late', uid);
    // The bind gives up after 6 s (BIND_TIMEOUT 8 s less its clean-up share); the apiserver commits at 7 s.
    const rule = proxy.addRule({
      match: { method: 'POST', path: /\/pods\/late\/binding$/ },
      action: { kind: 'commit-late', ms: 7000 },
      times: 1,
    });

    const outcome = await binder.bind({ podName: 'late', podNamespace: namespace, podUid: uid, node });
    expect(outcome.error, logs.join('\n')).to.match(/deadline/);
    expect(rule.hits).to.equal(1);
    await eventually(
      'the late Binding to commit',
      async () => {
        const pod = await direct.readNamespacedPod({ namespace, name: 'late' });
        return pod.spec?.nodeName === node ? true : notYet(describePod(pod));
      },
      10_000,
      50,
    );
    const lock = parseLockValue((await readLock(direct, node)) ?? '');
    expect(
      lock.kind === 'owned' ? `${lock.owner.namespace}/${lock.owner.name}` : lock.kind,
      'the device plugin still finds the pod through the lock',
    ).to.equal(`${namespace}/late`);
    expect(cache.isAssumed(uid) || cache.usageOn(node).size > 0, 'its GPUs still count').to.equal(true);
  });

  it('a Binding refused with 503 (nothing committed) fails the bind and releases the lock', async () => {
    const { namespace, core: direct } = testCluster();
    const { proxy, cache, binder } = await harness();
    const node = await createGpuNode(direct);
    const uid = await createGpuPod(direct, namespace, 'refused');
    await cacheHas(cache, node, namespace, 'refused', uid);
    proxy.addRule({
      match: { method: 'POST', path: /\/pods\/refused\/binding$/ },
      action: { kind: 'fail', status: 503 },
      times: 1,
    });

    const outcome = await binder.bind({ podName: 'refused', podNamespace: namespace, podUid: uid, node });
    expect(outcome.error).to.be.a('string');
    expect(await readLock(direct, node)).to.equal(undefined);
    const pod = await direct.readNamespacedPod({ namespace, name: 'refused' });
    expect(pod.spec?.nodeName ?? '').to.equal('');
    expect(cache.isAssumed(uid)).to.equal(false);
    // A retry binds.
    expect(await binder.bind({ podName: 'refused', podNamespace: namespace, podUid: uid, node })).to.deep.equal({});
  });

  it('a lock write that hangs is cut off by the per-call timeout; the release then completes (found by the chaos suite)', async () => {
    const { namespace, core: direct } = testCluster();
    const proxy = await startProxy();
    const core = proxy.kubeConfig().makeApiClient(CoreV1Api);
    const node = await createGpuNode(direct);
    await createGpuPod(direct, namespace, 'holder');
    await setLock(direct, node, formatLockValue(new Date(), { namespace, name: 'holder' }));
    const hang = proxy.addRule({
      match: { method: 'PATCH', path: new RegExp(`^/api/v1/nodes/${node}$`) },
      action: { kind: 'hang' },
      times: 1,
    });
    const locks = new NodeLocks({
      api: new KubeNodeLockApi(core, { callTimeoutMs: 500 }),
      config: { bindGraceMs: 60_000, expireMs: 300_000 },
    });

    const started = Date.now();
    const result = await locks.release(node, { namespace, name: 'holder' }, 'watch');
    const elapsed = Date.now() - started;

    expect(hang.hits).to.equal(1);
    expect(result.outcome).to.equal('released');
    expect(elapsed, 'cut off after 500 ms, not hung for good').to.be.below(5_000);
    expect(await readLock(direct, node)).to.equal(undefined);
  });

  it("a pod recreated under the same name while the pod watch is down: the relist drops the old incarnation's usage and reports its delete", async () => {
    const { proxy, cache, namespace, direct, node } = await (async () => {
      const { namespace, core: direct } = testCluster();
      const h = await harness();
      return { ...h, namespace, direct, node: await createGpuNode(direct) };
    })();
    // A pod bound to `node` that uses `gpu` (as a running pod placed by an earlier bind would).
    const boundPod = async (gpu: number, memoryMiB: number): Promise<string> => {
      const created = await direct.createNamespacedPod({
        namespace,
        body: {
          metadata: {
            name: 'sts-0',
            annotations: {
              [ALLOCATED_ANNOTATION]: encodeAllocation([
                [{ uuid: `GPU-${node}-${gpu}`, type: 'NVIDIA', memoryMiB, cores: 0 }],
              ]),
              [VGPU_NODE_ANNOTATION]: node,
            },
          },
          spec: {
            ...gpuPod('sts-0').spec,
            nodeName: node,
            containers: [
              {
                name: 'main',
                image: 'registry.invalid/none:1',
                resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': String(memoryMiB) } },
              },
            ],
          },
        },
      });
      return created.metadata?.uid ?? '';
    };
    const uidA = await boundPod(0, 8000);
    await cacheHas(cache, node, namespace, 'sts-0', uidA);
    expect(cache.usageOn(node).get(`GPU-${node}-0`)?.memoryMiB).to.equal(8000);
    const changes: string[] = [];
    cache.onPodChange((pod, change) => {
      if (pod.metadata?.name === 'sts-0') changes.push(`${change}:${pod.metadata.uid ?? ''}`);
    });

    // The next pod watch fails; the reflector pauses (about 1 s) and then relists.
    const down = proxy.addRule({
      match: { method: 'GET', path: /^\/api\/v1\/pods$/, watch: true },
      action: { kind: 'fail', status: 503 },
      times: 1,
    });
    proxy.breakWatches();
    await down.whenHit();
    await direct.deleteNamespacedPod({ namespace, name: 'sts-0', gracePeriodSeconds: 0 });
    const uidB = await boundPod(1, 4000);
    expect(changes, 'nothing seen while the watch is down').to.deep.equal([]);

    await cacheHas(cache, node, namespace, 'sts-0', uidB);
    expect(changes).to.deep.equal([`delete:${uidA}`, `add:${uidB}`]);
    const usage = cache.usageOn(node);
    expect(usage.get(`GPU-${node}-0`)?.memoryMiB ?? 0, 'the old incarnation no longer counts').to.equal(0);
    expect(usage.get(`GPU-${node}-1`)?.memoryMiB).to.equal(4000);
    expect(
      proxy.countRequests({ method: 'GET', path: /^\/api\/v1\/pods$/, watch: false, status: 200 }),
      'a relist after the start-up LIST',
    ).to.be.at.least(2);
  });

  it('two replicas: one whose pod watch lags does not overcommit a GPU the other just filled (chaos seed 1, 14 min)', async () => {
    const { namespace, core: direct } = testCluster();
    const node = await createGpuNode(direct, 1);
    const first = await harness();
    const lagging = await harness();
    const uids = { p1: await createGpuPod(direct, namespace, 'p1'), p2: await createGpuPod(direct, namespace, 'p2') };
    for (const h of [first, lagging])
      for (const [name, uid] of Object.entries(uids)) await cacheHas(h.cache, node, namespace, name, uid);

    // The lagging replica's pod watch goes down and cannot come back (its relists hang); its node
    // watch stays up. Its binder's own LIST of the node's pods (with a field selector) still passes.
    lagging.proxy.addRule({
      match: { method: 'GET', path: /^\/api\/v1\/pods$/, watch: true },
      action: { kind: 'hang' },
    });
    lagging.proxy.addRule({
      match: { method: 'GET', path: /^\/api\/v1\/pods$/, watch: false, query: /^(?!.*fieldSelector)/ },
      action: { kind: 'hang' },
    });
    lagging.proxy.breakWatches();

    expect(
      await first.binder.bind({ podName: 'p1', podNamespace: namespace, podUid: uids.p1, node }),
      first.logs.join('\n'),
    ).to.deep.equal({});
    // The device plugin allocates p1 and frees the lock; the lagging replica's node watch sees that.
    await setLock(direct, node, null);
    await eventually(
      'the lagging replica to see the lock released',
      () =>
        Promise.resolve(
          lagging.cache.lockOf(node) === undefined
            ? true
            : notYet(`${storeLock(lagging.cache, node)}; ${describeStore(lagging.cache)}`),
        ),
      10_000,
      20,
      lockChanges(lagging.cache, node),
    );
    expect(
      lagging.cache.pod(namespace, 'p1')?.spec?.nodeName ?? '',
      'the lagging store has not seen p1 bound',
    ).to.equal('');

    const outcome = await lagging.binder.bind({ podName: 'p2', podNamespace: namespace, podUid: uids.p2, node });

    expect(outcome.error, lagging.logs.join('\n')).to.match(/no longer fits on node/);
    expect([...(await gpuMemoryOn(direct, namespace, node)).values()], 'one full card, used once').to.deep.equal([
      FULL_CARD_MIB,
    ]);
    expect(
      (await direct.readNamespacedPod({ namespace, name: 'p2' })).spec?.nodeName ?? '',
      'p2 stays unbound',
    ).to.equal('');
    expect(await readLock(direct, node), 'the refused bind released its lock').to.equal(undefined);
    expect(
      lagging.proxy.countRequests({ method: 'GET', path: /^\/api\/v1\/pods$/, query: /fieldSelector=spec.nodeName/ }),
      "the bind listed the node's pods",
    ).to.equal(1);
  });

  it('a cache whose first pod LISTs fail is not synced, reports problems, then syncs with the pods', async () => {
    const { namespace, core: direct } = testCluster();
    const uid = await createGpuPod(direct, namespace, 'listed');
    const proxy = await startProxy();
    const rule = proxy.addRule({
      match: { method: 'GET', path: /^\/api\/v1\/pods$/, watch: false },
      action: { kind: 'fail', status: 503 },
      times: 2,
    });
    const kubeConfig = proxy.kubeConfig();
    const cache = new ClusterCache({ sources: kubeSources(kubeConfig) });
    cleanups.push(() => cache.stop());

    const started = cache.start();
    await rule.whenHit(1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(cache.synced, 'not synced while the pod LIST fails').to.equal(false);
    expect(cache.problems()).to.include('pods not listed yet');
    expect(cache.pod(namespace, 'listed')).to.equal(undefined);

    expect(await cache.waitForSync(30_000), 'synced once the LIST succeeds').to.equal(true);
    await started;
    expect(rule.hits).to.equal(2);
    expect(cache.synced).to.equal(true);
    expect(cache.problems()).to.deep.equal([]);
    expect(cache.pod(namespace, 'listed')?.metadata?.uid).to.equal(uid);
    expect(proxy.countRequests({ method: 'GET', path: /^\/api\/v1\/pods$/, watch: false, status: 503 })).to.equal(2);
    expect(proxy.countRequests({ method: 'GET', path: /^\/api\/v1\/pods$/, watch: false, status: 200 })).to.be.at.least(
      1,
    );
  });
});
