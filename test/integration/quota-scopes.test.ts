import { SchedulingV1Api, type CoreV1Api, type V1Pod, type V1ResourceQuota } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterCache } from '../../src/cluster/cluster-cache.js';
import { kubeSources } from '../../src/cluster/kube-list-watch.js';
import { QuotaIndex, type NamespaceUseOf } from '../../src/cluster/quota-index.js';
import { NO_NAMESPACE_USE, quotaExceeded, type NamespaceUse } from '../../src/devices/gpu-quota.js';
import { quotaScopeRequirements, scopesMatchPod } from '../../src/devices/quota-scopes.js';
import { DEFAULT_REQUEST_DEFAULTS, podGpuRequests } from '../../src/devices/requests.js';
import { Binder } from '../../src/extender/binder.js';
import { ExtenderService } from '../../src/extender/extender-service.js';
import { GPU_POLICY_ANNOTATION } from '../../src/hami/wire.js';
import { simulatedGpuNode } from '../../src/local/simulated-gpu-node.js';
import { KubeNodeLockApi } from '../../src/lock/kube-node-lock-api.js';
import { NodeLocks } from '../../src/lock/node-locks.js';
import { EventRecorder } from '../../src/telemetry/events.js';
import { eventually, notYet, testCluster, uniqueName } from '../support/test-cluster.js';

/**
 * ResourceQuota scopes on the real kube-apiserver. Its quota admission counts, in each quota's
 * `status.used.pods`, exactly the pods the quota's scopes match; the same pods must be the ones
 * vgpu-warden's scope matching (quota-scopes.ts) counts and holds back with the quota's GPU limits.
 * No kube-controller-manager runs here, so the test gives each quota its `status.hard` (what the
 * quota controller would), which is what quota admission reads.
 */
describe('ResourceQuota scopes: the pods a GPU quota counts (real kube-apiserver)', function () {
  this.timeout(60_000);
  const high = uniqueName('gpu-high');
  const low = uniqueName('gpu-low');

  async function createPriorityClasses(): Promise<void> {
    const scheduling = testCluster().kubeConfig.makeApiClient(SchedulingV1Api);
    for (const [name, value] of [
      [high, 1000],
      [low, 10],
    ] as const) {
      await scheduling.createPriorityClass({ body: { metadata: { name }, value } });
    }
  }

  const cleanups: (() => Promise<unknown>)[] = [];

  // Cluster-scoped: removed by name, whether or not the test got as far as making them.
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
    const scheduling = testCluster().kubeConfig.makeApiClient(SchedulingV1Api);
    for (const name of [high, low]) await scheduling.deletePriorityClass({ name }).catch(() => undefined);
  });

  async function createQuota(
    core: CoreV1Api,
    namespace: string,
    name: string,
    spec: NonNullable<V1ResourceQuota['spec']>,
  ): Promise<void> {
    const hard = { pods: '100', ...spec.hard };
    await core.createNamespacedResourceQuota({ namespace, body: { metadata: { name }, spec: { ...spec, hard } } });
    // What kube-controller-manager's quota controller would write first: admission reads status.hard and status.used.
    const created = await core.readNamespacedResourceQuota({ namespace, name });
    await core.replaceNamespacedResourceQuotaStatus({
      namespace,
      name,
      body: { ...created, status: { hard, used: { pods: '0' } } },
    });
  }

  const gpuLimits = (gpumem: number): Record<string, string> => ({
    'nvidia.com/gpu': '1',
    'nvidia.com/gpumem': String(gpumem),
  });

  async function createPod(
    core: CoreV1Api,
    namespace: string,
    name: string,
    spec: Partial<NonNullable<V1Pod['spec']>>,
    gpumem = 4000,
    annotations?: Record<string, string>,
  ): Promise<V1Pod> {
    return core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name, ...(annotations === undefined ? {} : { annotations }) },
        spec: {
          // No scheduler of this name runs: the pod stays Pending, as a GPU pod does before its bind.
          schedulerName: 'quota-scopes-nobody',
          containers: [{ name: 'app', image: 'busybox', resources: { limits: gpuLimits(gpumem) } }],
          ...spec,
        },
      },
    });
  }

  it('counts the same pods as kube-apiserver for every scope, and a PriorityClass-scoped GPU quota does not limit a pod of another priority class', async () => {
    const { core, namespace } = testCluster();
    await createPriorityClasses();
    const priority = (operator: string, values?: string[]): NonNullable<V1ResourceQuota['spec']>['scopeSelector'] => ({
      matchExpressions: [{ scopeName: 'PriorityClass', operator, ...(values === undefined ? {} : { values }) }],
    });
    const quotas: [string, NonNullable<V1ResourceQuota['spec']>][] = [
      ['high-gpu', { hard: { 'limits.nvidia.com/gpumem': '8000' }, scopeSelector: priority('In', [high]) }],
      ['not-high', { hard: { 'limits.nvidia.com/gpumem': '100000' }, scopeSelector: priority('NotIn', [high]) }],
      ['any-class', { hard: {}, scopeSelector: priority('Exists') }],
      ['no-class', { hard: {}, scopeSelector: priority('DoesNotExist') }],
      ['terminating', { hard: { 'limits.nvidia.com/gpu': '10' }, scopes: ['Terminating'] }],
      ['not-terminating', { hard: {}, scopes: ['NotTerminating'] }],
      ['best-effort', { hard: {}, scopes: ['BestEffort'] }],
      ['not-best-effort', { hard: {}, scopes: ['NotBestEffort'] }],
      [
        'cross-namespace',
        {
          hard: {},
          scopeSelector: { matchExpressions: [{ scopeName: 'CrossNamespacePodAffinity', operator: 'Exists' }] },
        },
      ],
      ['high-and-serving', { hard: {}, scopes: ['NotTerminating'], scopeSelector: priority('In', [high]) }],
      ['everything', { hard: { 'limits.nvidia.com/gpumem': '1000000' } }],
    ];
    for (const [name, spec] of quotas) await createQuota(core, namespace, name, spec);

    const affinity = {
      podAntiAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [
          {
            topologyKey: 'kubernetes.io/hostname',
            labelSelector: { matchLabels: { app: 'x' } },
            namespaces: ['other'],
          },
        ],
      },
    };
    await createPod(core, namespace, 'high-1', { priorityClassName: high }, 6000);
    await createPod(core, namespace, 'low-1', { priorityClassName: low }, 5000);
    await createPod(core, namespace, 'plain', {});
    await createPod(core, namespace, 'batch', { activeDeadlineSeconds: 600, priorityClassName: high }, 1000);
    await createPod(core, namespace, 'burstable', {
      containers: [
        { name: 'app', image: 'busybox', resources: { requests: { cpu: '100m' }, limits: gpuLimits(2000) } },
      ],
    });
    await createPod(core, namespace, 'spread-out', { affinity });

    const pods = (await core.listNamespacedPod({ namespace })).items;
    const listed = (await core.listNamespacedResourceQuota({ namespace })).items;
    expect(pods).to.have.length(6);
    const counted: Record<string, number> = {};
    const predicted: Record<string, number> = {};
    for (const quota of listed) {
      const name = quota.metadata?.name ?? '';
      counted[name] = Number(quota.status?.used?.pods ?? 'NaN');
      predicted[name] = pods.filter((pod) => scopesMatchPod(quotaScopeRequirements(quota), pod)).length;
    }
    // Not a vacuous comparison: the scopes split the six pods differently.
    expect(counted).to.deep.include({
      'high-gpu': 2,
      'not-high': 4,
      'best-effort': 5,
      'not-best-effort': 1,
      'cross-namespace': 1,
      everything: 6,
    });
    expect(predicted).to.deep.equal(counted);

    // vgpu-warden's budget from the same quotas and pods: a pod counts the gpumem it asks for.
    const index = new QuotaIndex();
    index.apply(listed.map((object) => ({ type: 'add' as const, object })));
    const useOf =
      (exclude: string): NamespaceUseOf =>
      (matches) =>
        pods
          .filter((pod) => pod.metadata?.name !== exclude && (matches === undefined || matches(pod)))
          .map((pod) => podGpuRequests(pod, DEFAULT_REQUEST_DEFAULTS).containers[0])
          .reduce<NamespaceUse>(
            (sum, request) => ({
              gpus: sum.gpus + (request?.count ?? 0),
              memoryMiB: sum.memoryMiB + (request?.memoryMiB ?? 0),
              cores: sum.cores,
            }),
            { ...NO_NAMESPACE_USE },
          );

    const lowPod = pods.find((pod) => pod.metadata?.name === 'low-1');
    const highPod = pods.find((pod) => pod.metadata?.name === 'high-1');
    const lowBudget = index.budget(namespace, lowPod, useOf('low-1'));
    const highBudget = index.budget(namespace, highPod, useOf('high-1'));
    expect(lowBudget?.limits.map((limit) => limit.quota).sort()).to.deep.equal(['everything', 'not-high']);
    expect(highBudget?.limits.map((limit) => limit.quota).sort()).to.deep.equal(['everything', 'high-gpu']);
    if (lowBudget === undefined || highBudget === undefined) return;
    // 9000 MiB more: the high class quota (8000) would refuse it for the high pod, not for the low one.
    expect(quotaExceeded(lowBudget, { gpus: 1, memoryMiB: 9000, cores: 0 })).to.equal(undefined);
    expect(quotaExceeded(highBudget, { gpus: 1, memoryMiB: 9000, cores: 0 })).to.contain(
      'high-gpu: limits.nvidia.com/gpumem 1000 used + 9000 requested > 8000',
    );
  });

  it("the extender and the binder hold a pod to the quotas whose scopes count it, each against its own pods' use, a sidecar counted beside its app container", async () => {
    const { core, namespace, kubeConfig } = testCluster();
    await createPriorityClasses();
    await createQuota(core, namespace, 'high-gpu', {
      hard: { 'limits.nvidia.com/gpumem': '8000' },
      scopeSelector: { matchExpressions: [{ scopeName: 'PriorityClass', operator: 'In', values: [high] }] },
    });
    // One node per bind: no lock left by a bind (no device plugin here) stands in the next one's way.
    const nodes = [1, 2, 3, 4].map(() => uniqueName('quota-scopes'));
    for (const name of nodes) {
      await core.createNode({ body: simulatedGpuNode({ name, gpus: 2 }) });
      cleanups.push(() => core.deleteNode({ name }));
    }
    const cache = new ClusterCache({ sources: kubeSources(kubeConfig) });
    cleanups.push(() => cache.stop());
    const started = cache.start();
    expect(await cache.waitForSync(20_000), 'store synced').to.equal(true);
    await started;
    const defaults = {
      nodePolicy: 'binpack' as const,
      gpuPolicy: 'spread' as const,
      requestDefaults: DEFAULT_REQUEST_DEFAULTS,
    };
    const events = new EventRecorder(core, 'test');
    const locks = new NodeLocks({
      api: new KubeNodeLockApi(core),
      view: cache.lockView,
      config: { bindGraceMs: 60_000, expireMs: 300_000 },
    });
    const binder = new Binder({ core, cache, locks, events, defaults, lockWaitMs: 5000, timeoutMs: 8000 });
    const service = new ExtenderService({ cache, binder, events, defaults, syncWaitMs: 5000 });
    const storeHas = (name: string, check: (pod: V1Pod) => boolean) =>
      eventually(
        `the store to have ${name}`,
        () => {
          const stored = cache.pod(namespace, name);
          return Promise.resolve(
            stored !== undefined && check(stored)
              ? true
              : notYet(`${name}: ${stored === undefined ? 'absent' : `node ${stored.spec?.nodeName ?? 'none'}`}`),
          );
        },
        10_000,
        20,
      );
    // What kube-scheduler sends: the pod as JSON.
    const filterArgs = (pod: V1Pod) => ({
      pod: JSON.parse(JSON.stringify(pod)) as Record<string, unknown>,
      nodeNames: nodes,
    });
    const bind = async (pod: V1Pod, node: string) => {
      const name = pod.metadata?.name ?? '';
      await storeHas(name, () => true);
      return binder.bind({ podName: name, podNamespace: namespace, podUid: pod.metadata?.uid ?? '', node });
    };

    // The high class: a 3000 MiB sidecar beside a 3000 MiB app container on one GPU (binpack) uses 6000.
    const sidecar = {
      name: 'sidecar',
      image: 'busybox',
      restartPolicy: 'Always',
      resources: { limits: gpuLimits(3000) },
    };
    const high1 = await createPod(
      core,
      namespace,
      'high-1',
      { priorityClassName: high, initContainers: [sidecar] },
      3000,
      { [GPU_POLICY_ANNOTATION]: 'binpack' },
    );
    expect(await bind(high1, nodes[0] ?? '')).to.deep.equal({});
    // The low class: 6000 MiB, which the high class's quota does not count.
    const low1 = await createPod(core, namespace, 'low-1', { priorityClassName: low }, 6000);
    expect(await bind(low1, nodes[1] ?? '')).to.deep.equal({});
    for (const name of ['high-1', 'low-1']) await storeHas(name, (pod) => (pod.spec?.nodeName ?? '') !== '');
    expect(cache.quotaUses().filter((use) => use.namespace === namespace)).to.deep.equal([
      { namespace, resource: 'nvidia.com/gpumem', used: 6000, limit: 8000 },
    ]);

    // 9000 MiB more of the low class: no quota counts it.
    const low2 = await createPod(core, namespace, 'low-2', { priorityClassName: low }, 9000);
    expect((await service.filter(filterArgs(low2))).NodeNames).to.deep.equal(nodes);
    expect(await bind(low2, nodes[2] ?? '')).to.deep.equal({});
    // 4000 MiB more of the high class: over its 8000 beside the sidecar pod's 6000, on every node,
    // in filter and in bind.
    const high2 = await createPod(core, namespace, 'high-2', { priorityClassName: high }, 4000);
    const refused = await service.filter(filterArgs(high2));
    expect(refused.Error).to.equal(
      `ResourceQuotaNotFit (ResourceQuota ${namespace}/high-gpu: limits.nvidia.com/gpumem 6000 used + 4000 requested > 8000)`,
    );
    expect((await bind(high2, nodes[2] ?? '')).error).to.match(/no longer fits on node .*ResourceQuotaNotFit/);
    // 2000 MiB of the high class: exactly its limit, whatever the low class uses.
    const high3 = await createPod(core, namespace, 'high-3', { priorityClassName: high }, 2000);
    expect((await service.filter(filterArgs(high3))).NodeNames).to.deep.equal(nodes);
    expect(await bind(high3, nodes[3] ?? '')).to.deep.equal({});
  });
});
