import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { kubeSchedulerConfiguration } from '../../src/extender/scheduler-config.js';
import type { SchedulerHandle } from '../../src/local/control-plane.js';
import { BIND_PHASE_ANNOTATION } from '../../src/lock/owner-pod.js';
import { ExtenderFixture, fixtureForSuite, gpuPodSpec } from '../support/extender-fixture.js';
import { nonLoopbackAddress } from '../support/mtls-request.js';
import { eventually, sharedControlPlane, testCluster } from '../support/test-cluster.js';

describe('real kube-scheduler through the extender with client certificates (as deployed: its own Deployment, off loopback)', function () {
  this.timeout(180_000);
  let fixture: ExtenderFixture;

  fixtureForSuite(() => new ExtenderFixture(sharedControlPlane(), { SWEEP_ENABLED: 'false' }, { clientAuth: true }), (started) => { fixture = started; });

  it('schedules, binds and allocates a GPU pod, kube-scheduler presenting the issued client certificate from files', async () => {
    const { core, namespace } = testCluster();
    const { group, nodes } = await fixture.createNodes(1, 4, 24576);
    await core.createNamespacedPod({ namespace, body: gpuPodSpec('mtls-0', group, { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '4000' }) });
    const pod = await eventually('the pod bound and allocated', async () => {
      const read = await core.readNamespacedPod({ name: 'mtls-0', namespace });
      return read.spec?.nodeName !== undefined && read.metadata?.annotations?.[BIND_PHASE_ANNOTATION] === 'success' ? read : undefined;
    }, 90_000, 250);
    expect(pod.spec?.nodeName).to.equal(nodes[0]);
  });

  it('leaves a GPU pod Pending for a kube-scheduler without the client certificate: the extender refuses it at TLS', async () => {
    const { core, namespace } = testCluster();
    const { group } = await fixture.createNodes(1, 4, 24576);
    const server = fixture.server!;
    // Trusts our CA, so the only thing missing is its own certificate.
    const withoutCertificate: SchedulerHandle = await sharedControlPlane().startScheduler(kubeSchedulerConfiguration({
      schedulerName: 'no-client-cert', extenderUrl: `https://${nonLoopbackAddress()}:${server.extender.port}`, caPem: server.keeper.current()?.caBundlePem ?? '',
    }));
    try {
      const body: V1Pod = gpuPodSpec('refused', group, { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '4000' });
      body.spec!.schedulerName = 'no-client-cert';
      await core.createNamespacedPod({ namespace, body });
      const condition = await eventually('PodScheduled=False', async () =>
        (await core.readNamespacedPod({ name: 'refused', namespace })).status?.conditions?.find((entry) => entry.type === 'PodScheduled' && entry.status === 'False'), 60_000, 250);
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
