import { expect } from 'chai';
import {
  boundPod,
  expectOwnGpus,
  nodeLock,
  nodeUnlocked,
  RealGpuNodes,
  realGpuPod,
  runningPod,
} from '../support/real-gpu-nodes.js';
import { eventually, notYet, sharedControlPlane, testCluster } from '../support/test-cluster.js';
import { PATH_ONLY, RELEASE_PATHS } from '../support/release-paths.js';

const LIMITS = { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1000', 'nvidia.com/gpucores': '10' };
/** How long kubelet stays frozen after the delete: a kubelet slow to admit. */
const KUBELET_LAG_MS = 1500;

/**
 * The seed scenario on a real node, once per release path with the others switched off: kubelet is
 * frozen (SIGSTOP) while a GPU pod is bound and force-deleted, so kubelet still has its ADD queued.
 * While kubelet may still admit it, no path may free its lock (kubelet calls Allocate for the dead
 * pod once it runs again, and HAMi's plugin serves "the pod the lock names"). Once kubelet is past
 * it (its Allocate refused, an Event about the pod), the path under test frees the lock, or with
 * webhook and takeover the replacement's bind takes it over; the replacement then runs with its own
 * GPUs. The simulated version, with a kubelet that can be told never to admit, is
 * lock-release-paths.test.ts.
 */
describe('on a real node, a lock whose pod was deleted while kubelet lagged is freed by each path once kubelet is past it', function () {
  this.timeout(180_000);

  for (const path of RELEASE_PATHS) {
    it(`${path}: kept while kubelet is frozen, then the replacement runs with its own GPUs`, async () => {
      const { core, namespace } = testCluster();
      const cluster = new RealGpuNodes(sharedControlPlane(), { nodes: 1, gpusPerNode: 2, env: PATH_ONLY[path] });
      let unregister: (() => Promise<void>) | undefined;
      await cluster.start();
      const [node = ''] = cluster.nodeNames;
      const real = cluster.node(node);
      try {
        if (path === 'webhook') unregister = await cluster.registerWebhook(namespace);
        real.pause();
        await core.createNamespacedPod({ namespace, body: realGpuPod('victim', cluster.group, LIMITS) });
        await boundPod('victim');
        expect(await nodeLock(core, node)).to.match(/,victim$/);
        const deleted = Date.now();
        await core.deleteNamespacedPod({ name: 'victim', namespace, gracePeriodSeconds: 0 });
        await new Promise((resolve) => setTimeout(resolve, KUBELET_LAG_MS));
        expect(
          await nodeLock(core, node),
          `${path}: kept while the frozen kubelet may still admit the victim`,
        ).to.match(/,victim$/);

        real.resume();
        const resumed = Date.now();
        let releasedMs: number | undefined;
        if (path === 'watch' || path === 'sweeper') {
          await nodeUnlocked(core, node, 30_000);
          releasedMs = Date.now() - resumed;
        } else {
          // Nobody but a bind frees it here: it stays until the replacement's bind takes it over.
          await new Promise((resolve) => setTimeout(resolve, 2000));
          expect(await nodeLock(core, node), `${path}: no path frees it`).to.match(/,victim$/);
        }
        const kubeletEvents = (
          await core.listNamespacedEvent({ namespace, fieldSelector: 'involvedObject.name=victim,source=kubelet' })
        ).items;
        expect(
          kubeletEvents.map((event) => event.reason),
          'kubelet got to the dead victim and rejected it',
        ).to.include('UnexpectedAdmissionError');

        const created = Date.now();
        await core.createNamespacedPod({ namespace, body: realGpuPod('replacement', cluster.group, LIMITS) });
        const running = await runningPod('replacement', 60_000);
        await expectOwnGpus(running);
        process.stdout.write(
          `        ${path}: resume -> lock ${releasedMs === undefined ? "taken over by the replacement's bind" : `released in ${releasedMs} ms`}; replacement created -> Running with its GPUs ${Date.now() - created} ms; delete -> replacement Running ${Date.now() - deleted} ms\n`,
        );
        await eventually(
          "the replacement's lock to go",
          async () => {
            const lock = await nodeLock(core, node);
            return lock === undefined ? true : notYet(`locked ${lock}`);
          },
          20_000,
          100,
        );
      } finally {
        real.resume();
        await unregister?.();
        await cluster.stop();
      }
    });
  }
});
