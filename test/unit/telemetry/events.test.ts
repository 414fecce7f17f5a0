import {
  ApiException,
  type CoreV1ApiCreateNamespacedEventRequest,
  type CoreV1ApiPatchNamespacedEventRequest,
  type CoreV1Event,
} from '@kubernetes/client-node';
import { expect } from 'chai';
import {
  EventRecorder,
  EventRecorderSettingsError,
  type EventRecorderOptions,
  type EventTarget,
  type EventsApi,
  type ScheduleFn,
} from '../../../src/telemetry/events.js';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const POD: EventTarget = { kind: 'Pod', namespace: 'team-a', name: 'trainer-0', uid: 'uid-1' };

type Call =
  | { verb: 'create'; namespace: string; body: CoreV1Event }
  | { verb: 'patch'; namespace: string; name: string; body: { count: number; lastTimestamp: string; message: string } };

/** The events API as the recorder sees it: keeps every call, answers with what the test scripted. */
class FakeEventsApi implements EventsApi {
  readonly calls: Call[] = [];
  /** Errors for the next calls of each verb, in order; an empty list answers success. */
  readonly fail: { create: Error[]; patch: Error[] } = { create: [], patch: [] };
  private created = 0;

  createNamespacedEvent(param: CoreV1ApiCreateNamespacedEventRequest): Promise<CoreV1Event> {
    this.calls.push({ verb: 'create', namespace: param.namespace, body: param.body });
    const error = this.fail.create.shift();
    if (error !== undefined) return Promise.reject(error);
    this.created++;
    return Promise.resolve({ ...param.body, metadata: { ...param.body.metadata, name: `event-${this.created}` } });
  }

  patchNamespacedEvent(param: CoreV1ApiPatchNamespacedEventRequest): Promise<CoreV1Event> {
    this.calls.push({
      verb: 'patch',
      namespace: param.namespace,
      name: param.name,
      body: param.body as Extract<Call, { verb: 'patch' }>['body'],
    });
    const error = this.fail.patch.shift();
    if (error !== undefined) return Promise.reject(error);
    return Promise.resolve({ metadata: { name: param.name }, involvedObject: {} });
  }

  summary(): string[] {
    return this.calls.map((call) =>
      call.verb === 'create'
        ? `create ${call.body.reason ?? ''} x${call.body.count ?? 0}`
        : `patch ${call.name} x${call.body.count}`,
    );
  }
}

/** A clock and timers the test moves by hand. */
class ManualTime {
  now = 1_700_000_000_000;
  private readonly timers: { at: number; run: () => void; live: boolean }[] = [];

  readonly schedule: ScheduleFn = (run, delayMs) => {
    const timer = { at: this.now + delayMs, run, live: true };
    this.timers.push(timer);
    return {
      cancel: () => {
        timer.live = false;
      },
    };
  };

  get pendingTimers(): number {
    return this.timers.filter((timer) => timer.live).length;
  }

  /** Moves the clock, running each timer that falls due (and the writes it starts) in order. */
  async advance(ms: number): Promise<void> {
    const until = this.now + ms;
    for (;;) {
      const next = this.timers.filter((timer) => timer.live && timer.at <= until).sort((a, b) => a.at - b.at)[0];
      if (next === undefined) break;
      this.now = next.at;
      next.live = false;
      next.run();
      await settle();
    }
    this.now = until;
  }
}

/** Lets the fake API's promises and the recorder's continuations run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

function setup(options: EventRecorderOptions = {}) {
  const api = new FakeEventsApi();
  const time = new ManualTime();
  const lines: string[] = [];
  const recorder = new EventRecorder(api, 'vgpu-warden', (line) => lines.push(line), {
    clock: () => time.now,
    schedule: time.schedule,
    ...options,
  });
  return { api, time, lines, recorder };
}

const forbidden = () =>
  new ApiException(403, 'Forbidden', { reason: 'Forbidden', message: 'events "x" is forbidden: cannot patch' }, {});
const notFound = () =>
  new ApiException(404, 'Not Found', { reason: 'NotFound', message: 'events "event-1" not found' }, {});
const unavailable = () =>
  new ApiException(503, 'Service Unavailable', { reason: 'ServiceUnavailable', message: 'etcd is down' }, {});

describe('EventRecorder (aggregation as kube-scheduler records Events)', () => {
  it('10 FilteringFailed in one second are one Event: created at once, then one patch with count 10 and the latest message', async () => {
    const { api, time, recorder } = setup();
    for (let i = 1; i <= 10; i++) {
      recorder.record(POD, 'Warning', 'FilteringFailed', `no available node (attempt ${i})`);
      await time.advance(100);
      await settle();
    }
    expect(api.summary()).to.deep.equal(['create FilteringFailed x1']);
    const [created] = api.calls;
    expect(created?.verb === 'create' && created.body.involvedObject).to.deep.include({
      kind: 'Pod',
      namespace: 'team-a',
      name: 'trainer-0',
      uid: 'uid-1',
    });

    await time.advance(MINUTE);
    expect(api.summary()).to.deep.equal(['create FilteringFailed x1', 'patch event-1 x10']);
    const patch = api.calls[1];
    expect(patch?.verb === 'patch' && patch.body.message).to.equal('no available node (attempt 10)');
    expect(patch?.verb === 'patch' && patch.namespace).to.equal('team-a');
    // The last occurrence's time, not the time of the write.
    expect(patch?.verb === 'patch' && Date.parse(patch.body.lastTimestamp)).to.equal(1_700_000_000_000 + 900);
    expect(time.pendingTimers).to.equal(0);

    await time.advance(10 * MINUTE);
    expect(api.calls).to.have.length(2);
  });

  it('writes the same Event at most once per interval however long the burst lasts', async () => {
    const { api, time, recorder } = setup({ intervalMs: 30 * SECOND });
    // One occurrence per second for 5 minutes.
    for (let second = 0; second < 300; second++) {
      recorder.record(POD, 'Warning', 'FilteringFailed', 'no available node');
      await time.advance(SECOND);
    }
    await time.advance(MINUTE);
    expect(api.calls.length).to.be.at.most(11);
    const patches = api.calls.filter((call) => call.verb === 'patch');
    expect(patches.map((call) => call.body.count)).to.deep.equal([30, 60, 90, 120, 150, 180, 210, 240, 270, 300]);
    expect(api.calls.filter((call) => call.verb === 'create')).to.have.length(1);
  });

  it('a repeat after a quiet interval is patched at once (a stalled-lock reminder shows up when it happens)', async () => {
    const { api, time, recorder } = setup();
    recorder.record({ kind: 'Node', name: 'gpu-1', uid: 'gpu-1' }, 'Warning', 'NodeLockStalled', 'stalled for 6m');
    await settle();
    await time.advance(5 * MINUTE);
    recorder.record({ kind: 'Node', name: 'gpu-1', uid: 'gpu-1' }, 'Warning', 'NodeLockStalled', 'stalled for 11m');
    await settle();
    expect(api.summary()).to.deep.equal(['create NodeLockStalled x1', 'patch event-1 x2']);
    const [created, patched] = api.calls;
    expect(created?.namespace).to.equal('default');
    expect(patched?.verb === 'patch' && patched.body.message).to.equal('stalled for 11m');
  });

  it('keeps objects, reasons and types apart', async () => {
    const { api, recorder } = setup();
    recorder.record(POD, 'Warning', 'FilteringFailed', 'a');
    recorder.record(POD, 'Warning', 'BindingFailed', 'b');
    recorder.record(POD, 'Normal', 'FilteringFailed', 'c');
    recorder.record({ ...POD, name: 'trainer-1', uid: 'uid-2' }, 'Warning', 'FilteringFailed', 'd');
    // Same name, new incarnation of the pod: a different object.
    recorder.record({ ...POD, uid: 'uid-3' }, 'Warning', 'FilteringFailed', 'e');
    recorder.record({ kind: 'Node', name: 'trainer-0' }, 'Warning', 'FilteringFailed', 'f');
    await settle();
    expect(api.calls.map((call) => call.verb === 'create' && call.body.message)).to.deep.equal([
      'a',
      'b',
      'c',
      'd',
      'e',
      'f',
    ]);
    expect(recorder.size).to.equal(6);
  });

  it('folds occurrences that arrive while the create is under way into the next write', async () => {
    const { api, time, recorder } = setup();
    recorder.record(POD, 'Warning', 'FilteringFailed', 'first');
    // No settle: the create has not answered yet.
    recorder.record(POD, 'Warning', 'FilteringFailed', 'second');
    recorder.record(POD, 'Warning', 'FilteringFailed', 'third');
    await settle();
    expect(api.summary()).to.deep.equal(['create FilteringFailed x1']);
    await time.advance(MINUTE);
    expect(api.summary()).to.deep.equal(['create FilteringFailed x1', 'patch event-1 x3']);
  });

  it('stays bounded: the least recently seen Event is forgotten past maxEntries, and any after an idle hour', async () => {
    const { api, time, recorder } = setup({ maxEntries: 3 });
    for (let i = 0; i < 10; i++)
      recorder.record({ ...POD, name: `pod-${i}`, uid: `uid-${i}` }, 'Warning', 'FilteringFailed', 'x');
    await settle();
    expect(recorder.size).to.equal(3);
    // pod-0 was forgotten: its next occurrence is a new Event, not a patch.
    recorder.record({ ...POD, name: 'pod-0', uid: 'uid-0' }, 'Warning', 'FilteringFailed', 'x');
    await settle();
    expect(api.calls.filter((call) => call.verb === 'patch')).to.deep.equal([]);
    expect(api.calls).to.have.length(11);
    expect(recorder.size).to.equal(3);

    await time.advance(61 * MINUTE);
    recorder.record({ ...POD, name: 'pod-9', uid: 'uid-9' }, 'Warning', 'FilteringFailed', 'x');
    await settle();
    expect(recorder.size).to.equal(1);
    expect(api.calls.at(-1)?.verb).to.equal('create');
  });

  it('cancels the timer of a forgotten Event: no write for what it no longer holds', async () => {
    const { api, time, recorder } = setup({ maxEntries: 1 });
    recorder.record(POD, 'Warning', 'FilteringFailed', 'x');
    await settle();
    recorder.record(POD, 'Warning', 'FilteringFailed', 'x');
    expect(time.pendingTimers).to.equal(1);
    recorder.record({ ...POD, name: 'other', uid: 'uid-9' }, 'Warning', 'FilteringFailed', 'y');
    expect(time.pendingTimers).to.equal(0);
    await time.advance(2 * MINUTE);
    expect(api.summary()).to.deep.equal(['create FilteringFailed x1', 'create FilteringFailed x1']);
  });

  it('never throws on API failures, logs the first one and not the repeats, and one line when writes work again', async () => {
    const { api, time, lines, recorder } = setup();
    api.fail.create.push(unavailable(), unavailable(), unavailable());
    for (let i = 0; i < 3; i++) {
      expect(() => {
        recorder.record({ ...POD, name: `pod-${i}` }, 'Warning', 'FilteringFailed', 'x');
      }).not.to.throw();
      await settle();
    }
    expect(lines).to.have.length(1);
    expect(lines[0]).to.match(
      /^could not write Event FilteringFailed for Pod team-a\/pod-0: HTTP 503 ServiceUnavailable: etcd is down$/,
    );

    await time.advance(5 * SECOND);
    recorder.record({ ...POD, name: 'pod-9' }, 'Warning', 'FilteringFailed', 'x');
    await settle();
    expect(lines).to.have.length(2);
    expect(lines[1]).to.match(/^recovered after 5s: events not written$/);
  });

  it('retries a failed write once per interval, at most 3 times, and then gives those occurrences up', async () => {
    const { api, time, recorder } = setup();
    api.fail.create.push(unavailable(), unavailable(), unavailable(), unavailable());
    recorder.record(POD, 'Warning', 'FilteringFailed', 'x');
    await settle();
    await time.advance(10 * MINUTE);
    expect(api.summary()).to.deep.equal([
      'create FilteringFailed x1',
      'create FilteringFailed x1',
      'create FilteringFailed x1',
    ]);
    expect(time.pendingTimers).to.equal(0);
  });

  it('does not retry a write the apiserver refused for good (422)', async () => {
    const { api, time, recorder } = setup();
    api.fail.create.push(new ApiException(422, 'Unprocessable Entity', { reason: 'Invalid', message: 'bad' }, {}));
    recorder.record(POD, 'Warning', 'FilteringFailed', 'x');
    await settle();
    await time.advance(10 * MINUTE);
    expect(api.calls).to.have.length(1);
  });

  it('survives a synchronous throw from the API client', async () => {
    const { api, lines, recorder } = setup();
    api.createNamespacedEvent = () => {
      throw new TypeError('boom');
    };
    expect(() => {
      recorder.record(POD, 'Warning', 'FilteringFailed', 'x');
    }).not.to.throw();
    await settle();
    expect(lines).to.deep.equal(['could not write Event FilteringFailed for Pod team-a/trainer-0: boom']);
  });

  it('creates the Event again, with the whole count, when the one it patches is gone (404)', async () => {
    const { api, time, recorder } = setup();
    recorder.record(POD, 'Warning', 'FilteringFailed', 'x');
    await settle();
    recorder.record(POD, 'Warning', 'FilteringFailed', 'y');
    api.fail.patch.push(notFound());
    await time.advance(MINUTE);
    expect(api.summary()).to.deep.equal(['create FilteringFailed x1', 'patch event-1 x2', 'create FilteringFailed x2']);
    recorder.record(POD, 'Warning', 'FilteringFailed', 'z');
    await time.advance(MINUTE);
    expect(api.summary().at(-1)).to.equal('patch event-2 x3');
  });

  it('without patch rights (403) says so once and creates one Event per interval with the occurrences since the last', async () => {
    const { api, time, lines, recorder } = setup();
    recorder.record(POD, 'Warning', 'FilteringFailed', 'x');
    await settle();
    for (let i = 0; i < 4; i++) recorder.record(POD, 'Warning', 'FilteringFailed', 'y');
    api.fail.patch.push(forbidden());
    await time.advance(MINUTE);
    expect(api.summary()).to.deep.equal(['create FilteringFailed x1', 'patch event-1 x5', 'create FilteringFailed x4']);
    expect(lines).to.have.length(1);
    expect(lines[0]).to.include('cannot patch Events').and.include('grant "patch" on events');

    for (let i = 0; i < 2; i++) recorder.record(POD, 'Warning', 'FilteringFailed', 'z');
    await time.advance(MINUTE);
    // No patch is tried again.
    expect(api.summary().slice(3)).to.deep.equal(['create FilteringFailed x2']);
    const last = api.calls.at(-1);
    expect(last?.verb === 'create' && last.body.message).to.equal('z');
    expect(lines).to.have.length(1);
  });

  it('flush writes what the interval held back at once, and close leaves no timer and drops later records', async () => {
    const { api, time, recorder } = setup();
    recorder.record(POD, 'Warning', 'FilteringFailed', 'x');
    recorder.record(POD, 'Warning', 'FilteringFailed', 'x');
    await settle();
    expect(time.pendingTimers).to.equal(1);
    await recorder.close();
    expect(api.summary()).to.deep.equal(['create FilteringFailed x1', 'patch event-1 x2']);
    expect(time.pendingTimers).to.equal(0);
    recorder.record(POD, 'Warning', 'FilteringFailed', 'x');
    await settle();
    expect(api.calls).to.have.length(2);
  });

  it('clips a huge message before it leaves the process', async () => {
    const { api, recorder } = setup();
    recorder.record(POD, 'Warning', 'FilteringFailed', 'n'.repeat(100_000));
    await settle();
    const [created] = api.calls;
    expect(created?.verb === 'create' && created.body.message?.length).to.be.at.most(1025);
  });

  it('refuses settings that would make no sense, with one line naming the setting', () => {
    const api = new FakeEventsApi();
    expect(() => new EventRecorder(api, 'c', undefined, { intervalMs: 0 })).to.throw(
      EventRecorderSettingsError,
      'invalid EventRecorder intervalMs=0: must be a positive number',
    );
    expect(() => new EventRecorder(api, 'c', undefined, { intervalMs: 60_000, idleExpiryMs: 1000 })).to.throw(
      EventRecorderSettingsError,
      /idleExpiryMs=1000: must be at least intervalMs \(60000\)/,
    );
    expect(() => new EventRecorder(api, 'c', undefined, { maxEntries: Number.NaN })).to.throw(
      EventRecorderSettingsError,
      /maxEntries=NaN/,
    );
  });
});
