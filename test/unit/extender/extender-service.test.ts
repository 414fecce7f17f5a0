import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterCache } from '../../../src/cluster/cluster-cache.js';
import { DEFAULT_REQUEST_DEFAULTS } from '../../../src/devices/requests.js';
import type { Binder } from '../../../src/extender/binder.js';
import { ExtenderService, filteringSucceedMessage, RememberedLookup } from '../../../src/extender/extender-service.js';
import { trackPendingBursts } from '../../../src/extender/pending-bursts.js';
import type { NodePolicy } from '../../../src/devices/score.js';
import type { RefusalRequeue } from '../../../src/extender/refusal-requeue.js';
import { simulatedGpuNode } from '../../../src/local/simulated-gpu-node.js';
import type { EventRecorder } from '../../../src/telemetry/events.js';
import { ScriptedSource } from '../../support/scripted-source.js';

const GPU_MIB = 24576;

const gpuPod = (name: string, memoryMiB: number, extra: Record<string, string> = {}) => ({
  metadata: { name, namespace: 'ns', uid: `uid-${name}` },
  spec: {
    containers: [
      { name: 'c', resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': String(memoryMiB), ...extra } } },
    ],
  },
});

const locked = (name: string, lock: string): V1Node => {
  const base = simulatedGpuNode({ name, gpus: 1 });
  return {
    ...base,
    metadata: {
      ...base.metadata,
      resourceVersion: '2',
      annotations: { ...base.metadata?.annotations, 'hami.io/mutex.lock': lock },
    },
  };
};

describe('ExtenderService (filter and prioritize from the state store)', () => {
  let cache: ClusterCache | undefined;
  const stops: (() => void)[] = [];
  afterEach(async () => {
    for (const stop of stops.splice(0)) stop();
    await cache?.stop();
    cache = undefined;
  });

  async function build(
    options: {
      start?: boolean;
      memoryFactor?: number;
      nodes?: V1Node[];
      unseenNodeWaitMs?: number;
      refusals?: RefusalRequeue;
      nodePolicy?: NodePolicy;
      clock?: () => number;
      successEvents?: boolean;
    } = {},
  ) {
    const nodes = new ScriptedSource<V1Node>();
    const pods = new ScriptedSource<V1Pod>();
    nodes.items = options.nodes ?? ['n1', 'n2', 'n3'].map((name) => simulatedGpuNode({ name, gpus: 1 }));
    cache = new ClusterCache({
      sources: { nodes, pods },
      staleAfterMs: 50,
      reflector: { initialBackoffMs: 5, maxBackoffMs: 10, jitter: 0 },
    });
    if (options.start !== false) await cache.start();
    const events: string[] = [];
    const messages: string[] = [];
    const defaults = {
      nodePolicy: options.nodePolicy ?? 'binpack',
      gpuPolicy: 'spread',
      requestDefaults: { ...DEFAULT_REQUEST_DEFAULTS, memoryFactor: options.memoryFactor ?? 1 },
    } as const;
    const pending = trackPendingBursts(cache, defaults);
    stops.push(pending.stop);
    const service = new ExtenderService({
      cache,
      binder: {} as Binder,
      events: {
        record: (_ref: unknown, _type: string, reason: string, message: string) => {
          events.push(reason);
          messages.push(message);
        },
      } as unknown as EventRecorder,
      defaults,
      syncWaitMs: 20,
      unseenNodeWaitMs: options.unseenNodeWaitMs ?? 20,
      ...(options.refusals === undefined ? {} : { refusals: options.refusals }),
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(options.successEvents === undefined ? {} : { successEvents: options.successEvents }),
      pending: pending.bursts,
    });
    return { nodes, pods, cache, service, events, messages, bursts: pending.bursts };
  }

  it('passes nodes where the share fits and names why the others fail', async () => {
    const { cache, service } = await build();
    cache.assumePod('other', 'n2', new Map([['GPU-n2-0', { slots: 1, memoryMiB: 20_000, cores: 0 }]]));
    const result = await service.filter({ pod: gpuPod('p', 8000), nodeNames: ['n1', 'n2', 'n3'] });
    expect(result.Error).to.equal('');
    expect(result.NodeNames).to.deep.equal(['n1', 'n3']);
    expect(result.FailedNodes?.get('n2')).to.match(/CardInsufficientMemory/);
  });

  it('answers an Error, never a pass-through, for an unreadable GPU share', async () => {
    const { service } = await build();
    const result = await service.filter({ pod: gpuPod('p', 1, { 'nvidia.com/gpumem': '1.5' }), nodeNames: ['n1'] });
    expect(result.Error).to.match(/unreadable GPU request/);
    expect(result.NodeNames ?? []).to.deep.equal([]);
  });

  it('answers an Error while the store has not synced', async () => {
    const { service } = await build({ start: false });
    const result = await service.filter({ pod: gpuPod('p', 1000), nodeNames: ['n1'] });
    expect(result.Error).to.match(/not synced/);
  });

  it("prioritize scores from filter's verdicts what a fresh fit would score, and follows node changes", async () => {
    const { cache, service } = await build();
    cache.assumePod('a', 'n1', new Map([['GPU-n1-0', { slots: 1, memoryMiB: 12_000, cores: 0 }]]));
    const pod = gpuPod('p', 4000);
    await service.filter({ pod, nodeNames: ['n1', 'n2'] });
    const fromFilter = await service.prioritize({ pod, nodeNames: ['n1', 'n2'] });
    // binpack: the node already half used scores higher than the empty one.
    expect(fromFilter[0]?.Score).to.be.greaterThan(fromFilter[1]?.Score ?? 0);
    const fresh = await service.prioritize({
      pod: { ...pod, metadata: { ...pod.metadata, uid: 'never-filtered' } },
      nodeNames: ['n1', 'n2'],
    });
    expect(fromFilter).to.deep.equal(fresh);

    // n1 fills up after filter: prioritize must not reuse the old verdict for it.
    cache.assumePod('b', 'n1', new Map([['GPU-n1-0', { slots: 1, memoryMiB: GPU_MIB - 12_000, cores: 0 }]]));
    const after = await service.prioritize({ pod, nodeNames: ['n1', 'n2'] });
    expect(after[0]).to.deep.equal({ Host: 'n1', Score: 0 });
  });

  it('replicas of one shape are served from the per-node cache, which a node change invalidates', async () => {
    const { cache, service } = await build();
    for (const name of ['r1', 'r2', 'r3'])
      expect((await service.filter({ pod: gpuPod(name, 20_000), nodeNames: ['n1', 'n2'] })).NodeNames).to.deep.equal([
        'n1',
        'n2',
      ]);
    cache.assumePod('big', 'n2', new Map([['GPU-n2-0', { slots: 1, memoryMiB: 10_000, cores: 0 }]]));
    const result = await service.filter({ pod: gpuPod('r4', 20_000), nodeNames: ['n1', 'n2'] });
    expect(result.NodeNames).to.deep.equal(['n1']);
    expect(result.FailedNodes?.get('n2')).to.match(/CardInsufficientMemory/);
  });

  it("spread: names one node (10), a free lock first (the holder's own counts as free), and scores a node whose lock another pod holds one point below the same node free", async () => {
    const { nodes, service } = await build({ nodePolicy: 'spread' });
    nodes.emit('MODIFIED', locked('n1', '2026-01-01T00:00:00Z,ns,someone-else'));
    nodes.emit('MODIFIED', locked('n2', '2026-01-01T00:00:00Z,ns,p'));
    const pod = gpuPod('p', 1000);
    await service.filter({ pod, nodeNames: ['n1', 'n2', 'n3'] });
    const scores = await service.prioritize({ pod, nodeNames: ['n1', 'n2', 'n3'] });
    // The three nodes are alike but for their locks: the target is n2 (free to this pod, name order).
    expect(scores[1]).to.deep.equal({ Host: 'n2', Score: 10 });
    const free = scores[2]?.Score ?? 0;
    expect(free).to.be.within(1, 9);
    expect(scores[0]).to.deep.equal({ Host: 'n1', Score: free - 1 });
  });

  describe('filter passes at most the 100 best-scored of many fitting nodes (kube-scheduler scores every name it passes)', () => {
    const many = Array.from({ length: 150 }, (_, index) => `m${String(index).padStart(3, '0')}`);

    it('binpack: keeps the plan, the fullest nodes, in kube-scheduler order; prioritize then names the same plan', async () => {
      const { cache, service } = await build({ nodes: many.map((name) => simulatedGpuNode({ name, gpus: 1 })) });
      cache.assumePod('older', 'm149', new Map([['GPU-m149-0', { slots: 1, memoryMiB: 2000, cores: 0 }]]));
      const pod = gpuPod('p', 2000);
      const result = await service.filter({ pod, nodeNames: many });
      expect(result.NodeNames).to.have.length(100);
      expect(result.NodeNames).to.include('m149');
      expect(result.NodeNames).to.deep.equal(many.filter((name) => result.NodeNames?.includes(name)));
      expect(result.FailedNodes?.size ?? 0).to.equal(0);
      const scores = await service.prioritize({ pod, nodeNames: result.NodeNames ?? [] });
      expect(scores.filter(({ Score }) => Score === 10).map(({ Host }) => Host)).to.deep.equal(['m149']);
    });

    it('spread: keeps the one target among them, and passes every node when 100 or fewer fit', async () => {
      const { cache, service } = await build({
        nodePolicy: 'spread',
        nodes: many.map((name) => simulatedGpuNode({ name, gpus: 1 })),
      });
      for (const name of many.slice(0, 149))
        cache.assumePod(`on-${name}`, name, new Map([[`GPU-${name}-0`, { slots: 1, memoryMiB: 2000, cores: 0 }]]));
      const pod = gpuPod('p', 2000);
      const result = await service.filter({ pod, nodeNames: many });
      expect(result.NodeNames).to.have.length(100).and.to.include('m149');
      const scores = await service.prioritize({ pod, nodeNames: result.NodeNames ?? [] });
      expect(scores.filter(({ Score }) => Score === 10).map(({ Host }) => Host)).to.deep.equal(['m149']);
      const few = await service.filter({ pod: gpuPod('q', 2000), nodeNames: many.slice(0, 100) });
      expect(few.NodeNames).to.deep.equal(many.slice(0, 100));
    });
  });

  describe('spread names one node per pod of a burst', () => {
    const names = ['n1', 'n2', 'n3', 'n4'];
    const targetOf = (scores: { Host: string; Score: number }[]) =>
      scores.filter(({ Score }) => Score === 10).map(({ Host }) => Host);

    it('gives the pods of a burst different nodes while their binds are in flight, and a pod asked again its own', async () => {
      const { service } = await build({
        nodePolicy: 'spread',
        nodes: names.map((name) => simulatedGpuNode({ name, gpus: 1 })),
      });
      const targets: string[][] = [];
      for (const name of ['a', 'b', 'c']) {
        const pod = gpuPod(name, 1000);
        await service.filter({ pod, nodeNames: names });
        targets.push(targetOf(await service.prioritize({ pod, nodeNames: names })));
      }
      expect(targets).to.deep.equal([['n1'], ['n2'], ['n3']]);
      expect(targetOf(await service.prioritize({ pod: gpuPod('b', 1000), nodeNames: names }))).to.deep.equal(['n2']);
    });

    it('prefers the least utilised node, even one offered to another pod, over a fuller one', async () => {
      const { cache, service } = await build({
        nodePolicy: 'spread',
        nodes: ['n1', 'n2'].map((name) => simulatedGpuNode({ name, gpus: 1 })),
      });
      cache.assumePod('other', 'n2', new Map([['GPU-n2-0', { slots: 1, memoryMiB: 4000, cores: 0 }]]));
      expect(targetOf(await service.prioritize({ pod: gpuPod('a', 1000), nodeNames: ['n1', 'n2'] }))).to.deep.equal([
        'n1',
      ]);
      expect(targetOf(await service.prioritize({ pod: gpuPod('b', 1000), nodeNames: ['n1', 'n2'] }))).to.deep.equal([
        'n1',
      ]);
    });
  });

  describe('binpack packs a burst', () => {
    const pendingPod = (name: string, memoryMiB: number) => ({
      ...gpuPod(name, memoryMiB),
      status: { phase: 'Pending' },
    });
    const fourNodes = () => ['n1', 'n2', 'n3', 'n4'].map((name) => simulatedGpuNode({ name, gpus: 1 }));
    const scoresOf = (priorities: { Host: string; Score: number }[]) =>
      Object.fromEntries(priorities.map(({ Host, Score }) => [Host, Score]));

    it('scores 10 on the fewest nodes, fullest first, whose room holds the pods still pending, and less elsewhere', async () => {
      const { pods, service, bursts } = await build({ nodes: fourNodes() });
      // 10 slots per GPU and 2000 MiB each: 10 pods per node, so 15 pending pods need 2 nodes.
      for (let index = 0; index < 15; index++) pods.emit('ADDED', pendingPod(`r${index}`, 2000));
      expect(bursts.size).to.equal(15);
      cache!.assumePod('older', 'n3', new Map([['GPU-n3-0', { slots: 1, memoryMiB: 2000, cores: 0 }]]));
      const pod = pendingPod('r0', 2000);
      const names = ['n1', 'n2', 'n3', 'n4'];
      await service.filter({ pod, nodeNames: names });
      const scores = scoresOf(await service.prioritize({ pod, nodeNames: names }));
      // n3 is fullest; n3 holds 9 more, so one more node (n1 by name among the empty ones).
      expect(scores).to.deep.equal({ n1: 10, n2: scores.n2, n3: 10, n4: scores.n4 });
      expect(scores.n2).to.be.within(1, 8);
      expect(scores.n4).to.equal(scores.n2);
    });

    it('a lone pod goes to the fullest node that fits; the plan shrinks as the burst binds', async () => {
      const { pods, service } = await build({ nodes: fourNodes() });
      for (let index = 0; index < 15; index++) pods.emit('ADDED', pendingPod(`r${index}`, 2000));
      // 14 of them bound on n1 and n2 (their usage counted, no longer pending): one left.
      for (let index = 1; index < 15; index++) {
        const node = index < 10 ? 'n1' : 'n2';
        pods.emit('MODIFIED', {
          ...pendingPod(`r${index}`, 2000),
          spec: { ...gpuPod(`r${index}`, 2000).spec, nodeName: node },
        });
        cache!.assumePod(`uid-r${index}`, node, new Map([[`GPU-${node}-0`, { slots: 1, memoryMiB: 2000, cores: 0 }]]));
      }
      const pod = pendingPod('r0', 2000);
      const scores = scoresOf(await service.prioritize({ pod, nodeNames: ['n1', 'n2', 'n3', 'n4'] }));
      expect(scores.n1).to.equal(10);
      for (const node of ['n2', 'n3', 'n4'] as const) expect(scores[node]).to.be.within(1, 8);
    });

    it('a plan node whose lock another pod holds scores 9: above every node off the plan, below the free plan nodes', async () => {
      const { nodes, pods, service } = await build({ nodes: fourNodes() });
      for (let index = 0; index < 15; index++) pods.emit('ADDED', pendingPod(`r${index}`, 2000));
      nodes.emit('MODIFIED', locked('n1', '2026-01-01T00:00:00Z,ns,someone-else'));
      nodes.emit('MODIFIED', locked('n3', '2026-01-01T00:00:00Z,ns,another'));
      const pod = pendingPod('r0', 2000);
      const scores = scoresOf(await service.prioritize({ pod, nodeNames: ['n1', 'n2', 'n3', 'n4'] }));
      // Plan: n1 and n2 (name order among empty nodes); n3 is locked off the plan.
      expect(scores).to.deep.equal({ n1: 9, n2: 10, n3: 0, n4: scores.n4 });
      expect(scores.n4).to.be.within(1, 8);
    });

    it('leaves out of the plan a node whose lock another pod has held for more than 5 s, and takes the next one', async () => {
      // The store dates a lock by the real clock when it first sees it; the service reads it 5 s later.
      const { nodes, pods, service } = await build({ nodes: fourNodes(), clock: () => Date.now() + 5_001 });
      for (let index = 0; index < 5; index++) pods.emit('ADDED', pendingPod(`r${index}`, 2000));
      nodes.emit('MODIFIED', locked('n1', '2026-01-01T00:00:00Z,ns,stuck'));
      const pod = pendingPod('r0', 2000);
      const scores = scoresOf(await service.prioritize({ pod, nodeNames: ['n1', 'n2', 'n3', 'n4'] }));
      expect(scores).to.deep.equal({ n1: 0, n2: 10, n3: scores.n3, n4: scores.n3 });
      expect(scores.n3).to.be.within(1, 8);
    });

    it("the holder's own node stays a free plan node", async () => {
      const { nodes, service } = await build({ nodes: fourNodes() });
      nodes.emit('MODIFIED', locked('n1', '2026-01-01T00:00:00Z,ns,p'));
      const pod = gpuPod('p', 2000);
      const scores = scoresOf(await service.prioritize({ pod, nodeNames: ['n1', 'n2'] }));
      expect(scores.n1).to.equal(10);
    });
  });

  it('records no Event when some node fits by default (SUCCESS_EVENTS=false)', async () => {
    const { service, events } = await build();
    const result = await service.filter({ pod: gpuPod('p', 8000), nodeNames: ['n1', 'n2', 'n3'] });
    expect(result.NodeNames).to.have.length(3);
    expect(events).to.deep.equal([]);
  });

  it("with successEvents records HAMi's FilteringSucceed (and no FilteringFailed) when some node fits, counting fit and not-fit nodes", async () => {
    const { cache, service, events, messages } = await build({ successEvents: true });
    cache.assumePod('other', 'n2', new Map([['GPU-n2-0', { slots: 1, memoryMiB: 20_000, cores: 0 }]]));
    await service.filter({ pod: gpuPod('p', 8000), nodeNames: ['n1', 'n2', 'n3'] });
    expect(events).to.deep.equal(['FilteringSucceed']);
    expect(messages).to.deep.equal(['find fit nodes, 1 nodes not fit, 2 nodes fit(n1,n3)']);
  });

  it('names at most 10 nodes in a FilteringSucceed message and counts the rest', () => {
    const passed = Array.from({ length: 1000 }, (_, i) => `node-${i}`);
    const message = filteringSucceedMessage(passed, 5);
    expect(message).to.equal(
      `find fit nodes, 5 nodes not fit, 1000 nodes fit(${passed.slice(0, 10).join(',')},+990 more)`,
    );
  });

  it('records FilteringFailed when no node fits', async () => {
    const { service, events } = await build();
    const result = await service.filter({ pod: gpuPod('huge', GPU_MIB + 1), nodeNames: ['n1', 'n2'] });
    expect(result.NodeNames).to.deep.equal([]);
    expect(events).to.deep.equal(['FilteringFailed']);
  });

  // HAMi drops these requests and places the pod as if it asked for no GPU: every node passes.
  const unreadable: [string, Record<string, string>, number][] = [
    ['a count that is not a quantity', { 'nvidia.com/gpu': 'abc' }, 1],
    ['a negative gpumem', { 'nvidia.com/gpumem': '-1' }, 1],
    ['a gpumem beyond int32', { 'nvidia.com/gpumem': '3Gi' }, 1],
    ['a gpumem beyond int32 once multiplied by memoryFactor', { 'nvidia.com/gpumem': '1073741824' }, 2],
    ['cores above 100', { 'nvidia.com/gpucores': '101' }, 1],
  ];
  for (const [title, extra, memoryFactor] of unreadable) {
    it(`answers an Error for ${title}, naming container and resource, and passes no node`, async () => {
      const { service } = await build({ memoryFactor });
      const result = await service.filter({ pod: gpuPod('p', 1000, extra), nodeNames: ['n1', 'n2'] });
      expect(result.NodeNames).to.equal(null);
      expect(result.Error).to.match(
        /^unreadable GPU request: invalid nvidia\.com\/gpu(mem|cores)? value ".*" in container c: /,
      );
    });
  }

  // How fast is bench:filter's business (a timed assertion fails on a loaded machine); this checks
  // the answer and that the event loop is yielded to while the names are fitted.
  it('answers 100,000 unknown node names without holding the event loop, with one short FilteringFailed line', async () => {
    const { service, events, messages } = await build();
    const nodeNames = [...Array.from({ length: 100_000 }, (_, index) => `unknown-${index}`), 'n1'];
    let otherWorkRan = false;
    // Queued before the filter starts: it runs before the filter ends only if the filter yields.
    setImmediate(() => {
      otherWorkRan = true;
    });
    const result = await service.filter({ pod: gpuPod('huge', GPU_MIB + 1), nodeNames });
    expect(otherWorkRan, 'the loop was yielded to while the nodes were fitted').to.equal(true);
    // Names the store has never seen, and nowhere to go: an Error, retried on kube-scheduler's backoff.
    expect(result.NodeNames).to.equal(null);
    expect(result.Error).to.equal(
      "vgpu-warden has not seen 100000 nodes (unknown-0, unknown-1, unknown-2, …) yet (its node watch is behind kube-scheduler's); retry: " +
        '100001 nodes do not meet: 100000 nodes node unregistered (unknown-0, unknown-1, unknown-10, …); 1 node CardInsufficientMemory (n1)',
    );
    expect(events).to.deep.equal(['FilteringFailed']);
    expect(messages).to.deep.equal([result.Error]);
    expect(
      (await service.prioritize({ pod: gpuPod('huge', GPU_MIB + 1), nodeNames })).every((entry) => entry.Score === 0),
    ).to.equal(true);
  });

  it('takes node names that are also Object.prototype keys, and counts a repeated name once', async () => {
    const { service } = await build();
    const result = await service.filter({
      pod: gpuPod('big', GPU_MIB + 1),
      nodeNames: ['constructor', '__proto__', 'toString', 'n1', 'n1'],
    });
    expect(result.Error).to.equal(
      "vgpu-warden has not seen 3 nodes (constructor, __proto__, toString) yet (its node watch is behind kube-scheduler's); retry: " +
        '5 nodes do not meet: 3 nodes node unregistered (__proto__, constructor, toString); 1 node CardInsufficientMemory (n1)',
    );
    const fits = await service.filter({
      pod: gpuPod('small', 1000),
      nodeNames: ['constructor', '__proto__', 'toString', 'n1'],
    });
    expect(fits.NodeNames).to.deep.equal(['n1']);
    expect([...(fits.FailedNodes?.keys() ?? [])]).to.deep.equal(['constructor', '__proto__', 'toString']);
    expect(fits.FailedNodes?.get('__proto__')).to.equal('node unregistered');
  });

  // kube-scheduler's node informer and ours race: a node it names may not be in the store yet.
  it('waits for a node the store has not seen yet when no other node fits, and places the pod there once it arrives', async () => {
    const { nodes, service } = await build({ unseenNodeWaitMs: 60_000 });
    const answer = service.filter({ pod: gpuPod('p', 8000), nodeNames: ['n1-full', 'new-node'] });
    setTimeout(() => {
      nodes.emit('ADDED', simulatedGpuNode({ name: 'new-node', gpus: 1 }));
    }, 10);
    const result = await answer;
    expect(result.NodeNames).to.deep.equal(['new-node']);
    expect(result.FailedNodes?.get('n1-full')).to.equal('node unregistered');
  });

  it('does not wait for unseen nodes when a known node fits', async () => {
    const { service } = await build({ unseenNodeWaitMs: 60_000 });
    const result = await service.filter({ pod: gpuPod('p', 8000), nodeNames: ['n1', 'not-yet'] });
    expect(result.NodeNames).to.deep.equal(['n1']);
  });

  it('answers an Error naming the unseen node once the wait is over, so kube-scheduler retries on its backoff', async () => {
    const { service, events } = await build({ unseenNodeWaitMs: 5 });
    const result = await service.filter({ pod: gpuPod('huge', GPU_MIB + 1), nodeNames: ['n1', 'late'] });
    expect(result.Error).to.match(
      new RegExp(
        /^vgpu-warden has not seen node late yet \(its node watch is behind kube-scheduler's\); /.source +
          /retry: 2 nodes do not meet: /.source,
      ),
    );
    expect(events).to.deep.equal(['FilteringFailed']);
  });

  it('hands a pod refused on every known node to the requeue watch, with the generation each node was judged at', async () => {
    const noted: { uid: string; nodes: [string, number | undefined][] }[] = [];
    const forgotten: string[] = [];
    const refusals = {
      noteRefusal: (pod: { uid: string }, nodes: Iterable<[string, number | undefined]>) => {
        noted.push({ uid: pod.uid, nodes: [...nodes] });
      },
      forget: (uid: string) => {
        forgotten.push(uid);
      },
    } as unknown as RefusalRequeue;
    const { cache, service } = await build({ refusals });
    const result = await service.filter({ pod: gpuPod('huge', GPU_MIB + 1), nodeNames: ['n1', 'n2'] });
    expect(result.NodeNames).to.deep.equal([]);
    expect(noted).to.deep.equal([
      {
        uid: 'uid-huge',
        nodes: [
          ['n1', cache.nodeGeneration('n1')],
          ['n2', cache.nodeGeneration('n2')],
        ],
      },
    ]);
    await service.filter({ pod: gpuPod('huge', 8000), nodeNames: ['n1'] });
    expect(forgotten).to.deep.equal(['uid-huge']);
  });

  it('checks 256 KiB placement annotations against 2000 nodes x 4 GPUs in linear time', async () => {
    const names = Array.from({ length: 2000 }, (_, index) => `g${index}`);
    const { service } = await build({ nodes: names.map((name) => simulatedGpuNode({ name, gpus: 4 })) });
    const many = (prefix: string) => Array.from({ length: 20_000 }, (_, index) => `${prefix}-${index}`).join(',');
    const pod = gpuPod('picky', 1000);
    const annotated = {
      ...pod,
      metadata: {
        ...pod.metadata,
        annotations: {
          'nvidia.com/use-gputype': many('NO-SUCH-MODEL'),
          'nvidia.com/nouse-gpuuuid': many('GPU-none'),
          'nvidia.com/vgpu-mode': `${'x'.repeat(250_000)}hami-core`,
        },
      },
    };
    const started = performance.now();
    const result = await service.filter({ pod: annotated, nodeNames: names });
    // 8000 GPUs × 20,000 types was 160 million substring checks; now one check per GPU model.
    expect(performance.now() - started).to.be.below(2000);
    expect(result.NodeNames).to.deep.equal([]);
    expect(result.FailedNodes?.get('g0')).to.equal('4/4 CardTypeMismatch');
  });

  describe('GPU policies (issue 16: nothing HAMi does is silently dropped)', () => {
    const withAnnotations = (pod: ReturnType<typeof gpuPod>, annotations: Record<string, string>, count = '1') => ({
      ...pod,
      metadata: { ...pod.metadata, annotations },
      spec: {
        containers: [
          {
            name: 'c',
            resources: { limits: { ...pod.spec.containers[0]?.resources.limits, 'nvidia.com/gpu': count } },
          },
        ],
      },
    });

    const refused: [Record<string, string>, RegExp][] = [
      [
        { 'hami.io/gpu-scheduler-policy': 'fastest' },
        /^unsupported hami\.io\/gpu-scheduler-policy "fastest": unknown policy "fastest"/,
      ],
      [{ 'hami.io/gpu-scheduler-policy': 'binpack,Mutex' }, /unknown policy "Mutex"/],
      [{ 'hami.io/node-scheduler-policy': 'random' }, /^unsupported hami\.io\/node-scheduler-policy "random"/],
      [
        { 'nvidia.com/vgpu-mode': 'mig' },
        /^unsupported nvidia\.com\/vgpu-mode "mig": vgpu-warden does not place MIG instances/,
      ],
      [{ 'nvidia.com/numa-bind': 'yes' }, /^invalid nvidia\.com\/numa-bind "yes"/],
      [{ 'hami.io/device-scoring-weights': 'slot=1' }, /^invalid hami\.io\/device-scoring-weights/],
    ];
    for (const [annotations, error] of refused) {
      it(`answers an Error naming ${JSON.stringify(annotations)}, with a FilteringFailed event, and prioritize scores 0`, async () => {
        const { service, events, messages } = await build();
        const pod = withAnnotations(gpuPod('p', 1000), annotations);
        const result = await service.filter({ pod, nodeNames: ['n1', 'n2'] });
        expect(result.Error).to.match(error);
        expect(result.NodeNames).to.equal(null);
        expect(events).to.deep.equal(['FilteringFailed']);
        expect(messages[0]).to.equal(result.Error);
        expect((await service.prioritize({ pod, nodeNames: ['n1'] }))[0]?.Score).to.equal(0);
      });
    }

    it('mutex: passes only nodes with an idle GPU, and names ExclusiveDeviceAllocateConflict elsewhere', async () => {
      const { cache, service } = await build();
      cache.assumePod('other', 'n1', new Map([['GPU-n1-0', { slots: 1, memoryMiB: 1000, cores: 0 }]]));
      const plain = await service.filter({ pod: gpuPod('p', 1000), nodeNames: ['n1', 'n2'] });
      expect(plain.NodeNames).to.deep.equal(['n1', 'n2']);
      const result = await service.filter({
        pod: withAnnotations(gpuPod('q', 1000), { 'hami.io/gpu-scheduler-policy': 'mutex' }),
        nodeNames: ['n1', 'n2'],
      });
      expect(result.NodeNames).to.deep.equal(['n2']);
      expect(result.FailedNodes?.get('n1')).to.equal('1/1 ExclusiveDeviceAllocateConflict');
    });

    it('numa-bind: passes only nodes where one NUMA node holds the container, NumaNotFit elsewhere', async () => {
      const { service } = await build({
        nodes: [simulatedGpuNode({ name: 'split', gpus: 2, numaNodes: 2 }), simulatedGpuNode({ name: 'one', gpus: 2 })],
      });
      const pod = withAnnotations(gpuPod('p', 1000), { 'nvidia.com/numa-bind': 'true' }, '2');
      const result = await service.filter({ pod, nodeNames: ['split', 'one'] });
      expect(result.NodeNames).to.deep.equal(['one']);
      expect(result.FailedNodes?.get('split')).to.equal('2/2 NumaNotFit');
    });

    it('topology-aware: fails a node without link scores with a reason saying so, passes one with them', async () => {
      const { service, messages } = await build({
        nodes: [
          simulatedGpuNode({ name: 'linked', gpus: 2, linkScore: () => 100 }),
          simulatedGpuNode({ name: 'unknown', gpus: 2 }),
        ],
      });
      const pod = withAnnotations(gpuPod('p', 1000), { 'hami.io/gpu-scheduler-policy': 'topology-aware' }, '2');
      const result = await service.filter({ pod, nodeNames: ['linked', 'unknown'] });
      expect(result.NodeNames).to.deep.equal(['linked']);
      expect(result.FailedNodes?.get('unknown')).to.match(
        /^NodeTopologyUnknown: topology-aware needs the node's hami\.io\/node-nvidia-score/,
      );
      const none = await service.filter({ pod, nodeNames: ['unknown'] });
      expect(none.NodeNames).to.deep.equal([]);
      expect(messages.at(-1)).to.match(/1 node NodeTopologyUnknown: topology-aware needs .* \(unknown\)$/);
    });
  });
});

describe("RememberedLookup (where prioritize's names sit in the names filter saw)", () => {
  it("finds names sent in filter's order, skipping the ones filter refused", () => {
    const lookup = new RememberedLookup({ names: ['a', 'b', 'c', 'd', 'e'] });
    expect(['b', 'd', 'e'].map((name) => lookup.indexOf(name))).to.deep.equal([1, 3, 4]);
  });

  it('finds names out of that order, repeated or unknown, as a map would', () => {
    const names = ['a', 'b', 'c', 'b'];
    const lookup = new RememberedLookup({ names });
    const asked = ['c', 'a', 'zz', 'b', 'c', 'b'];
    expect(asked.map((name) => lookup.indexOf(name))).to.deep.equal(asked.map((name) => names.indexOf(name)));
  });

  it('answers -1 for every name when filter saw none', () => {
    const lookup = new RememberedLookup({ names: [] });
    expect([lookup.indexOf('a'), lookup.indexOf('a')]).to.deep.equal([-1, -1]);
  });
});
