import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterCache } from '../../../src/cluster/cluster-cache.js';
import { DEFAULT_REQUEST_DEFAULTS } from '../../../src/devices/requests.js';
import { evaluateNode, POD_UNSUPPORTED, viewPod } from '../../../src/extender/gpu-placement.js';
import { simulatedGpuNode } from '../../../src/local/simulated-gpu-node.js';
import { ScriptedSource } from '../../support/scripted-source.js';

/** The one fit filter, prioritize and bind all call: a policy refusal holds for bind too. */
describe('gpu-placement: policies in the shared fit', () => {
  const defaults = {
    nodePolicy: 'binpack' as const,
    gpuPolicy: 'spread' as const,
    requestDefaults: DEFAULT_REQUEST_DEFAULTS,
  };
  const pod = (annotations: Record<string, string>, gpus = '1') => ({
    metadata: { name: 'p', namespace: 'ns', uid: 'uid-p', annotations },
    spec: {
      containers: [{ name: 'c', resources: { limits: { 'nvidia.com/gpu': gpus, 'nvidia.com/gpumem': '1000' } } }],
    },
  });
  let cache: ClusterCache | undefined;
  afterEach(async () => {
    await cache?.stop();
    cache = undefined;
  });

  async function store(nodes: V1Node[]): Promise<ClusterCache> {
    const nodeSource = new ScriptedSource<V1Node>();
    nodeSource.items = nodes;
    cache = new ClusterCache({
      sources: { nodes: nodeSource, pods: new ScriptedSource<V1Pod>() },
      staleAfterMs: 1000,
      reflector: { initialBackoffMs: 5, maxBackoffMs: 10, jitter: 0 },
    });
    await cache.start();
    return cache;
  }

  it("viewPod reads the chain and numa-bind; a refusal is the pod's problem on every node", async () => {
    const noQuota = { quotaBudget: () => undefined };
    const view = viewPod(pod({ 'hami.io/gpu-scheduler-policy': 'binpack,numa,mutex' }), defaults, noQuota);
    expect(view.problem).to.equal(undefined);
    expect(view.policies).to.deep.equal({
      node: 'binpack',
      gpu: { keys: ['binpack', 'numa'], mutex: true, topologyAware: false },
    });

    const refused = viewPod(pod({ 'hami.io/gpu-scheduler-policy': 'exclusive' }), defaults, noQuota);
    expect(refused.problem).to.match(/unknown policy "exclusive"/);
    const cache = await store([simulatedGpuNode({ name: 'n1', gpus: 1 })]);
    const evaluation = evaluateNode(cache, 'n1', refused);
    expect(evaluation).to.deep.include({
      fits: false,
      reason: refused.problem,
      reasonCounts: { [POD_UNSUPPORTED]: 1 },
    });
    expect(evaluateNode(cache, 'n1', viewPod(pod({}), defaults, cache)).fits).to.equal(true);
  });

  it("passes the node's link scores to topology-aware", async () => {
    const cache = await store([
      simulatedGpuNode({ name: 'n1', gpus: 4, linkScore: (a, b) => (a + b === 5 ? 100 : 1) }),
    ]);
    const evaluation = evaluateNode(
      cache,
      'n1',
      viewPod(pod({ 'hami.io/gpu-scheduler-policy': 'topology-aware' }, '2'), defaults, cache),
    );
    if (!evaluation.fits) expect.fail(evaluation.reason);
    expect(evaluation.allocation[0]?.map((device) => device.uuid)).to.deep.equal(['GPU-n1-2', 'GPU-n1-3']);
  });
});
