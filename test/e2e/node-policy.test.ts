import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import type { NodePolicy } from '../../src/devices/score.js';
import { BIND_PHASE_ANNOTATION } from '../../src/hami/wire.js';
import type { Wake } from '../support/eventually.js';
import { ExtenderFixture, fixtureForSuite, gpuPodSpec } from '../support/extender-fixture.js';
import { eventually, notYet, sharedControlPlane, testCluster } from '../support/test-cluster.js';

/**
 * NODE_SCHEDULER_POLICY decides where the real kube-scheduler puts GPU pods, against kube-scheduler's
 * own scorers: 5 nodes x 4 GPUs (24 GiB, 10 slots each), 40 pods of 1 GPU + 2000 MiB that also
 * request cpu and memory like real workloads, behind a Service (so PodTopologySpread's system
 * default constraints apply to them), and a CPU-heavy non-GPU pod on one node that NodeResourcesFit
 * prefers (binpack: MostAllocated) or avoids (spread: LeastAllocated) against the GPU policy.
 * With the extender at weight 1 and the stock plugins, both policies end alike: spread over the
 * nodes, the cpu-busy node shunned.
 *
 * In the first suite the pods come one at a time, each placed once the previous one is allocated
 * and its node lock released, so that the test is about the scores alone. The second creates a
 * burst at once without cpu or memory requests, as a Deployment scaled up does: the pods tie on
 * every score plugin, kube-scheduler places each while the binds before it are still in flight,
 * and only the extender's packing plan (binpack) and its reservations keep them together.
 *
 * Simulated nodes: 5 nodes and 40 pods are more kubelets and containers than two cores carry, and
 * placement is decided before kubelet is involved.
 */
const NODES = 5;
const PODS = 40;
const APP_LABEL = 'vgpu-warden.test/app';

function placementsOf(pods: V1Pod[], nodes: string[]): Map<string, number> {
  const perNode = new Map(nodes.map((node) => [node, 0]));
  for (const pod of pods) {
    const node = pod.spec?.nodeName;
    if (node !== undefined) perNode.set(node, (perNode.get(node) ?? 0) + 1);
  }
  return perNode;
}

async function place(
  fixture: ExtenderFixture,
  nodePolicy: NodePolicy,
): Promise<{ perNode: Map<string, number>; hogNode: string }> {
  const { core, namespace } = testCluster();
  const { group, nodes } = await fixture.createNodes(NODES, 4, 24576);
  const app = `gpu-${nodePolicy}`;
  await core.createNamespacedService({
    namespace,
    body: {
      metadata: { name: app },
      spec: { clusterIP: 'None', selector: { [APP_LABEL]: app }, ports: [{ port: 80 }] },
    },
  });

  // Never scheduled (nodeName is preset), yet counted by kube-scheduler's NodeResourcesFit there.
  const placeHog = async (node: string) => {
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name: 'cpu-hog' },
        spec: {
          nodeName: node,
          containers: [{ name: 'main', image: 'busy', resources: { requests: { cpu: '24', memory: '64Gi' } } }],
        },
      },
    });
  };
  const gpuPods = async (): Promise<V1Pod[]> =>
    (await core.listNamespacedPod({ namespace, labelSelector: `${APP_LABEL}=${app}` })).items;
  // placeOne's condition changes only with the store's pods of the namespace and its view of the nodes' locks.
  const storeChanged: Wake = (recheck) => {
    const cache = fixture.server!.cache;
    const stops = [
      cache.onPodChange((pod) => {
        if (pod.metadata?.namespace === namespace) recheck();
      }),
      ...nodes.map((node) => cache.onLockChange(node, recheck)),
    ];
    return () => {
      for (const stop of stops) stop();
    };
  };
  const placeOne = async (index: number) => {
    const body = gpuPodSpec(`${nodePolicy}-${index}`, group, {
      'nvidia.com/gpu': '1',
      'nvidia.com/gpumem': '2000',
      cpu: '500m',
      memory: '1Gi',
    });
    body.metadata = { ...body.metadata, labels: { [APP_LABEL]: app } };
    await core.createNamespacedPod({ namespace, body });
    await eventually(
      `${nodePolicy} pod ${index} allocated and its node lock gone from the extender's view`,
      async () => {
        const pods = await gpuPods();
        const allocated = pods.filter(
          (pod) => pod.spec?.nodeName !== undefined && pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION] === 'success',
        );
        const locks = nodes.flatMap((node) => {
          const lock = fixture.server?.cache.lockOf(node);
          return lock === undefined ? [] : [`${node} ${lock.raw}`];
        });
        return allocated.length === index + 1 && locks.length === 0
          ? true
          : notYet(
              `${allocated.length} of ${index + 1} pods allocated (${pods.length} created); locks in the extender's view: ${locks.join(', ') || 'none'}`,
            );
      },
      20_000,
      25,
      storeChanged,
    );
  };

  let hogNode: string;
  if (nodePolicy === 'binpack') {
    // The first pods tie on the extender's rounded score and MostAllocated packs them; the 4th puts
    // their node a whole point ahead. Then the hog comes, onto another node: from then on the
    // extender (the first node is fuller in GPUs) and MostAllocated (the hog's is fuller in cpu) disagree.
    for (let index = 0; index < 4; index++) await placeOne(index);
    const first = (await gpuPods())[0]?.spec?.nodeName;
    hogNode = nodes.find((node) => node !== first) ?? '';
    await placeHog(hogNode);
    for (let index = 4; index < PODS; index++) await placeOne(index);
  } else {
    // The hog's node is as empty in GPUs as any, the fullest in cpu: spread and LeastAllocated disagree.
    hogNode = nodes[NODES - 1] ?? '';
    await placeHog(hogNode);
    for (let index = 0; index < PODS; index++) await placeOne(index);
  }
  return { perNode: placementsOf(await gpuPods(), nodes), hogNode };
}

/**
 * Creates `count` pods at once (no cpu or memory requests) and waits until all are bound. `constrain`
 * adds the pods' own constraints (affinity, topology spread), given the pods' label.
 */
async function placeBurst(
  fixture: ExtenderFixture,
  nodePolicy: NodePolicy,
  count: number,
  options: { nodeCount?: number; app?: string; constrain?: (pod: V1Pod, labels: Record<string, string>) => void } = {},
): Promise<Map<string, number>> {
  const { core, namespace } = testCluster();
  const { group, nodes } = await fixture.createNodes(options.nodeCount ?? NODES, 4, 24576);
  const app = options.app ?? `burst-${nodePolicy}`;
  await Promise.all(
    Array.from({ length: count }, (_, index) => {
      const body = gpuPodSpec(`${app}-${index}`, group, {
        'nvidia.com/gpu': '1',
        'nvidia.com/gpumem': '2000',
        'nvidia.com/gpucores': '10',
      });
      body.metadata = { ...body.metadata, labels: { [APP_LABEL]: app } };
      options.constrain?.(body, { [APP_LABEL]: app });
      return core.createNamespacedPod({ namespace, body });
    }),
  );
  const pods = await eventually(
    `all ${count} ${nodePolicy} pods bound`,
    async () => {
      const listed = (await core.listNamespacedPod({ namespace, labelSelector: `${APP_LABEL}=${app}` })).items;
      const bound = listed.filter((pod) => pod.spec?.nodeName !== undefined);
      return bound.length === count ? listed : notYet(`${bound.length} of ${count} bound`);
    },
    120_000,
    200,
  );
  return placementsOf(pods, nodes);
}

/**
 * The suite's serve and matching kube-scheduler profile for `nodePolicy`, started before its tests
 * and stopped after them; the returned function gives it inside a test.
 */
function policyFixture(nodePolicy: NodePolicy): () => ExtenderFixture {
  let fixture: ExtenderFixture | undefined;
  fixtureForSuite(
    () => new ExtenderFixture(sharedControlPlane(), {}, { nodePolicy }),
    (started) => {
      fixture = started;
    },
  );
  return () => {
    if (fixture === undefined) throw new Error(`the ${nodePolicy} suite's fixture has not started`);
    return fixture;
  };
}

describe('the node policy decides placement through the real kube-scheduler', function () {
  this.timeout(60_000);

  for (const nodePolicy of ['binpack', 'spread'] as const) {
    describe(`NODE_SCHEDULER_POLICY=${nodePolicy} (and the matching kube-scheduler profile)`, () => {
      const fixture = policyFixture(nodePolicy);

      if (nodePolicy === 'binpack') {
        it('packs 40 small GPU pods onto one node (its 40 GPU slots), not onto the cpu-busy node', async () => {
          const { perNode, hogNode } = await place(fixture(), nodePolicy);
          const counts = [...perNode.values()];
          const detail = `pods per node: ${JSON.stringify([...perNode])}`;
          expect(counts.reduce((sum, count) => sum + count, 0)).to.equal(PODS);
          expect(Math.max(...counts), detail).to.equal(PODS);
          expect(perNode.get(hogNode), detail).to.equal(0);
        });
      } else {
        it('spreads 40 small GPU pods over all 5 nodes, the cpu-busy node included', async () => {
          const { perNode, hogNode } = await place(fixture(), nodePolicy);
          const counts = [...perNode.values()];
          const others = [...perNode].filter(([node]) => node !== hogNode).map(([, count]) => count);
          const detail = `pods per node: ${JSON.stringify([...perNode])}`;
          expect(counts.reduce((sum, count) => sum + count, 0)).to.equal(PODS);
          // The hog's node gets GPU pods whenever it is a whole point emptier by the extender's
          // score (rounded, one point is about 6 of these pods); within a point LeastAllocated
          // shuns it, so it trails the others by up to that much (expected 9, 9, 9, 9 and 4).
          expect(perNode.get(hogNode), detail).to.be.at.least(1);
          expect(Math.max(...others) - Math.min(...others), detail).to.be.at.most(1);
          expect(Math.max(...counts) - Math.min(...counts), detail).to.be.at.most(7);
        });
      }
    });
  }
});

describe('a burst created at once, as a Deployment scaled up (real kube-scheduler, simulated device plugin)', function () {
  this.timeout(90_000);
  // 5 nodes x 4 GPUs x 10 slots, 1 GPU + 2000 MiB + 10 cores each: 40 pods fill a node.
  const BURST = 100;
  const FEWEST_NODES = Math.ceil(BURST / 40);

  for (const nodePolicy of ['binpack', 'spread'] as const) {
    describe(`NODE_SCHEDULER_POLICY=${nodePolicy}`, () => {
      const fixture = policyFixture(nodePolicy);

      if (nodePolicy === 'binpack') {
        it(`packs ${BURST} pods onto the fewest nodes that hold them (${FEWEST_NODES}), at most one more`, async () => {
          const perNode = await placeBurst(fixture(), nodePolicy, BURST);
          const used = [...perNode.values()].filter((count) => count > 0).length;
          expect(used, `pods per node: ${JSON.stringify([...perNode])}`).to.be.within(FEWEST_NODES, FEWEST_NODES + 1);
        });
      } else {
        it(`spreads ${BURST} pods evenly over all ${NODES} nodes`, async () => {
          const perNode = await placeBurst(fixture(), nodePolicy, BURST);
          const counts = [...perNode.values()];
          // One point of the rounded score is about 6 of these pods: within it the pods tie.
          expect(
            Math.max(...counts) - Math.min(...counts),
            `pods per node: ${JSON.stringify([...perNode])}`,
          ).to.be.at.most(7);
        });
      }
    });
  }
});

describe('a burst on a large cluster, where kube-scheduler samples the nodes (real kube-scheduler, simulated device plugin)', function () {
  this.timeout(300_000);
  // Above 100 nodes kube-scheduler stops filtering once it has found percentageOfNodesToScore of
  // them (about 46 % at 500) and sends the extender only those names, starting each cycle where
  // the last one stopped; the GPU profile asks for every feasible name (docs/extender.md).
  const LARGE = 500;
  const BURST = 200;
  const FEWEST_NODES = Math.ceil(BURST / 40);

  for (const nodePolicy of ['binpack', 'spread'] as const) {
    describe(`NODE_SCHEDULER_POLICY=${nodePolicy} on ${LARGE} nodes`, () => {
      const fixture = policyFixture(nodePolicy);

      if (nodePolicy === 'binpack') {
        it(`packs ${BURST} pods onto the fewest nodes that hold them (${FEWEST_NODES}), at most one more`, async () => {
          const perNode = await placeBurst(fixture(), nodePolicy, BURST, { nodeCount: LARGE });
          const used = [...perNode].filter(([, count]) => count > 0);
          expect(used.length, `pods per node: ${JSON.stringify(used)}`).to.be.within(FEWEST_NODES, FEWEST_NODES + 1);
        });
      } else {
        it(`puts ${BURST} pods on ${BURST} distinct nodes while free nodes remain`, async () => {
          const perNode = await placeBurst(fixture(), nodePolicy, BURST, { nodeCount: LARGE });
          const shared = [...perNode].filter(([, count]) => count > 1);
          expect(shared, 'nodes given more than one pod').to.deep.equal([]);
        });
      }
    });
  }
});

describe("GPU pods keep their own constraints under the node policy, above kube-scheduler's 100-node sample (real kube-scheduler)", function () {
  this.timeout(180_000);
  // Above 100 nodes: binpack's profile sends every feasible name and its packing plan would fill one
  // node; spread names one node per pod. kube-scheduler's own filters run before the extender, and
  // they count the pods of the burst it has already placed, so the pods' constraints still hold.
  const CLUSTER = 150;
  const hostname = 'kubernetes.io/hostname';
  /** A required (anti-)affinity term over the pods with `labels`, by node. */
  const sameHostname = (labels: Record<string, string>) => ({
    requiredDuringSchedulingIgnoredDuringExecution: [{ labelSelector: { matchLabels: labels }, topologyKey: hostname }],
  });

  for (const nodePolicy of ['binpack', 'spread'] as const) {
    describe(`NODE_SCHEDULER_POLICY=${nodePolicy} on ${CLUSTER} nodes`, () => {
      const fixture = policyFixture(nodePolicy);

      const used = (perNode: Map<string, number>) => [...perNode].filter(([, count]) => count > 0);

      if (nodePolicy === 'binpack') {
        it('required pod anti-affinity: 12 pods created at once land on 12 nodes, not on the one the plan fills', async () => {
          const perNode = await placeBurst(fixture(), nodePolicy, 12, {
            nodeCount: CLUSTER,
            app: 'anti',
            constrain: (pod, labels) => {
              pod.spec!.affinity = { podAntiAffinity: sameHostname(labels) };
            },
          });
          const nodes = used(perNode);
          expect(nodes.length, `pods per node: ${JSON.stringify(nodes)}`).to.equal(12);
        });

        it('topology spread (maxSkew 1 over hostname, DoNotSchedule): 12 pods created at once land on 12 nodes', async () => {
          const perNode = await placeBurst(fixture(), nodePolicy, 12, {
            nodeCount: CLUSTER,
            app: 'skew',
            constrain: (pod, labels) => {
              pod.spec!.topologySpreadConstraints = [
                {
                  maxSkew: 1,
                  topologyKey: hostname,
                  whenUnsatisfiable: 'DoNotSchedule',
                  labelSelector: { matchLabels: labels },
                },
              ];
            },
          });
          const nodes = used(perNode);
          expect(nodes.length, `pods per node: ${JSON.stringify(nodes)}`).to.equal(12);
        });
      } else {
        it('required pod affinity to each other: 8 pods created at once land together, not on the 8 nodes spread would name', async () => {
          const perNode = await placeBurst(fixture(), nodePolicy, 8, {
            nodeCount: CLUSTER,
            app: 'together',
            constrain: (pod, labels) => {
              pod.spec!.affinity = { podAffinity: sameHostname(labels) };
            },
          });
          const nodes = used(perNode);
          expect(nodes, 'nodes used').to.have.length(1);
          expect(nodes[0]?.[1]).to.equal(8);
        });
      }
    });
  }
});
