import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { expect } from 'chai';
import { withSignal } from '../../src/kube/call-options.js';
import { loadKubeConfig } from '../../src/kube/client.js';
import { eventually, notYet, sharedControlPlane, testCluster } from '../support/test-cluster.js';

/**
 * The fault-injection and workload hooks of the test control plane: crashing kube-apiserver or etcd
 * and bringing it back with its data, and a kube-controller-manager whose ReplicaSet controller
 * turns Deployments into pods (with the controller identities a real cluster uses).
 */
describe('control plane restarts and controller-manager', function () {
  this.timeout(120_000);

  for (const component of ['kube-apiserver', 'etcd'] as const) {
    it(`${component}: a SIGKILL makes calls fail; after the restart the data is still there`, async () => {
      const { core, namespace } = testCluster();
      const plane = sharedControlPlane();
      await core.createNamespacedConfigMap({
        namespace,
        body: { metadata: { name: 'before' }, data: { kept: 'yes' } },
      });
      const crash = plane.restart(component, { downMs: 1500 });
      // While it is down, a write fails (refused, or the apiserver cannot reach etcd; reads could
      // still be served from the apiserver's watch cache).
      let attempt = 0;
      const failed = await eventually(
        `a write to fail while ${component} is down`,
        async () => {
          try {
            await core.createNamespacedConfigMap(
              { namespace, body: { metadata: { name: `during-${attempt++}` } } },
              withSignal(AbortSignal.timeout(2000)),
            );
            return notYet(`write during-${attempt - 1} accepted`);
          } catch (error) {
            // A check's answer cannot be undefined: a write that threw nothing keeps the wait going.
            return error ?? notYet(`write during-${attempt - 1} threw ${String(error)}`);
          }
        },
        10_000,
        50,
      );
      expect(failed, 'a write failed (refused, timed out or answered with an error)').to.have.property('message');
      await crash;
      const fresh = loadKubeConfig(plane.kubeconfigPath).makeApiClient(CoreV1Api);
      const kept = await eventually(
        'reads to work again',
        async () =>
          fresh
            .readNamespacedConfigMap({ namespace, name: 'before' })
            .catch((error: unknown) =>
              notYet(`the read failed: ${error instanceof Error ? error.message.slice(0, 200) : String(error)}`),
            ),
        30_000,
        100,
      );
      expect(kept.data).to.deep.equal({ kept: 'yes' });
      const died = await Promise.race([
        plane.firstUnexpectedExit(),
        new Promise((resolve) =>
          setTimeout(() => {
            resolve('none');
          }, 200),
        ),
      ]);
      expect(died, 'a restart is not a crash').to.equal('none');
    });
  }

  it('kube-controller-manager turns a Deployment into pods owned by its ReplicaSet, and scales it down', async () => {
    const { namespace, kubeConfig, core } = testCluster();
    const plane = sharedControlPlane();
    const manager = await plane.startControllerManager();
    try {
      const apps = kubeConfig.makeApiClient(AppsV1Api);
      const labels = { app: 'scaled' };
      await apps.createNamespacedDeployment({
        namespace,
        body: {
          metadata: { name: 'scaled' },
          spec: {
            replicas: 3,
            selector: { matchLabels: labels },
            template: {
              metadata: { labels },
              spec: { schedulerName: 'nobody', containers: [{ name: 'c', image: 'x' }] },
            },
          },
        },
      });
      const pods = await eventually(
        '3 pods from the ReplicaSet',
        async () => {
          const list = await core.listNamespacedPod({ namespace, labelSelector: 'app=scaled' });
          return list.items.length === 3 ? list.items : notYet(`${list.items.length} pods with app=scaled`);
        },
        60_000,
        200,
      );
      for (const pod of pods) expect(pod.metadata?.ownerReferences?.[0]?.kind).to.equal('ReplicaSet');
      await apps.patchNamespacedDeploymentScale({
        namespace,
        name: 'scaled',
        body: [{ op: 'replace', path: '/spec/replicas', value: 1 }],
      });
      await eventually(
        'scaled down to 1 pod',
        async () => {
          const list = await core.listNamespacedPod({ namespace, labelSelector: 'app=scaled' });
          const live = list.items.filter((pod) => pod.metadata?.deletionTimestamp == null).length;
          return live === 1
            ? true
            : notYet(`${live} live and ${list.items.length - live} deleting pods with app=scaled`);
        },
        60_000,
        200,
      );
    } finally {
      await manager.stop();
    }
  });
});
