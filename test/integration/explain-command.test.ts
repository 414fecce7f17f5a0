import { PatchStrategy, setHeaderOptions, type CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { EXIT_FAILURE, EXIT_OK, runCli } from '../../src/commands/cli.js';
import { ClusterCache } from '../../src/cluster/cluster-cache.js';
import { explainCommand } from '../../src/commands/explain-command.js';
import { BIND_PHASE_ANNOTATION, TO_ALLOCATE_ANNOTATION } from '../../src/hami/wire.js';
import { DEFAULT_REQUEST_DEFAULTS } from '../../src/devices/requests.js';
import type { Explanation } from '../../src/explain/explanation.js';
import { Binder } from '../../src/extender/binder.js';
import { ExtenderService } from '../../src/extender/extender-service.js';
import { KubeNodeLockApi } from '../../src/lock/kube-node-lock-api.js';
import { NodeLocks } from '../../src/lock/node-locks.js';
import { simulatedGpuNode } from '../../src/local/simulated-gpu-node.js';
import { EventRecorder } from '../../src/telemetry/events.js';
import { setLock } from '../support/lock-helpers.js';
import { describeEvents } from '../support/observations.js';
import { eventually, notYet, testCluster, uniqueName } from '../support/test-cluster.js';
import { kubeSources } from '../../src/cluster/kube-list-watch.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const defaults = {
  nodePolicy: 'binpack' as const,
  gpuPolicy: 'spread' as const,
  requestDefaults: DEFAULT_REQUEST_DEFAULTS,
};

/**
 * Each test gets a node with a GPU model of its own and pods that accept only that model
 * (nvidia.com/use-gputype), so the nodes other tests leave in the shared control plane fail with
 * CardTypeMismatch and never change what these assertions see for our node.
 */
interface Stage {
  core: CoreV1Api;
  namespace: string;
  node: string;
  gpuType: string;
}

async function stage(cleanups: (() => Promise<void>)[]): Promise<Stage> {
  const { core, namespace } = testCluster();
  const node = uniqueName('explain');
  const gpuType = `NVIDIA-${uniqueName('EXPLAIN').toUpperCase()}`;
  await core.createNode({ body: simulatedGpuNode({ name: node, gpus: 1, gpuType }) });
  // Nodes are cluster-wide: take ours away again, so later tests' filters do not evaluate it.
  cleanups.push(async () => {
    await core.deleteNode({ name: node });
  });
  return { core, namespace, node, gpuType };
}

/** A GPU pod as the webhook leaves it (our scheduler name, cores set); no scheduler runs here. */
async function createGpuPod({ core, namespace, gpuType }: Stage, name: string, memoryMiB: number): Promise<V1Pod> {
  return core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name, annotations: { 'nvidia.com/use-gputype': gpuType } },
      spec: {
        schedulerName: 'hami-scheduler',
        containers: [
          {
            name: 'main',
            image: 'registry.invalid/none:1',
            resources: {
              limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': String(memoryMiB), 'nvidia.com/gpucores': '30' },
            },
          },
        ],
      },
    },
  });
}

/** Runs `vgpu-warden explain <ns>/<pod> [-o json]` through the CLI, its reads of the real apiserver included. */
async function explain(
  namespace: string,
  name: string,
  output: 'text' | 'json',
): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const env = { KUBECONFIG: testCluster().controlPlane.kubeconfigPath };
  const code = await runCli(
    ['explain', `${namespace}/${name}`, ...(output === 'json' ? ['-o', 'json'] : [])],
    [explainCommand()],
    { env, stdout: (line) => out.push(line), stderr: (line) => err.push(line) },
  );
  return { code, out, err };
}

async function explainJson(namespace: string, name: string): Promise<Explanation> {
  const { code, out, err } = await explain(namespace, name, 'json');
  expect(err).to.deep.equal([]);
  expect(code).to.equal(EXIT_OK);
  return JSON.parse(out.join('\n')) as Explanation;
}

describe('vgpu-warden explain on a real apiserver', function () {
  this.timeout(60_000);
  const cleanups: (() => Promise<void>)[] = [];

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** The store, locks and binder wired as serve/start-server.ts wires them (the real bind). */
  async function extender(core: CoreV1Api): Promise<{ cache: ClusterCache; binder: Binder; service: ExtenderService }> {
    const kubeConfig = testCluster().kubeConfig;
    const cache = new ClusterCache({ sources: kubeSources(kubeConfig) });
    cleanups.push(() => cache.stop());
    await cache.start();
    const events = new EventRecorder(core, 'vgpu-warden');
    const locks = new NodeLocks({
      api: new KubeNodeLockApi(core),
      view: cache.lockView,
      config: { bindGraceMs: 60_000, expireMs: 300_000 },
    });
    // Every wait announced at once: these tests read the NodeLockWait a longer wait gets.
    const binder = new Binder({
      core,
      cache,
      locks,
      events,
      defaults,
      lockWaitMs: 15_000,
      timeoutMs: 20_000,
      lockWaitEventAfterMs: 0,
    });
    return { cache, binder, service: new ExtenderService({ cache, binder, events, defaults, syncWaitMs: 5_000 }) };
  }

  async function storeHas(cache: ClusterCache, { namespace, node }: Stage, pod: V1Pod): Promise<void> {
    await eventually(
      'the store to have the node and the pod',
      () => {
        const seenUid = cache.pod(namespace, pod.metadata?.name ?? '')?.metadata?.uid;
        return Promise.resolve(
          cache.inventory(node) !== undefined && seenUid === pod.metadata?.uid
            ? true
            : notYet(
                `node ${cache.inventory(node) === undefined ? 'without inventory' : 'with inventory'}, pod ${seenUid === undefined ? 'absent' : `uid ${seenUid}`} in the store`,
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

  async function bind(binder: Binder, { namespace, node }: Stage, pod: V1Pod): Promise<{ error?: string }> {
    return binder.bind({
      podName: pod.metadata?.name ?? '',
      podNamespace: namespace,
      podUid: pod.metadata?.uid ?? '',
      node,
    });
  }

  it("fits nowhere: the verdict names HAMi's reasons, and agrees with /filter node for node", async () => {
    const staged = await stage(cleanups);
    const { cache, service } = await extender(staged.core);
    const pod = await createGpuPod(staged, 'too-big', 30_000);
    await storeHas(cache, staged, pod);
    // The extender's real filter, for comparison (it also writes the FilteringFailed event).
    const filtered = await service.filter({
      pod: JSON.parse(JSON.stringify(pod)) as Record<string, unknown>,
      nodeNames: cache.nodeNames(),
    });

    const explanation = await explainJson(staged.namespace, 'too-big');

    expect(explanation.situation).to.equal('fits-nowhere');
    expect(explanation.verdict).to.match(/^Pending: fits no node \(\d+ nodes?: /);
    expect(explanation.verdict).to.include('1 CardInsufficientMemory');
    const memory = explanation.placement?.failing.find((group) => group.reason === 'CardInsufficientMemory');
    expect(memory).to.deep.equal({
      reason: 'CardInsufficientMemory',
      count: 1,
      nodes: [{ node: staged.node, detail: filtered.FailedNodes?.get(staged.node) }],
    });
    expect(filtered.NodeNames).to.deep.equal([]);
    expect(explanation.placement?.evaluated).to.equal(cache.nodeNames().length);
    expect(explanation.webhook.state).to.equal('applied');
    expect(explanation.pod.requests).to.deep.equal([
      { container: 'main', init: false, gpus: 1, memoryMiB: 30_000, memoryPercentage: null, cores: 30 },
    ]);
    await eventually(
      'the FilteringFailed event to be listed',
      async () => {
        const again = await explainJson(staged.namespace, 'too-big');
        return again.events.items.some((event) => event.reason === 'FilteringFailed')
          ? true
          : notYet(
              `explain lists ${again.events.items.length} events: [${again.events.items.map((event) => event.reason).join(', ')}]`,
            );
      },
      10_000,
      200,
    );

    const text = await explain(staged.namespace, 'too-big', 'text');
    expect(text.code).to.equal(EXIT_OK);
    expect(text.out[0]).to.equal(`Verdict:   ${explanation.verdict}`);
    expect(text.out).to.include(
      `  CardInsufficientMemory${' '.repeat(Math.max(0, ...(explanation.placement?.failing ?? []).map((group) => group.reason.length)) - 'CardInsufficientMemory'.length)}  1 node: ${staged.node}`,
    );
  });

  it("over its namespace's GPU quota: the verdict names ResourceQuotaNotFit and the ResourceQuota, as filter does", async () => {
    const staged = await stage(cleanups);
    const { core, namespace } = staged;
    await core.createNamespacedResourceQuota({
      namespace,
      body: { metadata: { name: 'explain-quota' }, spec: { hard: { 'limits.nvidia.com/gpumem': '1500' } } },
    });
    cleanups.push(async () => {
      await core.deleteNamespacedResourceQuota({ name: 'explain-quota', namespace });
    });
    const { cache, service } = await extender(core);
    const pod = await createGpuPod(staged, 'over-quota', 2000);
    await storeHas(cache, staged, pod);
    await eventually(
      'the store to read the quota',
      () =>
        Promise.resolve(
          cache.quotaBudget(namespace) !== undefined
            ? true
            : notYet(
                `no quota budget for ${namespace} in the store${cache.problems().length === 0 ? '' : `; problems: ${cache.problems().join('; ').slice(0, 300)}`}`,
              ),
        ),
      10_000,
      20,
    );
    const filtered = await service.filter({
      pod: JSON.parse(JSON.stringify(pod)) as Record<string, unknown>,
      nodeNames: [staged.node],
    });
    const reason = `ResourceQuotaNotFit (ResourceQuota ${namespace}/explain-quota: limits.nvidia.com/gpumem 0 used + 2000 requested > 1500)`;
    // /filter refuses such a pod as a whole (an Error kube-scheduler retries on its backoff).
    expect(filtered.Error).to.equal(reason);

    const explanation = await explainJson(namespace, 'over-quota');
    expect(explanation.situation).to.equal('fits-nowhere');
    // The quota holds the pod back whatever the node's GPUs (nodes other tests left without a
    // registered or reporting plugin fail for that first), in filter's words.
    const quota = explanation.placement?.failing.find((group) => group.reason === 'ResourceQuotaNotFit');
    expect(explanation.placement?.fitting.count).to.equal(0);
    expect(quota?.count).to.be.at.least(1);
    expect(explanation.placement?.failing.filter((group) => group.reason.startsWith('Card'))).to.deep.equal([]);
    expect(quota?.nodes.map((entry) => entry.detail)).to.satisfy(
      (details: string[]) => details.length > 0 && details.every((detail) => detail === reason),
    );
    expect(explanation.verdict).to.include('ResourceQuotaNotFit');
  });

  it('waits on a lock held by another bound-and-allocating pod: names the node, holder and its state', async () => {
    const staged = await stage(cleanups);
    const { cache, binder } = await extender(staged.core);
    const holder = await createGpuPod(staged, 'holder', 12_000);
    const waiter = await createGpuPod(staged, 'waiter', 12_000);
    await storeHas(cache, staged, holder);
    await storeHas(cache, staged, waiter);
    expect(await bind(binder, staged, holder)).to.deep.equal({});
    // The holder is now bound with bind-phase=allocating and holds the lock until its Allocate.
    const waiting = bind(binder, staged, waiter);
    cleanups.push(async () => {
      await setLock(staged.core, staged.node, null);
      await waiting;
    });
    await eventually(
      'the NodeLockWait event',
      async () => {
        const events = await staged.core.listNamespacedEvent({
          namespace: staged.namespace,
          fieldSelector: 'involvedObject.name=waiter',
        });
        return events.items.some((event) => event.reason === 'NodeLockWait')
          ? true
          : notYet(`waiter events: ${await describeEvents(staged.core, staged.namespace, 'waiter')}`);
      },
      10_000,
      100,
    );

    const explanation = await explainJson(staged.namespace, 'waiter');

    expect(explanation.situation).to.equal('waiting-for-lock');
    expect(explanation.verdict).to.match(
      new RegExp(
        `^waiting for the lock on ${staged.node} held by ${staged.namespace}/holder \\(bind-in-progress, \\d+s\\)$`,
      ),
    );
    expect(explanation.locks).to.have.length(1);
    expect(explanation.locks[0]).to.deep.include({
      node: staged.node,
      relation: 'waited-for',
      holder: { namespace: staged.namespace, name: 'holder' },
      state: 'held',
      reason: 'bind-in-progress',
      owner: { exists: true, phase: 'Pending', node: staged.node, bindPhase: 'allocating', deleting: false },
    });
    expect(explanation.placement?.fitting).to.deep.equal({ count: 1, nodes: [staged.node] });
    expect(explanation.placement?.lockedFitting).to.deep.equal([staged.node]);
    expect(explanation.events.items.at(-1)?.reason).to.equal('NodeLockWait');

    const text = await explain(staged.namespace, 'waiter', 'text');
    // Two runs of explain, so the lock's age may have moved on by a second between them.
    const ageless = (line: string | undefined) => line?.replace(/, \d+s\)$/, ', Ns)');
    expect(ageless(text.out[0])).to.equal(ageless(`Verdict:   ${explanation.verdict}`));
    expect(
      text.out.some(
        (line) =>
          line.startsWith(`  ${staged.node}: ${staged.namespace}/holder (bind-in-progress, `) &&
          line.includes("this pod's bind waits for it; holder Pending, bound to"),
      ),
    ).to.equal(true);
  });

  it("bound and allocating: the bind's GPUs, no container allocated yet, its own lock", async () => {
    const staged = await stage(cleanups);
    const { cache, binder } = await extender(staged.core);
    const pod = await createGpuPod(staged, 'bound', 12_000);
    await storeHas(cache, staged, pod);
    expect(await bind(binder, staged, pod)).to.deep.equal({});

    const explanation = await explainJson(staged.namespace, 'bound');

    expect(explanation.situation).to.equal('bound-allocating');
    expect(explanation.verdict).to.match(
      new RegExp(`^bound to ${staged.node}, allocating \\(0/1 containers allocated, lock held \\d+s\\)$`),
    );
    expect(explanation.pod.node).to.equal(staged.node);
    expect(explanation.placement).to.equal(null);
    expect(explanation.bind).to.deep.include({
      phase: 'allocating',
      vgpuNode: staged.node,
      progress: { done: 0, total: 1 },
    });
    expect(explanation.bind.allocated).to.deep.equal({
      containers: [{ container: 'main', gpus: [{ uuid: `GPU-${staged.node}-0`, memoryMiB: 12_000, cores: 30 }] }],
    });
    expect(explanation.locks.map((lock) => [lock.node, lock.relation, lock.state])).to.deep.equal([
      [staged.node, 'held-by-this-pod', 'held'],
    ]);
  });

  it('allocated: after the device plugin consumed to-allocate, set bind-phase=success and freed the lock', async () => {
    const staged = await stage(cleanups);
    const { cache, binder } = await extender(staged.core);
    const pod = await createGpuPod(staged, 'done', 12_000);
    await storeHas(cache, staged, pod);
    expect(await bind(binder, staged, pod)).to.deep.equal({});
    // What HAMi's device plugin writes after Allocate (hami-wire-contract §5), set directly.
    await staged.core.patchNamespacedPod(
      {
        name: 'done',
        namespace: staged.namespace,
        body: { metadata: { annotations: { [TO_ALLOCATE_ANNOTATION]: ';;', [BIND_PHASE_ANNOTATION]: 'success' } } },
      },
      mergePatch,
    );
    await setLock(staged.core, staged.node, null);

    const explanation = await explainJson(staged.namespace, 'done');

    expect(explanation.situation).to.equal('allocated');
    expect(explanation.verdict).to.equal(`allocated on ${staged.node}: GPU-${staged.node}-0 (12000 MiB, 30% cores)`);
    expect(explanation.bind.progress).to.deep.equal({ done: 1, total: 1 });
    expect(explanation.locks).to.deep.equal([]);

    const text = await explain(staged.namespace, 'done', 'text');
    expect(text.out[0]).to.equal(`Verdict:   ${explanation.verdict}`);
    expect(text.out).to.include(
      `Bind:      bind-phase success on ${staged.node} at ${explanation.bind.bindTime ?? ''}, 1/1 containers allocated`,
    );
  });

  it('an unknown pod: exit 1 and one line', async () => {
    const { namespace } = testCluster();
    const { code, out, err } = await explain(namespace, 'nobody-here', 'text');
    expect(code).to.equal(EXIT_FAILURE);
    expect(out).to.deep.equal([]);
    expect(err).to.deep.equal([`vgpu-warden: pod ${namespace}/nobody-here not found`]);
  });
});
