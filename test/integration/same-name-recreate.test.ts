import { CoordinationV1Api, CoreV1Api, V1MicroTime, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterCache } from '../../src/cluster/cluster-cache.js';
import { kubeSources } from '../../src/cluster/kube-list-watch.js';
import { DEFAULT_REQUEST_DEFAULTS } from '../../src/devices/requests.js';
import { Binder } from '../../src/extender/binder.js';
import { BIND_PHASE_ANNOTATION } from '../../src/hami/wire.js';
import { KubeKubeletEvidenceApi, NODE_LEASE_NAMESPACE } from '../../src/lock/kube-kubelet-evidence-api.js';
import { KubeletAdmission } from '../../src/lock/kubelet-admission.js';
import { KubeNodeLockApi } from '../../src/lock/kube-node-lock-api.js';
import { formatLockValue } from '../../src/lock/lock-value.js';
import { NodeLocks } from '../../src/lock/node-locks.js';
import { simulatedGpuNode } from '../../src/local/simulated-gpu-node.js';
import { startPodWatchRelease } from '../../src/sweeper/pod-watch-release.js';
import { EventRecorder } from '../../src/telemetry/events.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { LaggingSource } from '../support/lagging-source.js';
import { readLock, setLock } from '../support/lock-helpers.js';
import { eventually, notYet, sharedControlPlane, testCluster, uniqueName } from '../support/test-cluster.js';

const CONFIG = { bindGraceMs: 60_000, expireMs: 300_000 };
const defaults = {
  nodePolicy: 'binpack' as const,
  gpuPolicy: 'spread' as const,
  requestDefaults: DEFAULT_REQUEST_DEFAULTS,
};

/** A GPU pod nothing else binds (no scheduler of that name runs). */
function gpuPod(name: string): V1Pod {
  return {
    metadata: { name, labels: { app: 'sts' } },
    spec: {
      schedulerName: 'nobody',
      containers: [
        {
          name: 'main',
          image: 'registry.invalid/none:1',
          resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1000' } },
        },
      ],
    },
  };
}

/**
 * Issue #42 on the real kube-apiserver: the lock names a pod by namespace/name only, and a
 * StatefulSet (or a training operator) recreates a deleted pod under the same name. The state store,
 * NodeLocks with the kubelet-admission rules, the Binder and the pod-watch release are wired as serve
 * wires them; the node's kubelet traces (its Lease, its Event about a pod) are written by the test as
 * kubelet writes them. On real kubelets with a StatefulSet: test/e2e/real-same-name-recreate.test.ts.
 */
describe('lock owners by UID, events by resourceVersion (real kube-apiserver, issue #42)', function () {
  this.timeout(90_000);
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function harness(podLagMs = 0, proxy?: FaultProxy) {
    const kubeConfig = proxy?.kubeConfig() ?? testCluster().kubeConfig;
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const sources = kubeSources(kubeConfig);
    const pods = new LaggingSource(sources.pods, podLagMs);
    const cache = new ClusterCache({ sources: { ...sources, pods } });
    cleanups.push(() => cache.stop());
    await cache.start();
    const kubeletAdmission = new KubeletAdmission({
      api: new KubeKubeletEvidenceApi(core, kubeConfig.makeApiClient(CoordinationV1Api)),
    });
    const released: string[] = [];
    const locks = new NodeLocks({
      api: new KubeNodeLockApi(core),
      view: cache.lockView,
      config: CONFIG,
      kubeletAdmission,
      observer: {
        onLockEvent: (event) => {
          if (event.type === 'released') released.push(`${event.path}:${event.reason}`);
        },
      },
    });
    const logs: string[] = [];
    const stopWatch = startPodWatchRelease({
      cache,
      locks,
      log: (message) => {
        logs.push(message);
      },
    });
    cleanups.push(stopWatch);
    const binder = new Binder({
      core,
      cache,
      locks,
      events: new EventRecorder(core, 'test'),
      defaults,
      lockWaitMs: 3000,
      timeoutMs: 8000,
      log: (level, message) => {
        logs.push(`[bind ${level}] ${message}`);
      },
    });
    return { core, cache, pods, binder, logs, released };
  }

  /** A node as a kubelet registers it: kubelet version reported and its Lease in kube-node-lease. */
  async function kubeletNode(core: CoreV1Api): Promise<string> {
    const name = uniqueName('sts-node');
    const node = simulatedGpuNode({ name, gpus: 2 });
    const body: V1Node = {
      ...node,
      status: { ...node.status, nodeInfo: { ...node.status?.nodeInfo, kubeletVersion: 'v1.37.2' } as never },
    };
    await core.createNode({ body });
    const coordination = testCluster().kubeConfig.makeApiClient(CoordinationV1Api);
    await coordination.createNamespacedLease({
      namespace: NODE_LEASE_NAMESPACE,
      body: {
        metadata: { name },
        spec: { holderIdentity: name, leaseDurationSeconds: 40, renewTime: new V1MicroTime() },
      },
    });
    cleanups.push(async () => {
      await core.deleteNode({ name }).catch(() => undefined);
    });
    return name;
  }

  async function created(core: CoreV1Api, namespace: string, name: string): Promise<string> {
    const pod = await core.createNamespacedPod({ namespace, body: gpuPod(name) });
    return pod.metadata?.uid ?? '';
  }

  const storeHas = (
    cache: ClusterCache,
    namespace: string,
    name: string,
    uid: string | undefined,
    timeoutMs = 15_000,
  ) =>
    eventually(
      `the store to show ${name} as ${uid ?? 'gone'}`,
      () =>
        Promise.resolve(
          cache.pod(namespace, name)?.metadata?.uid === uid
            ? true
            : notYet(`uid ${cache.pod(namespace, name)?.metadata?.uid ?? 'none'}`),
        ),
      timeoutMs,
      20,
    );

  it("item 1: the recreated pod's bind does not adopt the lock of the dead incarnation kubelet may still admit; it binds once kubelet is past it", async () => {
    const { core, namespace } = testCluster();
    const { cache, binder, logs } = await harness();
    const node = await kubeletNode(core);
    const first = await created(core, namespace, 'worker-0');
    await storeHas(cache, namespace, 'worker-0', first);
    expect(
      await binder.bind({ podName: 'worker-0', podNamespace: namespace, podUid: first, node }),
      logs.join('\n'),
    ).to.deep.equal({});
    const lock = await readLock(core, node);
    expect(lock).to.match(/,worker-0$/);

    // Force-deleted before kubelet admitted it (bind-phase still allocating); recreated at once.
    await core.deleteNamespacedPod({ namespace, name: 'worker-0', gracePeriodSeconds: 0 });
    await storeHas(cache, namespace, 'worker-0', undefined);
    const second = await created(core, namespace, 'worker-0');
    await storeHas(cache, namespace, 'worker-0', second);

    const refused = await binder.bind({ podName: 'worker-0', podNamespace: namespace, podUid: second, node });
    expect(refused.error, 'the new incarnation waits like any other pod').to.be.a('string');
    expect(await readLock(core, node), "the dead incarnation's lock, not re-stamped").to.equal(lock);
    expect(
      (await core.readNamespacedPod({ namespace, name: 'worker-0' })).spec?.nodeName ?? '',
      'not bound while kubelet may admit the dead one',
    ).to.equal('');

    // kubelet resumes, admits the dead pod from its queue; its Allocate is refused and kubelet says so.
    await core.createNamespacedEvent({
      namespace,
      body: {
        metadata: { name: uniqueName('worker-0') },
        involvedObject: { kind: 'Pod', apiVersion: 'v1', namespace, name: 'worker-0', uid: first },
        reason: 'UnexpectedAdmissionError',
        type: 'Warning',
        message: 'Allocate failed due to rpc error: pods "worker-0" not found, which is unexpected',
        source: { component: 'kubelet', host: node },
        firstTimestamp: new Date(),
        lastTimestamp: new Date(),
        count: 1,
      },
    });
    expect(
      await binder.bind({ podName: 'worker-0', podNamespace: namespace, podUid: second, node }),
      logs.join('\n'),
    ).to.deep.equal({});
    const bound = await core.readNamespacedPod({ namespace, name: 'worker-0' });
    expect(bound.spec?.nodeName).to.equal(node);
    expect(bound.metadata?.annotations?.[BIND_PHASE_ANNOTATION]).to.equal('allocating');
    expect(await readLock(core, node))
      .to.match(/,worker-0$/)
      .and.not.equal(lock);
  });

  it('item 4: a lock whose owner kubelet has admitted (status.startTime) while bind-phase still says allocating is freed by the pod watch, and the release says why', async () => {
    const { core, namespace } = testCluster();
    const { cache, binder, logs, released } = await harness();
    const node = await kubeletNode(core);
    const uid = await created(core, namespace, 'worker-2');
    await storeHas(cache, namespace, 'worker-2', uid);
    expect(
      await binder.bind({ podName: 'worker-2', podNamespace: namespace, podUid: uid, node }),
      logs.join('\n'),
    ).to.deep.equal({});
    expect(await readLock(core, node)).to.match(/,worker-2$/);
    // The plugin answered Allocate and returned before it flipped bind-phase or released the lock
    // (HAMi v2.10 on a failed re-read); kubelet admitted the pod and reports its first status.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(await readLock(core, node), 'kept while kubelet has not admitted it').to.match(/,worker-2$/);
    const pod = await core.readNamespacedPod({ namespace, name: 'worker-2' });
    await core.replaceNamespacedPodStatus({
      namespace,
      name: 'worker-2',
      body: { ...pod, status: { ...pod.status, phase: 'Pending', startTime: new Date() } },
    });
    const admitted = Date.now();
    await eventually(
      'the lock to go',
      async () => ((await readLock(core, node)) === undefined ? true : notYet('still locked')),
      10_000,
      50,
    );
    process.stdout.write(`      kubelet's first status -> lock released: ${Date.now() - admitted} ms\n`);
    expect(released, 'released by the pod watch, with the reason the Event and metrics carry').to.deep.equal([
      'watch:owner-admitted',
    ]);
    expect(
      (await core.readNamespacedPod({ namespace, name: 'worker-2' })).metadata?.annotations?.[BIND_PHASE_ANNOTATION],
      "bind-phase is the plugin's, left as it was",
    ).to.equal('allocating');
  });

  it('item 3: a pod that vanished from a relist is judged by what kubelet may still admit, not by its stale copy (unbound when last seen, bound and allocating in the gap)', async () => {
    const { core, namespace } = testCluster();
    const proxy = await FaultProxy.start({ upstream: sharedControlPlane() });
    cleanups.push(() => proxy.stop());
    const { cache } = await harness(0, proxy);
    const node = await kubeletNode(core);
    const uid = await created(core, namespace, 'worker-3');
    await storeHas(cache, namespace, 'worker-3', uid);
    // The store's pod watch goes down and its relists fail for a while.
    const down = proxy.addRule({
      match: { method: 'GET', path: /^\/api\/v1\/pods$/ },
      action: { kind: 'fail', status: 503 },
      times: 2,
    });
    proxy.breakWatches();
    await down.whenHit();
    // In the gap: a bind of it (another replica's) locks the node and binds it, allocating; then it is
    // force-deleted before the frozen kubelet admitted it.
    await setLock(core, node, formatLockValue(new Date(), { namespace, name: 'worker-3' }));
    await core.createNamespacedPodBinding({
      namespace,
      name: 'worker-3',
      body: {
        metadata: {
          name: 'worker-3',
          uid,
          annotations: { [BIND_PHASE_ANNOTATION]: 'allocating', 'hami.io/vgpu-node': node },
        },
        target: { apiVersion: 'v1', kind: 'Node', name: node },
      },
    });
    await core.deleteNamespacedPod({ namespace, name: 'worker-3', gracePeriodSeconds: 0 });
    // The relist: the pod is missing, its stale copy unbound.
    await storeHas(cache, namespace, 'worker-3', undefined, 40_000);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(await readLock(core, node), 'kubelet may still admit it: the lock stays').to.match(/,worker-3$/);
    expect(cache.goneIncarnation(namespace, 'worker-3', uid)).to.deep.include({ final: false, boundTo: undefined });
  });

  it('item 2: a delete the pod watch delivers late (after the name was recreated and its new lock written) does not free the new lock', async () => {
    const { core, namespace } = testCluster();
    const { cache, pods, logs } = await harness();
    const node = await kubeletNode(core);
    await created(core, namespace, 'worker-1');
    await setLock(core, node, formatLockValue(new Date(), { namespace, name: 'worker-1' }));
    await eventually(
      'the store to see the lock',
      () => Promise.resolve(cache.lockOf(node) !== undefined ? true : notYet('no lock')),
      10_000,
      20,
    );
    // The first incarnation's bind gave up and released its lock; from now on the pod watch lags.
    await setLock(core, node, null);
    pods.lagMs = 3000;
    await core.deleteNamespacedPod({ namespace, name: 'worker-1', gracePeriodSeconds: 0 });
    const second = await created(core, namespace, 'worker-1');
    const newLock = formatLockValue(new Date(), { namespace, name: 'worker-1' });
    await setLock(core, node, newLock);
    // The late DELETED of the first incarnation, then the ADDED of the second.
    await storeHas(cache, namespace, 'worker-1', second);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(await readLock(core, node), `the second incarnation's lock stays\n${logs.join('\n')}`).to.equal(newLock);
  });
});
