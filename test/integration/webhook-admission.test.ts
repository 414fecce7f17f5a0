import { CoreV1Api, NodeV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { PodAdmissionHandler, type AdmissionOutcome } from '../../src/admission/pod-admission-handler.js';
import { ClusterCache } from '../../src/cluster/cluster-cache.js';
import { kubeSources } from '../../src/cluster/kube-list-watch.js';
import type { PodMutationConfig } from '../../src/admission/pod-mutation.js';
import { loadKubeConfig } from '../../src/kube/client.js';
import { KubeNodeLockApi } from '../../src/lock/kube-node-lock-api.js';
import type { ControlPlane } from '../../src/local/control-plane.js';
import { NodeLocks } from '../../src/lock/node-locks.js';
import { apiStatusOf, httpStatusOf } from '../../src/kube/errors.js';
import { formatLockValue } from '../../src/lock/lock-value.js';
import { createGpuNode, createPod, readLock, setLock } from '../support/lock-helpers.js';
import { eventually, notYet, sharedControlPlane, testCluster } from '../support/test-cluster.js';
import { WebhookFixture } from '../support/webhook-fixture.js';

/**
 * The shipped webhook registration (WebhookFixture's), served by a handler built with the given
 * mutation settings, so HAMi's optional settings go through the real apiserver as operators set them.
 */
class ConfiguredWebhookFixture extends WebhookFixture {
  constructor(
    private readonly controlPlane: ControlPlane,
    private readonly mutation: PodMutationConfig,
  ) {
    super(controlPlane);
  }

  override async start(): Promise<void> {
    const kubeConfig = loadKubeConfig(this.controlPlane.kubeconfigPath);
    await this.serve(
      new PodAdmissionHandler({
        mutation: this.mutation,
        locks: new NodeLocks({
          api: new KubeNodeLockApi(kubeConfig.makeApiClient(CoreV1Api)),
          config: { bindGraceMs: 60_000, expireMs: 300_000 },
        }),
        deleteTimeoutMs: 5000,
        onOutcome: (request) => {
          this.seen.push(`${request.operation} ${request.namespace ?? ''}/${request.name ?? ''}`);
        },
      }),
    );
  }
}

/**
 * The webhook as serve wires it: with the state store (its lock view and stored locks), so a DELETE of a
 * pod the store shows holding no lock is answered without touching the API. Counts release calls.
 */
class StoreWebhookFixture extends WebhookFixture {
  readonly outcomes: { name: string; outcome: AdmissionOutcome }[] = [];
  releaseCalls = 0;
  cache: ClusterCache | undefined;
  constructor(private readonly controlPlane: ControlPlane) {
    super(controlPlane);
  }

  override async start(): Promise<void> {
    const kubeConfig = loadKubeConfig(this.controlPlane.kubeconfigPath);
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const cache = new ClusterCache({ sources: kubeSources(kubeConfig) });
    this.cache = cache;
    await cache.start();
    const locks = new NodeLocks({
      api: new KubeNodeLockApi(core),
      view: cache.lockView,
      config: { bindGraceMs: 60_000, expireMs: 300_000 },
    });
    await this.serve(
      new PodAdmissionHandler({
        mutation: { schedulerName: 'hami-scheduler', overwriteDefaultScheduler: true, defaultGpuCount: 1 },
        locks: {
          releaseIfReleasable: (...args) => {
            this.releaseCalls += 1;
            return locks.releaseIfReleasable(...args);
          },
        },
        storedLocks: cache,
        deleteTimeoutMs: 5000,
        onOutcome: (request, outcome) => {
          this.seen.push(`${request.operation} ${request.namespace ?? ''}/${request.name ?? ''}`);
          this.outcomes.push({ name: request.name ?? '', outcome });
        },
      }),
    );
  }

  override async stop(): Promise<void> {
    await super.stop();
    await this.cache?.stop();
  }
}

function gpuPod(name: string, extra: Record<string, unknown> = {}): V1Pod {
  return {
    metadata: { name },
    spec: { containers: [{ name: 'main', image: 'cuda', resources: { limits: { 'nvidia.com/gpu': '1' } }, ...extra }] },
  };
}

async function ensureRuntimeClass(name: string): Promise<void> {
  const api = testCluster().kubeConfig.makeApiClient(NodeV1Api);
  await api.createRuntimeClass({ body: { metadata: { name }, handler: name } }).catch((error: unknown) => {
    if (httpStatusOf(error) !== 409) throw error;
  });
}

describe('admission webhook over TLS, called by the real apiserver', function () {
  this.timeout(60_000);
  let webhook: WebhookFixture;

  before(async () => {
    webhook = new WebhookFixture(sharedControlPlane());
    await webhook.start();
  });
  after(async () => {
    await webhook.stop();
  });
  beforeEach(async () => {
    await webhook.enroll(testCluster().namespace);
  });

  describe('CREATE', () => {
    it('comes back mutated for a GPU pod created through the API', async () => {
      const { core, namespace } = testCluster();
      const created = await core.createNamespacedPod({ namespace, body: gpuPod('trainer') });
      expect(created.spec?.schedulerName).to.equal('hami-scheduler');
      expect(created.spec?.containers[0]?.resources?.limits).to.deep.equal({
        'nvidia.com/gpu': '1',
        'nvidia.com/gpucores': '100',
      });
      // Defaulting still ran after our patch: requests follow limits.
      expect(created.spec?.containers[0]?.resources?.requests).to.deep.equal({
        'nvidia.com/gpu': '1',
        'nvidia.com/gpucores': '100',
      });
    });

    it('defaults the count for a memory-only request and passes warnings to the client', async () => {
      const { core, namespace } = testCluster();
      const body: V1Pod = {
        metadata: { name: 'shared' },
        spec: { containers: [{ name: 'main', image: 'cuda', resources: { limits: { 'nvidia.com/gpumem': '2048' } } }] },
      };
      const answer = await core.createNamespacedPodWithHttpInfo({ namespace, body });
      expect(answer.data.spec?.containers[0]?.resources?.limits).to.deep.equal({
        'nvidia.com/gpumem': '2048',
        'nvidia.com/gpu': '1',
      });
      expect(answer.headers.warning).to.include('nvidia.com/gpu set to 1');
    });

    it('leaves a non-GPU pod untouched: the shipped matchConditions do not even send it, nor its DELETE', async () => {
      const { core, namespace } = testCluster();
      const created = await core.createNamespacedPod({
        namespace,
        body: { metadata: { name: 'web' }, spec: { containers: [{ name: 'nginx', image: 'nginx' }] } },
      });
      await core.deleteNamespacedPod({ name: 'web', namespace, gracePeriodSeconds: 0 });
      await core.createNamespacedPod({ namespace, body: gpuPod('gpu-marker') });
      expect(created.spec?.schedulerName).to.equal('default-scheduler');
      expect(created.spec?.containers[0]?.resources).to.deep.equal({});
      expect(
        webhook.seen
          .filter((entry) => entry.startsWith('CREATE') || entry.startsWith('DELETE'))
          .filter((entry) => entry.endsWith(`${namespace}/web`)),
      ).to.deep.equal([]);
      expect(webhook.seen).to.include(`CREATE ${namespace}/gpu-marker`);
    });

    it('denies a privileged GPU pod with its message', async () => {
      const { core, namespace } = testCluster();
      const error: unknown = await core
        .createNamespacedPod({ namespace, body: gpuPod('root', { securityContext: { privileged: true } }) })
        .then(
          () => undefined,
          (caught: unknown) => caught,
        );
      expect(httpStatusOf(error)).to.equal(403);
      expect(apiStatusOf(error)?.message).to.equal(
        'admission webhook "create.pods.vgpu-warden.io" denied the request: container main is privileged; privileged containers cannot share GPUs',
      );
    });

    it('denies a GPU share that cannot be read with 400, naming container and resource, before kube-apiserver validates', async () => {
      const { core, namespace } = testCluster();
      const cases: [Record<string, string>, string][] = [
        // kube-apiserver admits these (integers, not negative): only the webhook (or the policy) refuses them.
        [
          { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '3Gi' },
          'invalid nvidia.com/gpumem value "3Gi" in container main: must be an integer between 0 and 2147483647',
        ],
        [
          { 'nvidia.com/gpu': '2147483648' },
          'invalid nvidia.com/gpu value "2147483648" in container main: must be an integer between 0 and 2147483647',
        ],
        [
          { 'nvidia.com/gpu': '1', 'nvidia.com/gpucores': '150' },
          'invalid nvidia.com/gpucores value "150" in container main: must be an integer between 0 and 100',
        ],
        // Mutating admission runs before kube-apiserver's own validation: the webhook is first to refuse these.
        [
          { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '-1' },
          'invalid nvidia.com/gpumem value "-1" in container main: must be an integer between 0 and 2147483647',
        ],
        [
          { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1500m' },
          'invalid nvidia.com/gpumem value "1500m" in container main: not a whole number; must be an integer between 0 and 2147483647',
        ],
      ];
      for (const [limits, message] of cases) {
        const body: V1Pod = {
          metadata: { name: 'share' },
          spec: { containers: [{ name: 'main', image: 'cuda', resources: { limits } }] },
        };
        const error: unknown = await core.createNamespacedPod({ namespace, body }).then(
          () => undefined,
          (caught: unknown) => caught,
        );
        expect(httpStatusOf(error), JSON.stringify(limits)).to.equal(400);
        expect(apiStatusOf(error)?.message).to.equal(
          `admission webhook "create.pods.vgpu-warden.io" denied the request: ${message}`,
        );
      }
      // Not a quantity at all: kube-apiserver refuses to decode it, and never calls the webhook.
      const body: V1Pod = {
        metadata: { name: 'abc' },
        spec: { containers: [{ name: 'main', image: 'cuda', resources: { limits: { 'nvidia.com/gpu': 'abc' } } }] },
      };
      const error: unknown = await core.createNamespacedPod({ namespace, body }).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(httpStatusOf(error)).to.equal(400);
      expect(apiStatusOf(error)?.message).to.include('quantities must match the regular expression');
      expect(webhook.seen).to.not.include(`CREATE ${namespace}/abc`);
    });

    it('denies a pod that arrives with scheduler-owned annotations', async () => {
      const { core, namespace } = testCluster();
      const body = gpuPod('forger');
      body.metadata = { name: 'forger', annotations: { 'hami.io/vgpu-devices-to-allocate': 'GPU-0,NVIDIA,1000,10:;' } };
      const error: unknown = await core.createNamespacedPod({ namespace, body }).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(httpStatusOf(error)).to.equal(403);
      expect(apiStatusOf(error)?.message).to.include('scheduler-owned annotations (hami.io/vgpu-devices-to-allocate)');
    });

    it('skips namespaces labelled hami.io/webhook=ignore (namespaceSelector)', async () => {
      const { core, namespace } = testCluster();
      await core.patchNamespace(
        { name: namespace, body: { metadata: { labels: { 'hami.io/webhook': 'ignore' } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      // The apiserver reads namespace labels from its cache; give it a moment to see the new one.
      const created = await eventually(
        'the namespace opt-out to take effect',
        async () => {
          const pod = await core.createNamespacedPod({ namespace, body: gpuPod('unmanaged'), dryRun: 'All' });
          return pod.spec?.schedulerName === 'default-scheduler'
            ? pod
            : notYet(`dry-run pod still mutated: schedulerName ${pod.spec?.schedulerName ?? 'none'}`);
        },
        10_000,
        200,
      );
      expect(created.spec?.containers[0]?.resources?.limits).to.deep.equal({ 'nvidia.com/gpu': '1' });
    });

    it('gives a pod label hami.io/webhook=ignore no effect: the pod is mutated, forged annotations denied', async () => {
      const { core, namespace } = testCluster();
      const body = gpuPod('opted-out');
      body.metadata = { name: 'opted-out', labels: { 'hami.io/webhook': 'ignore' } };
      expect((await core.createNamespacedPod({ namespace, body })).spec?.schedulerName).to.equal('hami-scheduler');
      body.metadata = {
        name: 'opted-out-forger',
        labels: { 'hami.io/webhook': 'ignore' },
        annotations: { 'hami.io/vgpu-devices-allocated': 'GPU-0,NVIDIA,1000,10:;' },
      };
      const error: unknown = await core.createNamespacedPod({ namespace, body }).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(httpStatusOf(error)).to.equal(403);
      expect(apiStatusOf(error)?.message).to.include('scheduler-owned annotations (hami.io/vgpu-devices-allocated)');
    });
  });

  describe("HAMi's webhook settings (overwriteEnv, runtimeClassName, gpuCorePolicy)", () => {
    let configured: ConfiguredWebhookFixture;
    const mutation: PodMutationConfig = {
      schedulerName: 'hami-scheduler',
      overwriteDefaultScheduler: true,
      defaultGpuCount: 1,
      overwriteEnv: true,
      runtimeClassName: 'nvidia',
      gpuCorePolicy: 'force',
    };

    before(async () => {
      configured = new ConfiguredWebhookFixture(sharedControlPlane(), mutation);
      await configured.start();
    });
    after(async () => {
      await configured.stop();
    });
    // Relabels the namespace for this webhook only, so the default fixture's webhook stays out.
    beforeEach(async () => {
      // The apiserver's RuntimeClass admission refuses a pod naming a class that does not exist.
      for (const name of ['nvidia', 'custom']) await ensureRuntimeClass(name);
      await configured.enroll(testCluster().namespace);
    });

    it("overwriteEnv: a GPU pod's container without a GPU gets NVIDIA_VISIBLE_DEVICES=none, the GPU container does not", async () => {
      const { core, namespace } = testCluster();
      const body: V1Pod = {
        metadata: { name: 'with-sidecar' },
        spec: {
          containers: [
            { name: 'main', image: 'cuda', resources: { limits: { 'nvidia.com/gpu': '1' } } },
            { name: 'log', image: 'busybox', env: [{ name: 'NVIDIA_VISIBLE_DEVICES', value: 'all' }] },
          ],
        },
      };
      const created = await core.createNamespacedPod({ namespace, body });
      expect(created.spec?.containers[1]?.env).to.deep.equal([
        { name: 'NVIDIA_VISIBLE_DEVICES', value: 'all' },
        { name: 'NVIDIA_VISIBLE_DEVICES', value: 'none' },
      ]);
      expect((created.spec?.containers[0]?.env ?? []).map((entry) => entry.name)).not.to.include(
        'NVIDIA_VISIBLE_DEVICES',
      );
    });

    it('runtimeClassName: a GPU pod naming none gets it, a pod naming its own keeps it', async () => {
      const { core, namespace } = testCluster();
      const created = await core.createNamespacedPod({ namespace, body: gpuPod('plain') });
      expect(created.spec?.runtimeClassName).to.equal('nvidia');
      const own = gpuPod('own-class');
      own.spec = { ...own.spec!, runtimeClassName: 'custom' };
      expect((await core.createNamespacedPod({ namespace, body: own })).spec?.runtimeClassName).to.equal('custom');
    });

    it('gpuCorePolicy: the GPU container gets GPU_CORE_UTILIZATION_POLICY=force exactly once', async () => {
      const { core, namespace } = testCluster();
      const created = await core.createNamespacedPod({
        namespace,
        body: gpuPod('policy', { env: [{ name: 'A', value: '1' }] }),
      });
      expect(created.spec?.containers[0]?.env).to.deep.equal([
        { name: 'A', value: '1' },
        { name: 'GPU_CORE_UTILIZATION_POLICY', value: 'force' },
      ]);
    });
  });

  describe('DELETE', () => {
    async function lockedBoundPod(name: string, bindPhase = 'success'): Promise<{ node: string; lock: string }> {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const pod = await createPod(core, namespace, name, { nodeName: node, bindPhase, gpus: 1 });
      const lock = formatLockValue(new Date(), pod);
      await setLock(core, node, lock);
      return { node, lock };
    }

    it('releases a lock left behind before a graceful delete returns (the pod stays, terminating)', async () => {
      const { core, namespace } = testCluster();
      const { node } = await lockedBoundPod('leaving');
      await core.deleteNamespacedPod({ name: 'leaving', namespace });
      expect(await readLock(core, node)).to.equal(undefined);
      expect((await core.readNamespacedPod({ name: 'leaving', namespace })).metadata?.deletionTimestamp).to.not.equal(
        undefined,
      );
      // The repeated DELETE of a graceful delete is harmless.
      await core.deleteNamespacedPod({ name: 'leaving', namespace, gracePeriodSeconds: 0 });
      expect(await readLock(core, node)).to.equal(undefined);
    });

    it('releases a lock left behind before a delete with grace 0 returns', async () => {
      const { core, namespace } = testCluster();
      const { node } = await lockedBoundPod('gone');
      await core.deleteNamespacedPod({ name: 'gone', namespace, gracePeriodSeconds: 0 });
      expect(await readLock(core, node)).to.equal(undefined);
    });

    // kubelet admits a pod that arrives marked for deletion, and the plugin finds it through the
    // lock: freed now, the lock could name the next pod by then (found by the chaos suite).
    it('keeps the lock of a pod bound there and awaiting Allocate, graceful delete or grace 0', async () => {
      const { core, namespace } = testCluster();
      const graceful = await lockedBoundPod('awaiting', 'allocating');
      await core.deleteNamespacedPod({ name: 'awaiting', namespace });
      expect(await readLock(core, graceful.node)).to.equal(graceful.lock);
      const forced = await lockedBoundPod('forced', 'allocating');
      await core.deleteNamespacedPod({ name: 'forced', namespace, gracePeriodSeconds: 0 });
      expect(await readLock(core, forced.node), 'the webhook runs while the pod still exists').to.equal(forced.lock);
    });

    it('does not release the lock on a dry-run delete', async () => {
      const { core, namespace } = testCluster();
      const { node, lock } = await lockedBoundPod('still-here');
      await core.deleteNamespacedPod({ name: 'still-here', namespace, dryRun: 'All' });
      expect(await readLock(core, node)).to.equal(lock);
    });

    it('leaves the lock alone when the deleted pod does not own it', async () => {
      const { core, namespace } = testCluster();
      const { node, lock } = await lockedBoundPod('owner');
      await createPod(core, namespace, 'bystander', { nodeName: node, gpus: 1 });
      await core.deleteNamespacedPod({ name: 'bystander', namespace, gracePeriodSeconds: 0 });
      expect(await readLock(core, node)).to.equal(lock);
    });
  });

  describe('DELETE answered from the state store, as serve wires it', () => {
    let stored: StoreWebhookFixture;
    before(async () => {
      stored = new StoreWebhookFixture(sharedControlPlane());
      await stored.start();
    });
    after(async () => {
      await stored.stop();
    });
    beforeEach(async () => {
      await stored.enroll(testCluster().namespace);
    });

    async function lockSeenByStore(name: string): Promise<{ node: string; lock: string }> {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const pod = await createPod(core, namespace, name, { nodeName: node, bindPhase: 'success', gpus: 1 });
      const lock = formatLockValue(new Date(), pod);
      await setLock(core, node, lock);
      await eventually('the store shows the lock', () => {
        const raw = stored.cache?.lockOf(node)?.raw;
        return Promise.resolve(raw === lock ? raw : notYet(`lock ${raw ?? '(none)'}`));
      });
      return { node, lock };
    }
    const deleteOutcomesOf = (name: string) =>
      stored.outcomes.flatMap(({ name: of, outcome }) =>
        of === name && outcome.operation === 'DELETE' ? [outcome.outcome] : [],
      );

    it('answers the DELETE of a pod that holds no lock without a release call: the holder keeps its lock', async () => {
      const { core, namespace } = testCluster();
      const { node, lock } = await lockSeenByStore('holder');
      await createPod(core, namespace, 'scaled-down', { nodeName: node, bindPhase: 'success', gpus: 1 });
      const callsBefore = stored.releaseCalls;
      await core.deleteNamespacedPod({ name: 'scaled-down', namespace, gracePeriodSeconds: 0 });
      // kube-apiserver may call a DELETE webhook more than once for one delete; each answer is the same.
      const outcomes = deleteOutcomesOf('scaled-down');
      expect(outcomes).to.not.be.empty;
      for (const outcome of outcomes) expect(outcome).to.deep.equal({ kind: 'skipped', reason: 'not-holder' });
      expect(stored.releaseCalls).to.equal(callsBefore);
      expect(await readLock(core, node)).to.equal(lock);
    });

    it("releases through the API when the store shows the deleted pod holding its node's lock", async () => {
      const { core, namespace } = testCluster();
      const { node } = await lockSeenByStore('leaving');
      const callsBefore = stored.releaseCalls;
      await core.deleteNamespacedPod({ name: 'leaving', namespace, gracePeriodSeconds: 0 });
      expect(deleteOutcomesOf('leaving')[0]?.kind).to.equal('done');
      expect(stored.releaseCalls).to.equal(callsBefore + 1);
      expect(await readLock(core, node)).to.equal(undefined);
    });
  });

  describe('bad input sent straight to /mutate', () => {
    const v1 = (request: unknown) =>
      JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request });
    const table: {
      title: string;
      body: string | Buffer;
      contentType?: string;
      contentEncoding?: string;
      method?: string;
      status: number;
      allowed?: boolean;
      code?: number;
      uid?: string;
      apiVersion?: string;
    }[] = [
      { title: 'no Content-Type', body: v1({ uid: 'a', operation: 'CREATE' }), status: 400, allowed: false, code: 415 },
      {
        title: 'text/plain',
        body: v1({ uid: 'a', operation: 'CREATE' }),
        contentType: 'text/plain',
        status: 400,
        allowed: false,
        code: 415,
      },
      {
        title: 'form encoding',
        body: 'a=b',
        contentType: 'application/x-www-form-urlencoded',
        status: 400,
        allowed: false,
        code: 415,
      },
      { title: 'empty body', body: '', contentType: 'application/json', status: 400, allowed: false, code: 400 },
      {
        title: 'truncated JSON',
        body: '{"apiVersion":"admission.k8s.io/v1",',
        contentType: 'application/json',
        status: 400,
        allowed: false,
        code: 400,
      },
      { title: 'a JSON array', body: '[]', contentType: 'application/json', status: 400, allowed: false, code: 400 },
      {
        title: 'a JSON string',
        body: '"review"',
        contentType: 'application/json',
        status: 400,
        allowed: false,
        code: 400,
      },
      { title: 'JSON null', body: 'null', contentType: 'application/json', status: 400, allowed: false, code: 400 },
      {
        title: 'no request',
        body: JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }),
        contentType: 'application/json',
        status: 400,
        allowed: false,
        code: 400,
      },
      {
        title: 'request without uid',
        body: v1({ operation: 'CREATE' }),
        contentType: 'application/json',
        status: 400,
        allowed: false,
        code: 400,
      },
      {
        title: 'empty uid',
        body: v1({ uid: '', operation: 'CREATE' }),
        contentType: 'application/json',
        status: 400,
        allowed: false,
        code: 400,
      },
      {
        title: 'unknown review version',
        body: JSON.stringify({
          apiVersion: 'admission.k8s.io/v9',
          kind: 'AdmissionReview',
          request: { uid: 'v9', operation: 'CREATE' },
        }),
        contentType: 'application/json',
        status: 200,
        allowed: false,
        code: 400,
        uid: 'v9',
      },
      {
        title: 'wrong kind',
        body: JSON.stringify({
          apiVersion: 'admission.k8s.io/v1',
          kind: 'Status',
          request: { uid: 'k1', operation: 'CREATE' },
        }),
        contentType: 'application/json',
        status: 200,
        allowed: false,
        code: 400,
        uid: 'k1',
      },
      {
        title: 'no operation',
        body: v1({ uid: 'o1' }),
        contentType: 'application/json',
        status: 200,
        allowed: false,
        code: 400,
        uid: 'o1',
      },
      {
        title: 'CREATE without object',
        body: v1({ uid: 'c1', operation: 'CREATE', kind: { kind: 'Pod' } }),
        contentType: 'application/json',
        status: 200,
        allowed: false,
        code: 400,
        uid: 'c1',
      },
      {
        title: 'CREATE with a string object',
        body: v1({ uid: 'c2', operation: 'CREATE', object: 'pod' }),
        contentType: 'application/json',
        status: 200,
        allowed: false,
        code: 400,
        uid: 'c2',
      },
      {
        title: 'CREATE with containers that are not objects',
        body: v1({ uid: 'c3', operation: 'CREATE', object: { spec: { containers: [42, null] } } }),
        contentType: 'application/json',
        status: 200,
        allowed: true,
        uid: 'c3',
      },
      {
        title: 'DELETE with a garbage oldObject (never denied)',
        body: v1({ uid: 'd1', operation: 'DELETE', oldObject: { spec: { nodeName: 7 } } }),
        contentType: 'application/json',
        status: 200,
        allowed: true,
        uid: 'd1',
      },
      {
        title: 'a body over 7 MB',
        body: Buffer.alloc(8 * 1024 * 1024, 0x20),
        contentType: 'application/json',
        status: 413,
        allowed: false,
        code: 413,
      },
      {
        title: 'a br-compressed body',
        body: v1({ uid: 'z1', operation: 'CREATE' }),
        contentType: 'application/json',
        contentEncoding: 'br',
        status: 415,
        allowed: false,
        code: 415,
      },
      {
        title: 'a gzip-compressed body',
        body: v1({ uid: 'z2', operation: 'CREATE' }),
        contentType: 'application/json',
        contentEncoding: 'gzip',
        status: 415,
        allowed: false,
        code: 415,
      },
      {
        title: 'a valid v1beta1 review, answered in v1beta1',
        body: JSON.stringify({
          apiVersion: 'admission.k8s.io/v1beta1',
          kind: 'AdmissionReview',
          request: { uid: 'b1', operation: 'CREATE', object: { spec: { containers: [{ name: 'c' }] } } },
        }),
        contentType: 'application/json',
        status: 200,
        allowed: true,
        uid: 'b1',
        apiVersion: 'admission.k8s.io/v1beta1',
      },
    ];

    for (const row of table) {
      it(`answers ${row.title} with HTTP ${row.status}${row.code ? ` and code ${row.code}` : ''}`, async () => {
        const answer = await webhook.send(row.body, {
          contentType: row.contentType,
          contentEncoding: row.contentEncoding,
        });
        expect(answer.status).to.equal(row.status);
        const review = JSON.parse(answer.body) as {
          apiVersion: string;
          kind: string;
          response: { uid: string; allowed: boolean; status?: { code: number } };
        };
        expect(review.kind).to.equal('AdmissionReview');
        expect(review.apiVersion).to.equal(row.apiVersion ?? 'admission.k8s.io/v1');
        expect(review.response.allowed).to.equal(row.allowed);
        expect(review.response.uid).to.equal(row.uid ?? '');
        if (row.code !== undefined) expect(review.response.status?.code).to.equal(row.code);
      });
    }

    it('keeps serving the apiserver after all of that', async () => {
      const { core, namespace } = testCluster();
      expect((await webhook.send('', { method: 'GET', path: '/mutate' })).status).to.equal(404);
      expect((await webhook.send('', { method: 'GET', path: '/healthz' })).body).to.equal('ok');
      const created = await core.createNamespacedPod({ namespace, body: gpuPod('after-garbage') });
      expect(created.spec?.schedulerName).to.equal('hami-scheduler');
    });
  });
});
