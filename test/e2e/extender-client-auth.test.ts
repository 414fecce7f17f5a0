import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { kubeSchedulerConfiguration } from '../../src/extender/scheduler-config.js';
import type { SchedulerHandle } from '../../src/local/control-plane.js';
import { BIND_PHASE_ANNOTATION } from '../../src/hami/wire.js';
import type { Wake } from '../support/eventually.js';
import { ExtenderFixture, fixtureForSuite, gpuPodSpec } from '../support/extender-fixture.js';
import { nonLoopbackAddress } from '../support/mtls-request.js';
import { podStory } from '../support/observations.js';
import { eventually, notYet, sharedControlPlane, testCluster } from '../support/test-cluster.js';

/** Re-runs a wait as soon as the extender's store sees the pod change; the poll stays as the fallback. */
function onPodChange(fixture: ExtenderFixture, namespace: string, name: string): Wake {
  return (recheck) =>
    fixture.server!.cache.onPodChange((pod) => {
      if (pod.metadata?.namespace === namespace && pod.metadata.name === name) recheck();
    });
}

/**
 * Simulated nodes: the subject is the TLS between kube-scheduler and the extender; no kubelet is involved.
 */
describe('real kube-scheduler through the extender with client certificates (as deployed: its own Deployment, off loopback)', function () {
  this.timeout(180_000);
  let fixture: ExtenderFixture;

  fixtureForSuite(
    () => new ExtenderFixture(sharedControlPlane(), { SWEEP_ENABLED: 'false' }, { clientAuth: true }),
    (started) => {
      fixture = started;
    },
  );

  it('schedules, binds and allocates a GPU pod, kube-scheduler presenting the issued client certificate from files', async () => {
    const { core, namespace } = testCluster();
    const { group, nodes } = await fixture.createNodes(1, 4, 24576);
    await core.createNamespacedPod({
      namespace,
      body: gpuPodSpec('mtls-0', group, { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '4000' }),
    });
    const pod = await eventually(
      'the pod bound and allocated',
      async () => {
        const read = await core.readNamespacedPod({ name: 'mtls-0', namespace });
        return read.spec?.nodeName !== undefined && read.metadata?.annotations?.[BIND_PHASE_ANNOTATION] === 'success'
          ? read
          : notYet(await podStory(core, namespace, 'mtls-0', read));
      },
      90_000,
      250,
      onPodChange(fixture, namespace, 'mtls-0'),
    );
    expect(pod.spec?.nodeName).to.equal(nodes[0]);
  });

  it('leaves a GPU pod Pending for a kube-scheduler without the client certificate: the extender refuses it at TLS', async () => {
    const { core, namespace } = testCluster();
    const { group } = await fixture.createNodes(1, 4, 24576);
    const server = fixture.server!;
    // Trusts our CA, so the only thing missing is its own certificate.
    const withoutCertificate: SchedulerHandle = await sharedControlPlane().startScheduler(
      kubeSchedulerConfiguration({
        schedulerName: 'no-client-cert',
        extenderUrl: `https://${nonLoopbackAddress()}:${server.extender.port}`,
        caPem: server.keeper.current()?.caBundlePem ?? '',
      }),
    );
    try {
      const body: V1Pod = gpuPodSpec('refused', group, { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '4000' });
      body.spec!.schedulerName = 'no-client-cert';
      await core.createNamespacedPod({ namespace, body });
      const condition = await eventually(
        'PodScheduled=False',
        async () => {
          const read = await core.readNamespacedPod({ name: 'refused', namespace });
          const scheduled = read.status?.conditions?.find((entry) => entry.type === 'PodScheduled');
          return scheduled?.status === 'False'
            ? scheduled
            : notYet(
                `PodScheduled ${scheduled?.status ?? 'not set'}; ${await podStory(core, namespace, 'refused', read)}`,
              );
        },
        60_000,
        250,
        onPodChange(fixture, namespace, 'refused'),
      );
      // Go's client usually reports the server's alert (tls: certificate required); when the server
      // has already closed the refused handshake it reports EOF or a reset instead.
      expect(condition.message).to.match(/certificate required|tls|EOF|connection reset by peer|broken pipe/i);
      await new Promise((resolve) => setTimeout(resolve, 2000));
      const pod = await core.readNamespacedPod({ name: 'refused', namespace });
      expect(pod.spec?.nodeName, 'bound without a client certificate').to.equal(undefined);
      expect(pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION]).to.equal(undefined);
    } finally {
      await withoutCertificate.stop();
    }
  });
});
