import { expect } from 'chai';
import { pino } from 'pino';
import type { LockClassification } from '../../../src/lock/lock-rules.js';
import type { LockEvent } from '../../../src/lock/lock-events.js';
import { parseLockValue } from '../../../src/lock/lock-value.js';
import type { EventTarget } from '../../../src/telemetry/events.js';
import { LockTelemetry, type EventSink } from '../../../src/telemetry/lock-telemetry.js';
import { WardenMetrics } from '../../../src/telemetry/metrics.js';

interface Recorded {
  target: EventTarget;
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

/** An in-memory stand-in for our EventRecorder: keeps what would have been written. */
class RecordingEvents implements EventSink {
  readonly recorded: Recorded[] = [];
  record(target: EventTarget, type: 'Normal' | 'Warning', reason: string, message: string): void {
    this.recorded.push({ target, type, reason, message });
  }
}

const MINUTE = 60_000;
const POD = { namespace: 'team-a', name: 'trainer-0' };
const HOLDER = '2026-11-30T12:00:00Z,team-a,trainer-0';

function setup(overrides: { repeatMs?: number } = {}) {
  const metrics = new WardenMetrics({ processMetrics: false });
  const events = new RecordingEvents();
  const lines: Record<string, unknown>[] = [];
  const log = pino(
    { level: 'debug' },
    {
      write: (line: string) => {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      },
    },
  );
  let now = 1_000_000;
  const telemetry = new LockTelemetry({
    metrics,
    events,
    log,
    now: () => now,
    ...(overrides.repeatMs === undefined ? {} : { stalledRepeatMs: overrides.repeatMs }),
  });
  return {
    metrics,
    events,
    lines,
    telemetry,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

async function sample(metrics: WardenMetrics, line: string): Promise<boolean> {
  return (await metrics.text()).split('\n').includes(line);
}

const held: LockClassification = { state: 'held', reason: 'bind-in-progress', ageMs: 4_200 };
const stalled = (ageMs = 7 * MINUTE): LockEvent => ({
  type: 'stalled',
  node: 'gpu-1',
  holder: HOLDER,
  holderValue: parseLockValue(HOLDER),
  ageMs,
});

describe('LockTelemetry', () => {
  it('counts an acquisition and a takeover, one log line each naming node, pod and the replaced holder', async () => {
    const { metrics, lines, telemetry } = setup();
    telemetry.onLockEvent({ type: 'acquired', node: 'gpu-1', pod: POD, value: HOLDER, attempts: 1 });
    telemetry.onLockEvent({
      type: 'acquired',
      node: 'gpu-2',
      pod: POD,
      value: HOLDER,
      attempts: 2,
      replaced: {
        value: '2026-11-30T11:00:00Z,team-b,gone',
        reason: 'owner-not-found',
        parsed: parseLockValue('2026-11-30T11:00:00Z,team-b,gone'),
      },
    });
    telemetry.onLockEvent({ type: 'reentrant', node: 'gpu-1', pod: POD, value: HOLDER, previous: HOLDER });

    expect(await sample(metrics, 'vgpu_warden_lock_acquisitions_total{outcome="acquired"} 1')).to.equal(true);
    expect(await sample(metrics, 'vgpu_warden_lock_acquisitions_total{outcome="taken-over"} 1')).to.equal(true);
    expect(await sample(metrics, 'vgpu_warden_lock_acquisitions_total{outcome="reentrant"} 1')).to.equal(true);
    expect(lines).to.have.length(3);
    expect(lines[0]).to.deep.include({
      component: 'lock',
      event: 'acquired',
      node: 'gpu-1',
      pod: 'team-a/trainer-0',
      outcome: 'acquired',
    });
    expect(lines[1]).to.deep.include({
      event: 'acquired',
      node: 'gpu-2',
      outcome: 'taken-over',
      previousHolder: 'team-b/gone',
      reason: 'owner-not-found',
    });
    expect(lines[2]).to.deep.include({ event: 'reentrant', node: 'gpu-1', pod: 'team-a/trainer-0' });
  });

  it('counts a release by reason and path, logs it once and records NodeLockReleased on the node', async () => {
    const { metrics, events, lines, telemetry } = setup();
    telemetry.onLockEvent({
      type: 'released',
      node: 'gpu-1',
      value: HOLDER,
      parsed: parseLockValue(HOLDER),
      reason: 'owner-not-found',
      path: 'sweeper',
      ageMs: 6 * MINUTE + 2_000,
    });

    expect(
      await sample(metrics, 'vgpu_warden_lock_releases_total{reason="owner-not-found",path="sweeper"} 1'),
    ).to.equal(true);
    expect(lines).to.have.length(1);
    expect(lines[0]).to.deep.include({
      level: 30,
      event: 'released',
      node: 'gpu-1',
      holder: 'team-a/trainer-0',
      reason: 'owner-not-found',
      path: 'sweeper',
      ageSeconds: 362,
      value: HOLDER,
    });
    expect(events.recorded).to.have.length(1);
    const [event] = events.recorded;
    expect(event?.target).to.deep.equal({ kind: 'Node', name: 'gpu-1', uid: 'gpu-1' });
    expect(event?.type).to.equal('Normal');
    expect(event?.reason).to.equal('NodeLockReleased');
    expect(event?.message)
      .to.include('pod team-a/trainer-0')
      .and.include('owner-not-found')
      .and.include('after 6m2s')
      .and.include('the lock sweeper');
  });

  it('names legacy and malformed holders in release events and logs them with holder null', () => {
    const { events, lines, telemetry } = setup();
    telemetry.onLockEvent({
      type: 'released',
      node: 'gpu-1',
      value: '2026-11-30T12:00:00Z',
      parsed: parseLockValue('2026-11-30T12:00:00Z'),
      reason: 'legacy-expired',
      path: 'takeover',
      ageMs: 10 * MINUTE,
    });
    telemetry.onLockEvent({
      type: 'released',
      node: 'gpu-2',
      value: 'garbage',
      parsed: parseLockValue('garbage'),
      reason: 'malformed',
      path: 'watch',
      ageMs: undefined,
    });
    telemetry.onLockEvent({
      type: 'released',
      node: 'gpu-3',
      value: HOLDER,
      parsed: parseLockValue(HOLDER),
      reason: 'owner-request',
      path: 'bind-failure',
      ageMs: 1000,
    });
    expect(lines.map((line) => line.holder)).to.deep.equal([null, null, 'team-a/trainer-0']);
    expect(events.recorded[0]?.message).to.include('a legacy lock without owner').and.include('the next bind');
    expect(events.recorded[1]?.message).to.include('an unreadable lock value ("garbage")').and.not.include(' after ');
    expect(events.recorded[2]?.message).to.include('owner-request').and.include('the failed bind');
  });

  it('counts a contention and logs the holder and its state, without an Event', async () => {
    const { metrics, events, lines, telemetry } = setup();
    telemetry.onLockEvent({
      type: 'contention',
      node: 'gpu-1',
      pod: { namespace: 'team-b', name: 'late' },
      holder: HOLDER,
      holderValue: parseLockValue(HOLDER),
      classification: held,
    });
    expect(await sample(metrics, 'vgpu_warden_lock_contentions_total 1')).to.equal(true);
    expect(lines).to.have.length(1);
    expect(lines[0]).to.deep.include({
      event: 'contention',
      node: 'gpu-1',
      pod: 'team-b/late',
      holder: 'team-a/trainer-0',
      state: 'held',
      reason: 'bind-in-progress',
      ageSeconds: 4.2,
    });
    expect(events.recorded).to.deep.equal([]);
  });

  it('reports a stalled lock: a metric, a warning line and NodeLockStalled on the node and on the holder pod', async () => {
    const { metrics, events, lines, telemetry } = setup();
    telemetry.onLockEvent(stalled());
    expect(await sample(metrics, 'vgpu_warden_stalled_lock_reports_total 1')).to.equal(true);
    expect(lines).to.have.length(1);
    expect(lines[0]).to.deep.include({
      level: 40,
      event: 'stalled',
      node: 'gpu-1',
      holder: 'team-a/trainer-0',
      reason: 'awaiting-allocation-past-expiry',
      ageSeconds: 420,
    });
    expect(events.recorded.map((event) => [event.target, event.type, event.reason])).to.deep.equal([
      [{ kind: 'Node', name: 'gpu-1', uid: 'gpu-1' }, 'Warning', 'NodeLockStalled'],
      [{ kind: 'Pod', namespace: 'team-a', name: 'trainer-0' }, 'Warning', 'NodeLockStalled'],
    ]);
    expect(events.recorded[0]?.message)
      .to.include('pod team-a/trainer-0')
      .and.include('7m')
      .and.include('NODELOCK_FORCE_AFTER');
    expect(events.recorded[1]?.message).to.include('node gpu-1');
  });

  it('a stall past NODELOCK_FORCE_AFTER with the force withheld (kubelet may still admit it later) says so in its line and its Events', () => {
    const { events, lines, telemetry } = setup();
    telemetry.onLockEvent({
      type: 'stalled',
      node: 'gpu-1',
      holder: HOLDER,
      holderValue: parseLockValue(HOLDER),
      ageMs: 7 * MINUTE,
      forceWithheld: 'kubelet-queue',
    });
    expect(lines[0]).to.deep.include({ event: 'stalled', forceWithheld: 'kubelet-queue' });
    expect(events.recorded[0]?.message)
      .to.include('NODELOCK_FORCE_AFTER has passed but is withheld')
      .and.include('has not renewed its Lease');
    expect(events.recorded[1]?.message).to.include('withheld');
  });

  it('puts the holder pod uid on its event when a resolver knows it', () => {
    const events = new RecordingEvents();
    const telemetry = new LockTelemetry({
      metrics: new WardenMetrics({ processMetrics: false }),
      events,
      podUid: () => 'uid-123',
    });
    telemetry.onLockEvent(stalled());
    expect(events.recorded[1]?.target).to.deep.equal({
      kind: 'Pod',
      namespace: 'team-a',
      name: 'trainer-0',
      uid: 'uid-123',
    });
  });

  it('a lock stalled for 4.5 min of sweeps is one warning and one pair of Events, while every report still counts', async () => {
    const { metrics, events, lines, telemetry, advance } = setup();
    for (let pass = 0; pass < 10; pass++) {
      telemetry.onLockEvent(stalled(7 * MINUTE + pass * 30_000));
      advance(30_000);
    }
    expect(events.recorded).to.have.length(2);
    expect(lines).to.have.length(1);
    expect(lines[0]).to.deep.include({ level: 40, event: 'stalled', node: 'gpu-1' });
    expect(await sample(metrics, 'vgpu_warden_stalled_lock_reports_total 10')).to.equal(true);
  });

  it('reminds with backoff: after 5 min, 10 more, 20 more, then every 30 min, each line saying for how long and what it left out', () => {
    const { events, lines, telemetry, advance } = setup();
    // A sweep every 30 s for 2 hours.
    for (let elapsed = 0; elapsed <= 120 * MINUTE; elapsed += 30_000) {
      telemetry.onLockEvent(stalled(6 * MINUTE + elapsed));
      advance(30_000);
    }
    const messages = lines.map((line) => line.msg);
    expect(messages).to.deep.equal([
      'lock on node gpu-1 held by team-a/trainer-0 is stalled',
      'lock on node gpu-1 held by team-a/trainer-0 is still stalled (for 5m; 9 reports not logged)',
      'lock on node gpu-1 held by team-a/trainer-0 is still stalled (for 15m; 19 reports not logged)',
      'lock on node gpu-1 held by team-a/trainer-0 is still stalled (for 35m; 39 reports not logged)',
      'lock on node gpu-1 held by team-a/trainer-0 is still stalled (for 65m; 59 reports not logged)',
      'lock on node gpu-1 held by team-a/trainer-0 is still stalled (for 95m; 59 reports not logged)',
    ]);
    expect(lines[1]).to.deep.include({ level: 40, event: 'stalled', reminder: true, unlogged: 9, stalledSeconds: 300 });
    // Each announcement also goes to the recorder, which counts them on the same two Events.
    expect(events.recorded).to.have.length(12);
    expect(events.recorded[2]?.message).to.include('11m old');
  });

  it('announces each node and each lock value on its own; a new value on the node ends the old stall with a line', () => {
    const { events, lines, telemetry } = setup({ repeatMs: 60_000 });
    telemetry.onLockEvent(stalled());
    telemetry.onLockEvent({ ...stalled(), node: 'gpu-2' });
    telemetry.onLockEvent({
      type: 'stalled',
      node: 'gpu-1',
      holder: '2026-11-30T12:05:00Z,team-a,trainer-1',
      holderValue: parseLockValue('2026-11-30T12:05:00Z,team-a,trainer-1'),
      ageMs: 6 * MINUTE,
    });
    telemetry.onLockEvent(stalled());
    expect(
      events.recorded.filter((event) => event.target.kind === 'Node').map((event) => event.target.name),
    ).to.deep.equal(['gpu-1', 'gpu-2', 'gpu-1', 'gpu-1']);
    expect(lines.map((line) => [line.event, line.node, line.holder])).to.deep.equal([
      ['stalled', 'gpu-1', 'team-a/trainer-0'],
      ['stalled', 'gpu-2', 'team-a/trainer-0'],
      ['stall-ended', 'gpu-1', 'team-a/trainer-0'],
      ['stalled', 'gpu-1', 'team-a/trainer-1'],
      ['stall-ended', 'gpu-1', 'team-a/trainer-1'],
      ['stalled', 'gpu-1', 'team-a/trainer-0'],
    ]);
  });

  it('a release of a stalled lock says how long it was stalled, and a later stall of the node is announced anew', () => {
    const { lines, telemetry, advance } = setup();
    telemetry.onLockEvent(stalled());
    advance(12 * MINUTE);
    telemetry.onLockEvent({
      type: 'released',
      node: 'gpu-1',
      value: HOLDER,
      parsed: parseLockValue(HOLDER),
      reason: 'forced-after-stall',
      path: 'sweeper',
      ageMs: 19 * MINUTE,
    });
    expect(lines[1]).to.deep.include({ event: 'released', node: 'gpu-1', wasStalled: true, stalledSeconds: 720 });
    expect(lines[1]?.msg).to.equal('lock on node gpu-1 released by sweeper: forced-after-stall (stalled for 12m)');
    telemetry.onLockEvent(stalled());
    expect(lines[2]).to.deep.include({ level: 40, event: 'stalled' });
    expect(lines[2]).not.to.have.property('reminder');
  });

  it('a complete sweep that no longer finds a stalled lock ends it with one line; an unchecked node keeps it', () => {
    const { lines, telemetry, advance } = setup();
    telemetry.onLockEvent(stalled());
    telemetry.onLockEvent({ ...stalled(), node: 'gpu-2' });
    telemetry.onLockEvent({ ...stalled(), node: 'gpu-3' });
    advance(3 * MINUTE);
    telemetry.sweepCompleted({ stalled: [{ node: 'gpu-2', value: HOLDER }], unchecked: new Set(['gpu-3']) });
    expect(lines.slice(3)).to.have.length(1);
    expect(lines[3]).to.deep.include({
      level: 30,
      event: 'stall-ended',
      node: 'gpu-1',
      holder: 'team-a/trainer-0',
      wasStalled: true,
      stalledSeconds: 180,
    });
    expect(lines[3]?.msg).to.equal(
      'lock on node gpu-1 held by team-a/trainer-0 is no longer stalled (stalled for 3m): gone or replaced outside vgpu-warden',
    );
    telemetry.sweepCompleted({ stalled: [], unchecked: new Set() });
    expect(lines.slice(4).map((line) => line.node)).to.deep.equal(['gpu-2', 'gpu-3']);
    // Ended stalls are forgotten: nothing more to say.
    telemetry.sweepCompleted({ stalled: [], unchecked: new Set() });
    expect(lines).to.have.length(6);
  });

  it('a lock released by the device plugin after stalling says so once', () => {
    const { lines, telemetry, advance } = setup();
    telemetry.onLockEvent(stalled());
    advance(MINUTE);
    telemetry.recordExternalRelease('gpu-1', HOLDER);
    expect(lines[1]?.msg).to.equal(
      'lock on node gpu-1 released outside vgpu-warden (held by team-a/trainer-0) (stalled for 60s)',
    );
    telemetry.sweepCompleted({ stalled: [], unchecked: new Set() });
    expect(lines).to.have.length(2);
  });

  it('counts a lock that vanished without us under path device-plugin and logs it, without an Event', async () => {
    const { metrics, events, lines, telemetry } = setup();
    telemetry.recordExternalRelease('gpu-1', HOLDER);
    expect(await sample(metrics, 'vgpu_warden_lock_releases_total{reason="external",path="device-plugin"} 1')).to.equal(
      true,
    );
    expect(lines[0]).to.deep.include({
      event: 'released',
      node: 'gpu-1',
      holder: 'team-a/trainer-0',
      reason: 'external',
      path: 'device-plugin',
    });
    expect(events.recorded).to.deep.equal([]);
  });

  it('works with metrics only (no events, no logger)', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    const telemetry = new LockTelemetry({ metrics });
    telemetry.onLockEvent(stalled());
    telemetry.onLockEvent({
      type: 'released',
      node: 'gpu-1',
      value: HOLDER,
      parsed: parseLockValue(HOLDER),
      reason: 'owner-terminal',
      path: 'watch',
      ageMs: 1,
    });
    expect(await sample(metrics, 'vgpu_warden_lock_releases_total{reason="owner-terminal",path="watch"} 1')).to.equal(
      true,
    );
  });

  it('quotes a huge lock value in Events and logs by a short prefix, never whole', () => {
    const { events, lines, telemetry } = setup();
    const huge = `2026-11-30T12:00:00Z,ns,${'a'.repeat(250_000)}`;
    telemetry.onLockEvent({
      type: 'released',
      node: 'gpu-1',
      value: huge,
      parsed: parseLockValue(huge),
      reason: 'malformed',
      path: 'sweeper',
      ageMs: undefined,
    });
    expect(events.recorded).to.have.length(1);
    expect(events.recorded[0]?.message).to.match(
      /^Released the node lock of an unreadable lock value \("2026-11-30T12:00:00Z,ns,a+…"\): malformed/,
    );
    expect(events.recorded[0]?.message.length).to.be.below(400);
    expect(JSON.stringify(lines).length).to.be.below(2_000);
  });
});
