import type { CoreV1Event } from '@kubernetes/client-node';
import { expect } from 'chai';
import { pino } from 'pino';
import { KubeNodeLockApi } from '../../src/lock/kube-node-lock-api.js';
import { formatLockValue, type PodRef } from '../../src/lock/lock-value.js';
import { NodeLocks } from '../../src/lock/node-locks.js';
import { EventRecorder } from '../../src/telemetry/events.js';
import { sweepOnce } from '../../src/sweeper/sweep-pass.js';
import { LockTelemetry } from '../../src/telemetry/lock-telemetry.js';
import { WardenMetrics } from '../../src/telemetry/metrics.js';
import { createGpuNode, createPod, readLock, setLock } from '../support/lock-helpers.js';
import { describeEvents } from '../support/observations.js';
import { eventually, notYet, testCluster } from '../support/test-cluster.js';

const MINUTE = 60_000;

function lockValue(pod: PodRef, ageMs: number): string {
  return formatLockValue(new Date(Date.now() - ageMs), pod);
}

function setup(timing: { stalledRepeatMs?: number; eventIntervalMs?: number } = {}) {
  const { core } = testCluster();
  const metrics = new WardenMetrics({ processMetrics: false });
  const lines: Record<string, unknown>[] = [];
  const log = pino(
    { level: 'info' },
    {
      write: (line: string) => {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      },
    },
  );
  const recorderErrors: string[] = [];
  const events = new EventRecorder(core, 'vgpu-warden', (message) => recorderErrors.push(message), {
    intervalMs: timing.eventIntervalMs ?? MINUTE,
  });
  const telemetry = new LockTelemetry({
    metrics,
    log,
    events,
    ...(timing.stalledRepeatMs === undefined ? {} : { stalledRepeatMs: timing.stalledRepeatMs }),
  });
  const locks = new NodeLocks({
    api: new KubeNodeLockApi(core),
    config: { bindGraceMs: 60_000, expireMs: 5 * MINUTE },
    observer: telemetry,
  });
  return { core, metrics, lines, locks, recorderErrors, telemetry };
}

/** Events about one object, read back from the apiserver. */
async function eventsFor(
  namespace: string,
  kind: 'Node' | 'Pod',
  name: string,
  reason: string,
): Promise<CoreV1Event[]> {
  const list = await testCluster().core.listNamespacedEvent({
    namespace,
    fieldSelector: `involvedObject.kind=${kind},involvedObject.name=${name},reason=${reason}`,
  });
  return list.items;
}

async function eventuallyOne(
  namespace: string,
  kind: 'Node' | 'Pod',
  name: string,
  reason: string,
): Promise<CoreV1Event> {
  return eventually(
    `${reason} event on ${kind} ${name}`,
    async () =>
      (await eventsFor(namespace, kind, name, reason))[0] ??
      notYet(`no ${reason} yet; events on ${name}: ${await describeEvents(testCluster().core, namespace, name)}`),
    10_000,
  );
}

describe('LockTelemetry on a real apiserver', () => {
  it('a sweeper release writes NodeLockReleased on the node, a metric and one log line', async () => {
    const { core, metrics, lines, locks, recorderErrors } = setup();
    const { namespace } = testCluster();
    const node = await createGpuNode(core);
    const orphan = lockValue({ namespace, name: 'gone' }, 2 * MINUTE);
    await setLock(core, node, orphan);

    const result = await locks.releaseIfReleasable(node, 'sweeper');

    expect(result.outcome).to.equal('released');
    const event = await eventuallyOne('default', 'Node', node, 'NodeLockReleased');
    expect(event.type).to.equal('Normal');
    expect(event.involvedObject).to.deep.include({ kind: 'Node', name: node, uid: node });
    expect(event.message)
      .to.include(`pod ${namespace}/gone`)
      .and.include('owner-not-found')
      .and.include('the lock sweeper');
    expect(event.source?.component).to.equal('vgpu-warden');
    expect(await metrics.text()).to.include(
      'vgpu_warden_lock_releases_total{reason="owner-not-found",path="sweeper"} 1',
    );
    expect(lines).to.have.length(1);
    expect(lines[0]).to.deep.include({
      event: 'released',
      node,
      holder: `${namespace}/gone`,
      reason: 'owner-not-found',
      path: 'sweeper',
      value: orphan,
    });
    expect(recorderErrors).to.deep.equal([]);
  });

  it('a takeover by acquire records the release of the old holder and the acquisition', async () => {
    const { core, metrics, lines, locks } = setup();
    const { namespace } = testCluster();
    const node = await createGpuNode(core);
    const pod = await createPod(core, namespace, 'next');
    await setLock(core, node, lockValue({ namespace, name: 'finished' }, MINUTE));

    const result = await locks.acquire(node, pod);

    expect(result.outcome).to.equal('taken-over');
    const event = await eventuallyOne('default', 'Node', node, 'NodeLockReleased');
    expect(event.message).to.include(`pod ${namespace}/finished`).and.include('the next bind');
    const text = await metrics.text();
    expect(text).to.include('vgpu_warden_lock_releases_total{reason="owner-not-found",path="takeover"} 1');
    expect(text).to.include('vgpu_warden_lock_acquisitions_total{outcome="taken-over"} 1');
    expect(lines.map((line) => line.event)).to.deep.equal(['released', 'acquired']);
  });

  it('a stalled lock writes NodeLockStalled on the node and on the holder pod, and one warning, however many sweeps see it', async () => {
    const { core, metrics, lines, locks, recorderErrors } = setup();
    const { namespace } = testCluster();
    const node = await createGpuNode(core);
    const stuck = await createPod(core, namespace, 'stuck', { nodeName: node, bindPhase: 'allocating' });
    const value = lockValue(stuck, 6 * MINUTE);
    await setLock(core, node, value);

    // Three sweeps in a row, as a sweeper every 30 s would make within the interval.
    for (let pass = 0; pass < 3; pass++)
      expect((await locks.releaseIfReleasable(node, 'sweeper')).outcome).to.equal('kept');

    const onNode = await eventuallyOne('default', 'Node', node, 'NodeLockStalled');
    const onPod = await eventuallyOne(namespace, 'Pod', 'stuck', 'NodeLockStalled');
    expect(onNode.type).to.equal('Warning');
    expect(onNode.message).to.include(`pod ${namespace}/stuck`).and.include('NODELOCK_EXPIRE');
    expect(onPod.type).to.equal('Warning');
    expect(onPod.involvedObject).to.deep.include({ kind: 'Pod', namespace, name: 'stuck' });
    expect(onPod.message).to.include(`node ${node}`);
    expect(await readLock(core, node)).to.equal(value);
    expect(await metrics.text()).to.include('vgpu_warden_stalled_lock_reports_total 3');
    expect(lines.filter((line) => line.event === 'stalled')).to.have.length(1);
    // The recorder writes asynchronously: give any duplicate time to land before counting.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await eventsFor('default', 'Node', node, 'NodeLockStalled')).to.have.length(1);
    expect(await eventsFor(namespace, 'Pod', 'stuck', 'NodeLockStalled')).to.have.length(1);
    expect(recorderErrors).to.deep.equal([]);
  });

  it('a reminder for a lock still stalled counts on the same Event; a sweep that finds it gone ends it with one line', async () => {
    const { core, lines, locks, recorderErrors, telemetry } = setup({ stalledRepeatMs: 1_000, eventIntervalMs: 1_000 });
    const { namespace } = testCluster();
    const node = await createGpuNode(core);
    const stuck = await createPod(core, namespace, 'stuck', { nodeName: node, bindPhase: 'allocating' });
    await setLock(core, node, lockValue(stuck, 6 * MINUTE));
    const sweep = () =>
      sweepOnce({
        targets: { lockedNodes: () => [node] },
        locks,
        concurrency: 1,
        observer: telemetry,
      });

    expect((await sweep()).stalled).to.have.length(1);
    await eventuallyOne('default', 'Node', node, 'NodeLockStalled');
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect((await sweep()).stalled).to.have.length(1);

    const counted = await eventually(
      'the node Event to count the reminder',
      async () => {
        const items = await eventsFor('default', 'Node', node, 'NodeLockStalled');
        return items.length === 1 && items[0]?.count === 2
          ? items[0]
          : notYet(
              `${items.length} NodeLockStalled events, counts ${items.map((item) => item.count ?? 'none').join(', ') || 'none'}`,
            );
      },
      10_000,
      200,
    );
    expect(counted.message).to.include(`pod ${namespace}/stuck`);
    expect(lines.filter((line) => line.event === 'stalled').map((line) => line.reminder ?? false)).to.deep.equal([
      false,
      true,
    ]);

    // The device plugin's Allocate removes the lock; the next complete sweep notices.
    await setLock(core, node, null);
    await sweep();
    const ended = lines.filter((line) => line.event === 'stall-ended');
    expect(ended).to.have.length(1);
    expect(ended[0]).to.deep.include({ node, holder: `${namespace}/stuck`, wasStalled: true });
    await sweep();
    expect(lines.filter((line) => line.event === 'stall-ended')).to.have.length(1);
    expect(await eventsFor(namespace, 'Pod', 'stuck', 'NodeLockStalled')).to.have.length(1);
    expect(recorderErrors).to.deep.equal([]);
  });
});
