import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { expect } from 'chai';
import { allocatedPod, eventMatching } from '../support/pod-waits.js';
import { ExtenderFixture, fixtureForSuite, gpuPodSpec } from '../support/extender-fixture.js';
import { scrapeMetrics, seriesValue } from '../support/scrape-metrics.js';
import { eventually, notYet, sharedControlPlane, testCluster } from '../support/test-cluster.js';

/**
 * HAMi's namespace GPU quota through the real kube-scheduler (issue 16, item 2): a ResourceQuota
 * with limits.nvidia.com/gpumem keeps a pod that would exceed it Pending, with the quota named in
 * its events, counts bound pods, lets the pod in once the limit is raised or a pod of the namespace
 * is gone (with another node ruled out by NodeAffinity, as in most clusters), and the scrape shows
 * HAMi's quota families with the namespace's use.
 *
 * Simulated nodes: quota is decided at filter and bind, before kubelet is involved. What depends on
 * kubelet (a pod's share given back once its container has ended, kept while it terminates) runs on a
 * real node in real-gpu-quota.test.ts.
 */

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

describe('namespace GPU quota through the real kube-scheduler', function () {
  this.timeout(180_000);
  let fixture: ExtenderFixture;

  fixtureForSuite(
    () => new ExtenderFixture(sharedControlPlane()),
    (started) => {
      fixture = started;
    },
  );

  /** Waits for the pod to be bound and allocated; on a timeout, says what kube-scheduler and the extender saw. */
  async function placedDespiteQuota(namespace: string, name: string): Promise<void> {
    const { core } = testCluster();
    try {
      await allocatedPod(namespace, name, 60_000);
    } catch (error) {
      const events = await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` });
      const seen = events.items.map((item) => `${item.reason ?? ''} x${item.count ?? 1}: ${item.message ?? ''}`);
      throw new Error(
        `${String(error)}; quota budget in the store: ${JSON.stringify(fixture.server?.cache.quotaBudget(namespace))}; events of ${name}:\n${seen.join('\n')}`,
        { cause: error },
      );
    }
  }

  it('keeps a pod over limits.nvidia.com/gpumem Pending with the quota named, schedules it once the limit is raised or a pod ends, and exports the use', async () => {
    const { core, namespace } = testCluster();
    const { group } = await fixture.createNodes(1, 4, 24576);
    // Another node, which the pods' nodeSelector rules out (kube-scheduler's NodeAffinity rejects
    // it), as in the full suite and in most clusters.
    await fixture.createNodes(1, 1, 24576);
    await core.createNamespacedResourceQuota({
      namespace,
      body: {
        metadata: { name: 'gpu-quota' },
        spec: { hard: { 'limits.nvidia.com/gpumem': '3000', 'limits.nvidia.com/gpu': '4' } },
      },
    });
    // The store offers no quota listener: polled only.
    await eventually(
      'the extender to read the quota',
      () =>
        Promise.resolve(
          fixture.server?.cache.quotaBudget(namespace) !== undefined
            ? true
            : notYet(`no quota budget for ${namespace} in the store`),
        ),
      10_000,
      50,
    );

    const limits = { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '2000' };
    await core.createNamespacedPod({ namespace, body: gpuPodSpec('first', group, limits) });
    await allocatedPod(namespace, 'first', 60_000);

    // The node has room (4 GPUs of 24576 MiB); the namespace does not.
    await core.createNamespacedPod({ namespace, body: gpuPodSpec('over', group, limits) });
    const quotaNamed = `ResourceQuotaNotFit (ResourceQuota ${namespace}/gpu-quota: limits.nvidia.com/gpumem 2000 used + 2000 requested > 3000)`;
    // Ours (FilteringFailed) and kube-scheduler's (FailedScheduling, the extender's Error) both name it.
    for (const reason of ['FilteringFailed', 'FailedScheduling']) {
      await eventually(
        `a ${reason} event naming the quota`,
        async () => {
          const events = await core.listNamespacedEvent({
            namespace,
            fieldSelector: `involvedObject.name=over,reason=${reason}`,
          });
          const last = events.items.at(-1)?.message;
          return events.items.some((item) => item.message === quotaNamed)
            ? true
            : notYet(
                `${events.items.length} ${reason} events on over${last === undefined ? '' : `, the last: ${last.slice(0, 200)}`}`,
              );
        },
        30_000,
        200,
      );
    }
    expect((await core.readNamespacedPod({ name: 'over', namespace })).spec?.nodeName).to.equal(undefined);

    const port = fixture.server?.metricsPort ?? 0;
    const scraped = await scrapeMetrics(port);
    expect(
      seriesValue(scraped, 'hami_resource_quota_used', {
        zone: 'vGPU',
        namespace,
        quota_name: 'nvidia.com/gpumem',
        limit: '3000',
      }),
    ).to.equal(2000);
    expect(
      seriesValue(scraped, 'hami_resource_quota_limit', { zone: 'vGPU', namespace, quota_name: 'nvidia.com/gpumem' }),
    ).to.equal(3000);
    expect(
      seriesValue(scraped, 'hami_resource_quota_used', { namespace, quota_name: 'nvidia.com/gpu', limit: '4' }),
    ).to.equal(1);
    expect(
      seriesValue(scraped, 'QuotaUsed', { quotanamespace: namespace, quotaName: 'nvidia.com/gpumem', limit: '3000' }),
    ).to.equal(2000);

    // The limit is raised (kube-scheduler does not watch quotas; it retries the Error on its backoff).
    await core.patchNamespacedResourceQuota(
      { name: 'gpu-quota', namespace, body: { spec: { hard: { 'limits.nvidia.com/gpumem': '4000' } } } },
      mergePatch,
    );
    await placedDespiteQuota(namespace, 'over');

    // Full again: the next pod waits until a pod of the namespace ends.
    await core.createNamespacedPod({ namespace, body: gpuPodSpec('third', group, limits) });
    await eventMatching(namespace, 'third', /limits\.nvidia\.com\/gpumem 4000 used \+ 2000 requested > 4000/);
    await core.deleteNamespacedPod({ name: 'first', namespace, gracePeriodSeconds: 0 });
    await placedDespiteQuota(namespace, 'third');
    await eventually(
      'the quota metric to follow',
      async () => {
        const text = await scrapeMetrics(port);
        const [memory, gpus] = [
          seriesValue(text, 'hami_resource_quota_used', { namespace, quota_name: 'nvidia.com/gpumem', limit: '4000' }),
          seriesValue(text, 'hami_resource_quota_used', { namespace, quota_name: 'nvidia.com/gpu' }),
        ];
        return memory === 4000 && gpus === 2
          ? true
          : notYet(`hami_resource_quota_used gpumem (limit 4000) ${memory ?? 'absent'}, gpu ${gpus ?? 'absent'}`);
      },
      10_000,
      200,
      (recheck) =>
        fixture.server!.cache.onPodChange((pod) => {
          if (pod.metadata?.namespace === namespace) recheck();
        }),
    );
  });
});
