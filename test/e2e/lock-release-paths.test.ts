import { expect } from 'chai';
import { parseLockValue } from '../../src/lock/lock-value.js';
import { BIND_PHASE_ANNOTATION, NODE_LOCK_ANNOTATION } from '../../src/hami/wire.js';
import type { Wake } from '../support/eventually.js';
import { ExtenderFixture, gpuPodSpec } from '../support/extender-fixture.js';
import { podStory } from '../support/observations.js';
import { eventually, notYet, sharedControlPlane, testCluster } from '../support/test-cluster.js';
import { PATH_ONLY, RELEASE_PATHS } from '../support/release-paths.js';

/**
 * The seed scenario, once per release path with the others switched off: a GPU pod is deleted while
 * it holds its node's lock (the simulated kubelet never admits it, so no Allocate frees the lock),
 * and a replacement GPU pod for the same node must bind. The pod is deleted once it is bound:
 * deleted earlier, its bind in flight fails and frees the lock itself (the bind-failure path,
 * covered by test/e2e/extender.test.ts), so waiting for the Binding makes the path under test the
 * only one that can free the lock.
 *
 * Simulated nodes (test/support/kubelet-sim): each path is driven by telling the simulated kubelet
 * never to admit the victim, which a real kubelet cannot be told, so the lock is held as for a pod
 * awaiting Allocate for as long as the test likes. On real nodes, where kubelet is frozen instead and
 * each path may free the lock only once kubelet is past the dead pod: real-lock-release-paths.test.ts.
 */
describe('a lock whose pod is deleted mid-bind is freed by each path on its own', function () {
  this.timeout(120_000);

  for (const path of RELEASE_PATHS) {
    it(`${path}: the replacement pod binds`, async () => {
      const { core, namespace } = testCluster();
      const fixture = new ExtenderFixture(sharedControlPlane(), PATH_ONLY[path]);
      await fixture.start();
      let unregister: (() => Promise<void>) | undefined;
      try {
        if (path === 'webhook') unregister = await fixture.registerWebhook(namespace);
        // kubelet never admits the victim: it stays bound, its lock held as for a pod awaiting Allocate.
        fixture.admission = (pod) => (pod.metadata?.name === 'victim' ? 'never' : 0);
        const { group, nodes } = await fixture.createNodes(1);
        const node = nodes[0] ?? '';
        // Rechecks as soon as the fixture's store sees the node's lock or the named pod change; the
        // polls stay as the fallback.
        const onLock: Wake = (recheck) => fixture.server!.cache.onLockChange(node, recheck);
        const onPod =
          (name: string): Wake =>
          (recheck) =>
            fixture.server!.cache.onPodChange((pod) => {
              if (pod.metadata?.namespace === namespace && pod.metadata.name === name) recheck();
            });
        const limits = { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1000' };
        await core.createNamespacedPod({ namespace, body: gpuPodSpec('victim', group, limits) });
        await eventually(
          'the victim to hold the node lock',
          async () => {
            const lock = (await core.readNode({ name: node })).metadata?.annotations?.[NODE_LOCK_ANNOTATION];
            const value = lock === undefined ? undefined : parseLockValue(lock);
            return value?.kind === 'owned' && value.owner.name === 'victim'
              ? true
              : notYet(lock === undefined ? `${node} unlocked` : `${node} locked ${lock}`);
          },
          30_000,
          20,
          onLock,
        );
        await eventually(
          'the victim to be bound',
          async () => {
            const victim = await core.readNamespacedPod({ name: 'victim', namespace });
            return victim.spec?.nodeName === node ? true : notYet(await podStory(core, namespace, 'victim', victim));
          },
          30_000,
          20,
          onPod('victim'),
        );

        const deleted = Date.now();
        await core.deleteNamespacedPod({ name: 'victim', namespace, gracePeriodSeconds: 0 });
        const lockNow = async () => (await core.readNode({ name: node })).metadata?.annotations?.[NODE_LOCK_ANNOTATION];
        if (path === 'webhook') {
          // The victim was bound and awaiting Allocate: kubelet could still admit it (it admits pods
          // that arrive marked for deletion), so the webhook keeps its lock; once the pod is gone it
          // is releasable (owner-not-found) and the replacement's bind takes it over.
          expect(await lockNow(), 'the webhook keeps a lock kubelet may still need').to.not.equal(undefined);
        } else if (path === 'takeover') {
          await new Promise((resolve) => setTimeout(resolve, 2000));
          expect(await lockNow(), 'no other path may have released it').to.not.equal(undefined);
        } else {
          await eventually(
            `the ${path} to release the lock`,
            async () => {
              const lock = await lockNow();
              return lock === undefined ? true : notYet(`${node} locked ${lock}`);
            },
            10_000,
            20,
            onLock,
          );
        }
        const released = Date.now();

        await core.createNamespacedPod({ namespace, body: gpuPodSpec('replacement', group, limits) });
        const bound = await eventually(
          'the replacement to bind and be allocated',
          async () => {
            const pod = await core.readNamespacedPod({ name: 'replacement', namespace });
            return pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION] === 'success'
              ? pod
              : notYet(await podStory(core, namespace, 'replacement', pod));
          },
          60_000,
          50,
          onPod('replacement'),
        );
        const waitedMs = Date.now() - deleted;
        console.log(
          `        ${path}: lock ${path === 'takeover' || path === 'webhook' ? 'left in place' : `released ${released - deleted} ms after the delete`}; replacement bound ${waitedMs} ms after the delete`,
        );
        expect(bound.spec?.nodeName).to.equal(node);
        expect(waitedMs).to.be.below(60_000);
      } finally {
        await unregister?.();
        await fixture.stop();
      }
    });
  }
});
