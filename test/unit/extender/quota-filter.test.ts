import type { V1Node, V1Pod, V1ResourceQuota } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterCache } from '../../../src/cluster/cluster-cache.js';
import { encodeAllocation } from '../../../src/devices/allocation-codec.js';
import { DEFAULT_REQUEST_DEFAULTS } from '../../../src/devices/requests.js';
import type { Binder } from '../../../src/extender/binder.js';
import { ExtenderService } from '../../../src/extender/extender-service.js';
import { simulatedGpuNode } from '../../../src/local/simulated-gpu-node.js';
import type { EventRecorder } from '../../../src/telemetry/events.js';
import { ScriptedSource } from '../../support/scripted-source.js';
import { ALLOCATED_ANNOTATION } from '../../../src/hami/wire.js';

const gpuPod = (name: string, memoryMiB: number, namespace = 'team-a') => ({
  metadata: { name, namespace, uid: `uid-${name}` },
  spec: {
    containers: [
      { name: 'c', resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': String(memoryMiB) } } },
    ],
  },
});

const boundPod = (name: string, memoryMiB: number, node: string, namespace = 'team-a'): V1Pod => ({
  metadata: {
    name,
    namespace,
    uid: `uid-${name}`,
    resourceVersion: '5',
    annotations: {
      'hami.io/vgpu-node': node,
      [ALLOCATED_ANNOTATION]: encodeAllocation([[{ uuid: `GPU-${node}-0`, type: 'NVIDIA', memoryMiB, cores: 0 }]]),
    },
  },
  spec: { nodeName: node, containers: [{ name: 'c' }] },
  status: { phase: 'Running' },
});

const quota = (name: string, hard: Record<string, string>, namespace = 'team-a'): V1ResourceQuota => ({
  metadata: { name, namespace, uid: `uid-q-${name}`, resourceVersion: '7' },
  spec: { hard },
});

describe('ExtenderService: namespace GPU quota at filter time', () => {
  let cache: ClusterCache | undefined;
  afterEach(async () => {
    await cache?.stop();
    cache = undefined;
  });

  async function build(
    options: { quotas?: V1ResourceQuota[]; pods?: V1Pod[]; quotaListFailures?: number; memoryFactor?: number } = {},
  ) {
    const nodes = new ScriptedSource<V1Node>();
    const pods = new ScriptedSource<V1Pod>();
    const quotas = new ScriptedSource<V1ResourceQuota>();
    nodes.items = ['n1', 'n2'].map((name) => simulatedGpuNode({ name, gpus: 1 }));
    pods.items = options.pods ?? [];
    quotas.items = options.quotas ?? [];
    quotas.listFailures = options.quotaListFailures ?? 0;
    const warnings: string[] = [];
    cache = new ClusterCache({
      sources: { nodes, pods, quotas },
      staleAfterMs: 50,
      quotaMemoryFactor: options.memoryFactor ?? 1,
      reflector: { initialBackoffMs: 5, maxBackoffMs: 10, jitter: 0 },
      log: (level, message) => {
        if (level === 'warn') warnings.push(message);
      },
    });
    const started = cache.start();
    if (options.quotaListFailures === undefined) await started;
    const messages: string[] = [];
    const service = new ExtenderService({
      cache,
      binder: {} as Binder,
      events: {
        record: (_ref: unknown, _type: string, reason: string, message: string) => {
          messages.push(`${reason}: ${message}`);
        },
      } as unknown as EventRecorder,
      defaults: {
        nodePolicy: 'binpack',
        gpuPolicy: 'spread',
        requestDefaults: { ...DEFAULT_REQUEST_DEFAULTS, memoryFactor: options.memoryFactor ?? 1 },
      },
      syncWaitMs: 20,
    });
    return { cache, service, quotas, pods, messages, warnings, started };
  }

  it('refuses a pod that would take its namespace over limits.nvidia.com/gpumem with an Error naming the quota (kube-scheduler retries it on its backoff)', async () => {
    const { service, messages } = await build({
      quotas: [quota('gpu-quota', { 'limits.nvidia.com/gpumem': '8k' })],
      pods: [boundPod('running', 6000, 'n1')],
    });
    const result = await service.filter({ pod: gpuPod('p', 4000), nodeNames: ['n1', 'n2'] });
    const reason =
      'ResourceQuotaNotFit (ResourceQuota team-a/gpu-quota: limits.nvidia.com/gpumem 6000 used + 4000 requested > 8000)';
    expect(result.Error).to.equal(reason);
    expect(result.NodeNames ?? []).to.deep.equal([]);
    expect(messages.at(-1)).to.equal(`FilteringFailed: ${reason}`);
    // Within the quota, and another namespace is not limited by it.
    expect((await service.filter({ pod: gpuPod('q', 2000), nodeNames: ['n1', 'n2'] })).NodeNames).to.deep.equal([
      'n1',
      'n2',
    ]);
    expect((await service.filter({ pod: gpuPod('r', 4000, 'team-b'), nodeNames: ['n2'] })).NodeNames).to.deep.equal([
      'n2',
    ]);
  });

  it("follows the quota and the namespace's pods as they change, despite the cached verdicts of a repeated pod shape", async () => {
    const {
      service,
      quotas,
      pods,
      cache: store,
    } = await build({ quotas: [quota('gpu-quota', { 'limits.nvidia.com/gpu': '1' })] });
    const first = await service.filter({ pod: gpuPod('a', 1000), nodeNames: ['n1', 'n2'] });
    expect(first.NodeNames).to.deep.equal(['n1', 'n2']);
    // A bind in flight (assumed) counts at once; the next pod of the same shape is refused.
    store.assumePod('uid-a', 'n1', new Map([['GPU-n1-0', { slots: 1, memoryMiB: 1000, cores: 0 }]]), 'team-a');
    expect((await service.filter({ pod: gpuPod('b', 1000), nodeNames: ['n1', 'n2'] })).Error).to.match(
      /^ResourceQuotaNotFit/,
    );
    // The quota is raised: the same shape fits again.
    quotas.emit('MODIFIED', quota('gpu-quota', { 'limits.nvidia.com/gpu': '2' }));
    expect((await service.filter({ pod: gpuPod('c', 1000), nodeNames: ['n2'] })).NodeNames).to.deep.equal(['n2']);
    quotas.emit('MODIFIED', quota('gpu-quota', { 'limits.nvidia.com/gpu': '1' }));
    expect((await service.filter({ pod: gpuPod('d', 1000), nodeNames: ['n2'] })).Error).to.match(
      /^ResourceQuotaNotFit/,
    );
    // The pod finishes: its share is free again.
    pods.emit('ADDED', boundPod('a', 1000, 'n1'));
    pods.emit('MODIFIED', { ...boundPod('a', 1000, 'n1'), status: { phase: 'Succeeded' } });
    store.forgetPod('uid-a');
    expect((await service.filter({ pod: gpuPod('e', 1000), nodeNames: ['n2'] })).NodeNames).to.deep.equal(['n2']);
    // The quota is deleted: nothing limits the namespace.
    quotas.emit('DELETED', quota('gpu-quota', { 'limits.nvidia.com/gpu': '1' }));
    store.assumePod('uid-x', 'n1', new Map([['GPU-n1-0', { slots: 1, memoryMiB: 1000, cores: 0 }]]), 'team-a');
    expect((await service.filter({ pod: gpuPod('f', 1000), nodeNames: ['n2'] })).NodeNames).to.deep.equal(['n2']);
  });

  it('enforces each of several quotas of a namespace and reports the tightest use per resource', async () => {
    const { service, cache: store } = await build({
      quotas: [
        quota('loose', { 'limits.nvidia.com/gpumem': '100000', 'limits.nvidia.com/gpucores': '200' }),
        quota('tight', { 'limits.nvidia.com/gpumem': '3000' }),
      ],
      pods: [boundPod('running', 1000, 'n1')],
    });
    const result = await service.filter({ pod: gpuPod('p', 2500), nodeNames: ['n2'] });
    expect(result.Error).to.equal(
      'ResourceQuotaNotFit (ResourceQuota team-a/tight: limits.nvidia.com/gpumem 1000 used + 2500 requested > 3000)',
    );
    expect(store.quotaUses()).to.have.deep.members([
      { namespace: 'team-a', resource: 'nvidia.com/gpumem', used: 1000, limit: 3000 },
      { namespace: 'team-a', resource: 'nvidia.com/gpucores', used: 0, limit: 200 },
    ]);
  });

  it("a PriorityClass-scoped quota limits only the pods of that class, against the use of that class's pods", async () => {
    const ofClass = <T extends { spec?: object }>(pod: T, priorityClassName: string): T => ({
      ...pod,
      spec: { ...pod.spec, priorityClassName },
    });
    const scoped: V1ResourceQuota = {
      ...quota('high-gpu', { 'limits.nvidia.com/gpumem': '8000' }),
      spec: {
        hard: { 'limits.nvidia.com/gpumem': '8000' },
        scopeSelector: { matchExpressions: [{ scopeName: 'PriorityClass', operator: 'In', values: ['high'] }] },
      },
    };
    const { service, cache: store } = await build({
      quotas: [scoped],
      pods: [ofClass(boundPod('high-1', 6000, 'n1'), 'high'), ofClass(boundPod('low-1', 6000, 'n2'), 'low')],
    });
    // Another class, or none: the quota does not count the pod.
    expect(
      (await service.filter({ pod: ofClass(gpuPod('low-2', 9000), 'low'), nodeNames: ['n1', 'n2'] })).NodeNames,
    ).to.deep.equal(['n1', 'n2']);
    expect((await service.filter({ pod: gpuPod('plain', 9000), nodeNames: ['n2'] })).NodeNames).to.deep.equal(['n2']);
    expect(store.quotaBudget('team-a', 'uid-low-2', ofClass(gpuPod('low-2', 9000), 'low'))).to.equal(undefined);
    // Its class: held to 8000 MiB beside the 6000 its class uses (the low pod's 6000 not counted).
    expect(
      (await service.filter({ pod: ofClass(gpuPod('high-2', 2000), 'high'), nodeNames: ['n2'] })).NodeNames,
    ).to.deep.equal(['n2']);
    const refused = await service.filter({ pod: ofClass(gpuPod('high-3', 4000), 'high'), nodeNames: ['n1', 'n2'] });
    expect(refused.Error).to.equal(
      'ResourceQuotaNotFit (ResourceQuota team-a/high-gpu: limits.nvidia.com/gpumem 6000 used + 4000 requested > 8000)',
    );
    // A bind in flight counts under the scopes of the pod it was assumed for; one assumed without
    // its pod counts everywhere.
    store.assumePod(
      'uid-low-3',
      'n2',
      new Map([['GPU-n2-0', { slots: 1, memoryMiB: 2000, cores: 0 }]]),
      'team-a',
      ofClass(gpuPod('low-3', 2000), 'low'),
    );
    expect(
      store.quotaBudget('team-a', 'uid-high-2', ofClass(gpuPod('high-2', 2000), 'high'))?.limits[0]?.used?.memoryMiB,
    ).to.equal(6000);
    store.assumePod('uid-x', 'n2', new Map([['GPU-n2-0', { slots: 1, memoryMiB: 1000, cores: 0 }]]), 'team-a');
    expect(
      store.quotaBudget('team-a', 'uid-high-2', ofClass(gpuPod('high-2', 2000), 'high'))?.limits[0]?.used?.memoryMiB,
    ).to.equal(7000);
    // The metrics report the scoped quota against its own pods' use.
    expect(store.quotaUses()).to.deep.equal([
      { namespace: 'team-a', resource: 'nvidia.com/gpumem', used: 7000, limit: 8000 },
    ]);
  });

  it("a share the pre-check cannot know (a percentage of a card) is checked per GPU: FailedNodes, as HAMi's Fit", async () => {
    const { service } = await build({ quotas: [quota('gpu-quota', { 'limits.nvidia.com/gpumem': '5000' })] });
    const pod = {
      ...gpuPod('p', 0),
      spec: {
        containers: [
          { name: 'c', resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem-percentage': '50' } } },
        ],
      },
    };
    const result = await service.filter({ pod, nodeNames: ['n1'] });
    expect(result.Error).to.equal('');
    expect(result.FailedNodes?.get('n1')).to.match(
      new RegExp(
        /^1\/1 ResourceQuotaNotFit \(ResourceQuota team-a\/gpu-quota: /.source +
          /limits\.nvidia\.com\/gpumem 0 used \+ \d+ requested > 5000\)$/.source,
      ),
    );
  });

  it('scales the memory limit by MEMORY_FACTOR, as the requests are scaled', async () => {
    const { service } = await build({
      quotas: [quota('gpu-quota', { 'limits.nvidia.com/gpumem': '1000' })],
      memoryFactor: 4,
    });
    // gpumem 1000 with factor 4 asks for 4000 MiB; the limit 1000 means 4000 MiB too.
    expect((await service.filter({ pod: gpuPod('p', 1000), nodeNames: ['n1'] })).NodeNames).to.deep.equal(['n1']);
    expect((await service.filter({ pod: gpuPod('q', 1001), nodeNames: ['n1'] })).Error).to.contain(
      '0 used + 4004 requested > 4000',
    );
  });

  it('places nothing until the quotas are listed, and warns once about a value it cannot read', async () => {
    const {
      service,
      cache: store,
      warnings,
      started,
    } = await build({ quotaListFailures: 3, quotas: [quota('bad', { 'limits.nvidia.com/gpu': '1.5' })] });
    const early = await service.filter({ pod: gpuPod('p', 1000), nodeNames: ['n1'] });
    expect(early.Error).to.match(/not synced/);
    await started;
    expect(store.synced).to.equal(true);
    expect((await service.filter({ pod: gpuPod('p', 1000), nodeNames: ['n1'] })).NodeNames).to.deep.equal(['n1']);
    expect(warnings.filter((line) => line.includes('limits.nvidia.com/gpu 1.5 is not a whole number'))).to.have.length(
      1,
    );
  });
});
