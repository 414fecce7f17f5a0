import type { CoreV1Event } from '@kubernetes/client-node';
import { expect } from 'chai';
import { podStory } from '../support/observations.js';
import { allocatedPod } from '../support/pod-waits.js';
import { ExtenderFixture, fixtureForSuite, gpuPodSpec } from '../support/extender-fixture.js';
import { eventually, notYet, sharedControlPlane, testCluster } from '../support/test-cluster.js';

/**
 * A node whose HAMi device plugin dies keeps its register annotation; only kubelet's allocatable
 * nvidia.com/gpu (zeroed when the plugin's endpoint goes) says so. Through the real kube-scheduler:
 * such a node stops receiving GPU pods, a pod with nowhere else to go stays Pending with the reason
 * in its events, and the node takes pods again as soon as its plugin reports.
 *
 * Simulated nodes: the stand-in's liveness is toggled per node without restarting anything. The same
 * claim on real kubelets (the plugin's gRPC server stopped, kubelet zeroing allocatable itself) is
 * in real-node-faults.test.ts.
 */
describe('device-plugin liveness through the real kube-scheduler', function () {
  this.timeout(150_000);
  let fixture: ExtenderFixture;

  fixtureForSuite(
    () => new ExtenderFixture(sharedControlPlane()),
    (started) => {
      fixture = started;
    },
  );

  async function notReady(node: string): Promise<void> {
    const cache = fixture.server?.cache;
    await eventually(
      `the state store to see ${node}'s plugin gone`,
      () => {
        const liveness = cache?.gpuLiveness(node);
        return Promise.resolve(liveness?.ready === false ? true : notYet(`liveness ${JSON.stringify(liveness)}`));
      },
      20_000,
      100,
      (recheck) => cache?.onNodeChange(recheck) ?? (() => undefined),
    );
  }

  it("a dead plugin's node gets no pods (the reason in the pod's events) and gets them again once the plugin reports", async () => {
    const { core, namespace } = testCluster();
    const { group, nodes } = await fixture.createNodes(2, 2);
    const [dead = '', alive = ''] = nodes;
    const limits = { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1000', 'nvidia.com/gpucores': '10' };

    // Under binpack either node is as good as the other: with one dead, every pod goes to the other.
    await fixture.stopPlugin(dead);
    await notReady(dead);
    const names = ['busy-0', 'busy-1', 'busy-2'];
    await Promise.all(
      names.map((name) => core.createNamespacedPod({ namespace, body: gpuPodSpec(name, group, limits) })),
    );
    for (const name of names)
      expect((await allocatedPod(namespace, name, 60_000)).spec?.nodeName, name).to.equal(alive);

    // Nowhere left: the pod stays Pending and its events say why, naming the plugin.
    await fixture.stopPlugin(alive);
    await notReady(alive);
    await core.createNamespacedPod({ namespace, body: gpuPodSpec('waiting', group, limits) });
    const eventsOfWaiting = async (): Promise<CoreV1Event[]> =>
      (await core.listNamespacedEvent({ namespace })).items.filter(
        (item) =>
          item.involvedObject.name === 'waiting' && /device plugin stopped reporting since/.test(item.message ?? ''),
      );
    // Ours names the nodes; kube-scheduler's FailedScheduling carries the reason too.
    const [ours, theirs] = await eventually(
      'events naming the dead device plugins',
      async () => {
        const events = await eventsOfWaiting();
        const found = [
          events.find((item) => item.reason === 'FilteringFailed'),
          events.find((item) => item.reason === 'FailedScheduling'),
        ];
        return found[0] !== undefined && found[1] !== undefined
          ? (found as [CoreV1Event, CoreV1Event])
          : notYet(await podStory(core, namespace, 'waiting'));
      },
      60_000,
      500,
    );
    expect(ours.message)
      .to.include(dead)
      .and.to.include(alive)
      .and.to.include('status.allocatable["nvidia.com/gpu"] is 0');
    // The shared control plane holds other tests' nodes too: kube-scheduler counts them all.
    expect(theirs.message)
      .to.match(/^0\/\d+ nodes are available: /)
      .and.to.match(/device plugin stopped reporting since/);
    expect((await core.readNamespacedPod({ namespace, name: 'waiting' })).spec?.nodeName).to.equal(undefined);

    // The plugin comes back: kube-scheduler retries the pod and it lands there, allocated by the plugin.
    await fixture.revivePlugin(dead);
    const waiting = await allocatedPod(namespace, 'waiting', 60_000);
    expect(waiting.spec?.nodeName).to.equal(dead);
    const allocatable = (await core.readNode({ name: dead })).status?.allocatable?.['nvidia.com/gpu'];
    expect(allocatable, "kubelet publishes the plugin's 2 GPUs x 10 shares again").to.equal('20');
  });
});
