import { expect } from 'chai';
import { allocatedPod, eventMatching } from '../support/pod-waits.js';
import { ExtenderFixture, fixtureForSuite, gpuPodSpec } from '../support/extender-fixture.js';
import { scrapeMetrics, seriesValue } from '../support/scrape-metrics.js';
import { eventually, sharedControlPlane, testCluster } from '../support/test-cluster.js';

/**
 * HAMi's namespace GPU quota through the real kube-scheduler (issue 16, item 2): a ResourceQuota
 * with limits.nvidia.com/gpumem keeps a pod that would exceed it Pending, with the quota named in
 * its events, counts bound pods, lets the pod in once a pod of the namespace is gone, and the
 * scrape shows HAMi's quota families with the namespace's use.
 */

describe('namespace GPU quota through the real kube-scheduler', function () {
  this.timeout(180_000);
  let fixture: ExtenderFixture;

  fixtureForSuite(() => new ExtenderFixture(sharedControlPlane()), (started) => { fixture = started; });

  it('keeps a pod over limits.nvidia.com/gpumem Pending with the quota named, schedules it once room frees, and exports the use', async () => {
    const { core, namespace } = testCluster();
    const { group } = await fixture.createNodes(1, 4, 24576);
    await core.createNamespacedResourceQuota({ namespace, body: { metadata: { name: 'gpu-quota' }, spec: { hard: { 'limits.nvidia.com/gpumem': '3000', 'limits.nvidia.com/gpu': '4' } } } });
    await eventually('the extender to read the quota', () => Promise.resolve(fixture.server?.cache.quotaBudget(namespace) !== undefined ? true : undefined), 10_000, 50);

    const limits = { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '2000' };
    await core.createNamespacedPod({ namespace, body: gpuPodSpec('first', group, limits) });
    await allocatedPod(namespace, 'first', 60_000);

    // The node has room (4 GPUs of 24576 MiB); the namespace does not.
    await core.createNamespacedPod({ namespace, body: gpuPodSpec('over', group, limits) });
    const event = await eventMatching(namespace, 'over', /ResourceQuotaNotFit/);
    expect(event.message).to.contain(`ResourceQuota ${namespace}/gpu-quota: limits.nvidia.com/gpumem 2000 used + 2000 requested > 3000`);
    expect(event.reason).to.be.oneOf(['FilteringFailed', 'FailedScheduling']);
    const scheduled = await eventMatching(namespace, 'over', /^0\/\d+ nodes are available/);
    expect(scheduled.reason).to.equal('FailedScheduling');
    expect(scheduled.message).to.contain('ResourceQuotaNotFit');
    const over = await core.readNamespacedPod({ name: 'over', namespace });
    expect(over.spec?.nodeName).to.equal(undefined);

    const port = fixture.server?.metricsPort ?? 0;
    const scraped = await scrapeMetrics(port);
    expect(seriesValue(scraped, 'hami_resource_quota_used', { zone: 'vGPU', namespace, quota_name: 'nvidia.com/gpumem', limit: '3000' })).to.equal(2000);
    expect(seriesValue(scraped, 'hami_resource_quota_limit', { zone: 'vGPU', namespace, quota_name: 'nvidia.com/gpumem' })).to.equal(3000);
    expect(seriesValue(scraped, 'hami_resource_quota_used', { namespace, quota_name: 'nvidia.com/gpu', limit: '4' })).to.equal(1);
    expect(seriesValue(scraped, 'QuotaUsed', { quotanamespace: namespace, quotaName: 'nvidia.com/gpumem', limit: '3000' })).to.equal(2000);

    // The first pod goes: kube-scheduler retries the waiting one, which now fits its quota.
    await core.deleteNamespacedPod({ name: 'first', namespace, gracePeriodSeconds: 0 });
    await allocatedPod(namespace, 'over', 60_000);
    await eventually('the quota metric to follow', async () => {
      const text = await scrapeMetrics(port);
      return seriesValue(text, 'hami_resource_quota_used', { namespace, quota_name: 'nvidia.com/gpumem' }) === 2000
        && seriesValue(text, 'hami_resource_quota_used', { namespace, quota_name: 'nvidia.com/gpu' }) === 1 ? true : undefined;
    }, 10_000, 200);
  });
});
