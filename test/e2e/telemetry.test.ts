import { expect } from 'chai';
import { BIND_PHASE_ANNOTATION, NODE_LOCK_ANNOTATION } from '../../src/hami/wire.js';
import type { Wake } from '../support/eventually.js';
import { ExtenderFixture, gpuPodSpec } from '../support/extender-fixture.js';
import { podStory } from '../support/observations.js';
import { scrapeMetrics } from '../support/scrape-metrics.js';
import { eventually, notYet, sharedControlPlane, testCluster } from '../support/test-cluster.js';

/** The value of one sample line, e.g. sample(text, 'vgpu_warden_lock_releases_total{reason="x",path="y"}'). */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/**
 * Simulated nodes: a stalled lock needs a pod held bound and unadmitted past NODELOCK_EXPIRE for as
 * long as the test asks; the simulated kubelet can be told never to admit it, a real one cannot (frozen,
 * it admits the pod the moment it runs again). The stall on a real kubelet: real-reordered-admission.test.ts.
 */
describe('telemetry of lock decisions (real kube-scheduler, apiserver, kubelet simulator, HAMi stand-in)', function () {
  this.timeout(120_000);

  it('a stalled lock is never released before NODELOCK_FORCE_AFTER, and raises the event and the metric', async () => {
    const { core, namespace } = testCluster();
    const fixture = new ExtenderFixture(sharedControlPlane(), {
      BIND_GRACE: '1s',
      BIND_TIMEOUT: '900ms',
      BIND_LOCK_WAIT: '500ms',
      NODELOCK_EXPIRE: '3s',
      NODELOCK_FORCE_AFTER: '8s',
      SWEEP_SCHEDULE: '* * * * * *',
      LEADER_ELECTION: 'false',
    });
    await fixture.start();
    try {
      // kubelet never admits it: bound and awaiting Allocate past the expiry, the lock is stalled.
      fixture.admission = (pod) => (pod.metadata?.name === 'stuck' ? 'never' : 0);
      const { group, nodes } = await fixture.createNodes(1);
      const node = nodes[0] ?? '';
      // The lock waits look again as soon as the fixture's store sees the lock change (the polls stay
      // as the fallback) and spend no further request on what they saw: the times they measure stay
      // close to the writes.
      const onLock: Wake = (recheck) => fixture.server!.cache.onLockChange(node, recheck);
      await core.createNamespacedPod({
        namespace,
        body: gpuPodSpec('stuck', group, { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1000' }),
      });
      const lockedAt = await eventually(
        'the lock to appear',
        async () =>
          (await core.readNode({ name: node })).metadata?.annotations?.[NODE_LOCK_ANNOTATION] === undefined
            ? notYet(`${node} unlocked`)
            : Date.now(),
        30_000,
        20,
        onLock,
      );
      const lockNow = async () => (await core.readNode({ name: node })).metadata?.annotations?.[NODE_LOCK_ANNOTATION];

      const stalledEvents = await eventually(
        'NodeLockStalled on the node and on the pod',
        async () => {
          const events = (await core.listEventForAllNamespaces()).items.filter(
            (event) => event.reason === 'NodeLockStalled',
          );
          const onNode = events.some(
            (event) => event.involvedObject.kind === 'Node' && event.involvedObject.name === node,
          );
          const onPod = events.some(
            (event) => event.involvedObject.kind === 'Pod' && event.involvedObject.name === 'stuck',
          );
          return onNode && onPod
            ? events
            : notYet(
                `${events.length} NodeLockStalled events; on ${node}: ${onNode ? 'yes' : 'no'}, on stuck: ${onPod ? 'yes' : 'no'}`,
              );
        },
        15_000,
        250,
      );
      expect(stalledEvents[0]?.type).to.equal('Warning');
      const metrics = await scrapeMetrics(fixture.server?.metricsPort ?? 0);
      expect(sample(metrics, 'vgpu_warden_stalled_lock_reports_total')).to.be.greaterThan(0);
      expect(sample(metrics, 'vgpu_warden_node_locks_held{state="stalled"}')).to.equal(1);

      // Lock times have second precision: stay a second clear of the 8 s mark.
      const beforeForce = lockedAt + 6500 - Date.now();
      if (beforeForce > 0) await new Promise((resolve) => setTimeout(resolve, beforeForce));
      expect(await lockNow(), 'released before NODELOCK_FORCE_AFTER').to.not.equal(undefined);
      await eventually(
        'the forced release',
        async () => {
          const lock = await lockNow();
          return lock === undefined ? true : notYet(`${node} locked ${lock}`);
        },
        10_000,
        100,
        onLock,
      );
      const releasedAfterMs = Date.now() - lockedAt;
      console.log(`        stalled lock released ${releasedAfterMs} ms after it was taken (NODELOCK_FORCE_AFTER 8s)`);
      expect(releasedAfterMs).to.be.at.least(7000);
      const after = await scrapeMetrics(fixture.server?.metricsPort ?? 0);
      expect(sample(after, 'vgpu_warden_lock_releases_total{reason="forced-after-stall",path="sweeper"}')).to.equal(1);
      const released = await eventually(
        'NodeLockReleased on the node',
        async () => {
          const onNode = (await core.listEventForAllNamespaces()).items.filter(
            (event) => event.involvedObject.name === node,
          );
          return (
            onNode.find((event) => event.reason === 'NodeLockReleased') ??
            notYet(
              `${onNode.length} events on ${node} (the last listed: ${
                onNode
                  .slice(-3)
                  .map((event) => event.reason ?? '?')
                  .join(', ') || 'none'
              })`,
            )
          );
        },
        10_000,
        250,
      );
      expect(released.message).to.include('forced-after-stall').and.include('stuck');
    } finally {
      await fixture.stop();
    }
  });

  it('exposes the documented metrics and events for a normal bind', async () => {
    const { core, namespace } = testCluster();
    const fixture = new ExtenderFixture(sharedControlPlane(), {
      SWEEP_SCHEDULE: '* * * * * *',
      LEADER_ELECTION: 'false',
    });
    await fixture.start();
    try {
      const { group } = await fixture.createNodes(1);
      await core.createNamespacedPod({
        namespace,
        body: gpuPodSpec('normal', group, { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1000' }),
      });
      // Looks again as soon as the fixture's store sees the pod change; the poll stays as the fallback.
      const onNormal: Wake = (recheck) =>
        fixture.server!.cache.onPodChange((pod) => {
          if (pod.metadata?.namespace === namespace && pod.metadata.name === 'normal') recheck();
        });
      await eventually(
        'the pod allocated',
        async () => {
          const pod = await core.readNamespacedPod({ name: 'normal', namespace });
          return pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION] === 'success'
            ? true
            : notYet(await podStory(core, namespace, 'normal', pod));
        },
        30_000,
        100,
        onNormal,
      );
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const text = await scrapeMetrics(fixture.server?.metricsPort ?? 0);
      for (const name of [
        'vgpu_warden_bind_duration_seconds_count{outcome="success"}',
        'vgpu_warden_filter_duration_seconds_count',
        'vgpu_warden_extender_request_seconds_count{verb="bind",phase="handle"}',
        'vgpu_warden_lock_acquisitions_total{outcome="acquired"}',
        'vgpu_warden_sweep_passes_total{result="ok"}',
      ]) {
        expect(sample(text, name), name).to.be.greaterThan(0);
      }
      for (const name of [
        'vgpu_warden_admission_duration_seconds',
        'vgpu_warden_lock_releases_total',
        'vgpu_warden_node_locks_held',
        'vgpu_warden_sweep_duration_seconds',
        'vgpu_warden_lock_contentions_total',
      ]) {
        expect(text, name).to.include(`# TYPE ${name} `);
      }
      const events = (await core.listNamespacedEvent({ namespace })).items.filter(
        (event) => event.involvedObject.name === 'normal',
      );
      // kube-scheduler records Scheduled; HAMi's FilteringSucceed and BindingSucceed only with
      // SUCCESS_EVENTS=true (hami-metrics.test.ts).
      expect(events.map((event) => event.reason))
        .to.include('Scheduled')
        .and.not.include('BindingSucceed')
        .and.not.include('FilteringSucceed')
        .and.not.include('BindingFailed');
    } finally {
      await fixture.stop();
    }
  });
});
