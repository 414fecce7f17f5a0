import { PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { decodeAllocation } from '../../src/devices/allocation-codec.js';
import { parseNodeInventory } from '../../src/devices/inventory.js';
import { simulatedGpuAnnotations } from '../../src/local/simulated-gpu-node.js';
import { allocatedPod, eventMatching } from '../support/pod-waits.js';
import { ExtenderFixture, fixtureForSuite, gpuPodSpec, loadPerGpu } from '../support/extender-fixture.js';
import { eventually, notYet, sharedControlPlane, testCluster } from '../support/test-cluster.js';
import { ALLOCATED_ANNOTATION } from '../../src/hami/wire.js';

/**
 * HAMi's GPU scheduling policies through the real kube-scheduler, the kubelet simulator and the
 * HAMi device-plugin stand-in (issue 16, item 1): mutex never puts a pod on a GPU someone uses,
 * numa-bind keeps a container's GPUs on one NUMA node, and a policy we do not know leaves the pod
 * Pending with the policy named in its events, never placed under a default.
 *
 * Simulated nodes: a policy decides the placement at filter and bind, before kubelet is involved, and
 * the layouts it needs (4 GPUs on 2 NUMA nodes, several nodes) are node annotations either way.
 */
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const POLICY = 'hami.io/gpu-scheduler-policy';

function gpusOf(pod: V1Pod): string[] {
  const decoded = decodeAllocation(pod.metadata?.annotations?.[ALLOCATED_ANNOTATION] ?? '');
  if ('error' in decoded) throw new Error(decoded.error);
  return decoded.flat().map((device) => device.uuid);
}

describe('HAMi GPU policies through the real kube-scheduler', function () {
  this.timeout(120_000);
  let fixture: ExtenderFixture;

  fixtureForSuite(
    () => new ExtenderFixture(sharedControlPlane()),
    (started) => {
      fixture = started;
    },
  );

  it('mutex: a pod never lands on a GPU in use, even under binpack; with none idle it stays Pending, ExclusiveDeviceAllocateConflict named', async () => {
    const { core, namespace } = testCluster();
    const { group } = await fixture.createNodes(1, 4, 24576);
    const limits = { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1000' };
    await core.createNamespacedPod({ namespace, body: gpuPodSpec('sharer', group, limits) });
    const [sharerGpu] = gpusOf(await allocatedPod(namespace, 'sharer'));

    // binpack alone would pack every one of these onto the sharer's GPU.
    const exclusive: string[] = [];
    for (let index = 0; index < 3; index++) {
      await core.createNamespacedPod({
        namespace,
        body: gpuPodSpec(`mutex-${index}`, group, limits, { [POLICY]: 'binpack,mutex' }),
      });
      exclusive.push(...gpusOf(await allocatedPod(namespace, `mutex-${index}`)));
    }
    expect(exclusive).not.to.include(sharerGpu);
    expect(new Set(exclusive).size).to.equal(3);
    const pods = (await core.listNamespacedPod({ namespace })).items;
    for (const [uuid, load] of loadPerGpu(pods)) expect(load.slots, `pods on ${uuid}`).to.equal(1);

    // Every GPU has a user now: the next mutex pod must wait, and say why.
    await core.createNamespacedPod({ namespace, body: gpuPodSpec('mutex-late', group, limits, { [POLICY]: 'mutex' }) });
    const event = await eventMatching(namespace, 'mutex-late', /ExclusiveDeviceAllocateConflict/);
    expect(event.reason).to.be.oneOf(['FilteringFailed', 'FailedScheduling']);
    expect((await core.readNamespacedPod({ name: 'mutex-late', namespace })).spec?.nodeName).to.equal(undefined);
  });

  it("numa-bind: a container's GPUs share a NUMA node where spread alone would cross", async () => {
    const { core, namespace } = testCluster();
    const { group, nodes } = await fixture.createNodes(1, 4, 24576);
    const node = nodes[0] ?? '';
    // The plugin reports GPUs 0-1 on NUMA node 0 and 2-3 on node 1.
    await core.patchNode(
      {
        name: node,
        body: {
          metadata: {
            annotations: simulatedGpuAnnotations({ name: node, gpus: 4, gpuMemoryMiB: 24576, numaNodes: 2 }),
          },
        },
      },
      mergePatch,
    );
    await eventually(
      'the extender to see the NUMA nodes',
      () => {
        const devices = fixture.server?.cache.inventory(node)?.devices;
        return Promise.resolve(
          devices?.[3]?.numa === 1
            ? true
            : notYet(
                devices === undefined
                  ? `no inventory of ${node} in the store`
                  : `NUMA nodes of ${node}'s GPUs in the store: ${devices.map((device) => device.numa).join(', ')}`,
              ),
        );
      },
      10_000,
      50,
      (recheck) =>
        fixture.server!.cache.onNodeChange((changed) => {
          if (changed.metadata?.name === node) recheck();
        }),
    );
    const numaOf = new Map(
      parseNodeInventory((await core.readNode({ name: node })).metadata?.annotations).devices.map((device) => [
        device.uuid,
        device.numa,
      ]),
    );

    const limits = { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1000' };
    await core.createNamespacedPod({ namespace, body: gpuPodSpec('first', group, limits) });
    const [firstGpu] = gpusOf(await allocatedPod(namespace, 'first'));
    expect(numaOf.get(firstGpu ?? '')).to.equal(0);

    // spread takes the idle GPUs in index order: GPU 1 (NUMA 0) and GPU 2 (NUMA 1), across the two.
    await core.createNamespacedPod({
      namespace,
      body: gpuPodSpec('bound', group, { ...limits, 'nvidia.com/gpu': '2' }, { 'nvidia.com/numa-bind': 'true' }),
    });
    const gpus = gpusOf(await allocatedPod(namespace, 'bound'));
    expect(gpus).to.have.length(2);
    expect(new Set(gpus.map((uuid) => numaOf.get(uuid))).size, `NUMA nodes of ${gpus.join(', ')}`).to.equal(1);
  });

  it('an unknown policy leaves the pod Pending with the policy named in its events, never a default', async () => {
    const { core, namespace } = testCluster();
    const { group } = await fixture.createNodes(1, 4, 24576);
    await core.createNamespacedPod({
      namespace,
      body: gpuPodSpec('unknown-policy', group, { 'nvidia.com/gpu': '1' }, { [POLICY]: 'binpack,fastest' }),
    });
    const event = await eventMatching(namespace, 'unknown-policy', /unknown policy "fastest"/);
    expect(event.message).to.contain('hami.io/gpu-scheduler-policy "binpack,fastest"');
    const pod = await core.readNamespacedPod({ name: 'unknown-policy', namespace });
    expect(pod.spec?.nodeName).to.equal(undefined);
    expect(pod.metadata?.annotations?.[ALLOCATED_ANNOTATION]).to.equal(undefined);
  });
});
