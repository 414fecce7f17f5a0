import { KubeConfig } from '@kubernetes/client-node';
import { expect } from 'chai';
import {
  Reflector,
  ResourceExpiredError,
  type ListResult,
  type ListWatchSource,
  type ReflectorOptions,
  type WatchEventType,
  type WatchHandlers,
} from '../../../src/cluster/reflector.js';
import {
  kubeListWatchSource,
  ListWithoutVersionError,
  WatchFailedError,
} from '../../../src/cluster/kube-list-watch.js';

interface Item {
  metadata: { name: string; resourceVersion?: string };
}

const item = (name: string, resourceVersion?: string): Item => ({ metadata: { name, resourceVersion } });

/** Never settles and ignores its signal: the worst case a reflector has to stop through. */
const forever = <R>(): Promise<R> => new Promise<R>(() => undefined);

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

async function eventually(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (condition()) return;
    await tick();
  }
  throw new Error(`timed out waiting for ${what}`);
}

type ListStep = ListResult<Item> | Error | (() => Promise<ListResult<Item>>);
type WatchStep = (handlers: WatchHandlers<Item>, signal: AbortSignal) => Promise<void>;

/** Plays scripted LIST and WATCH outcomes in order; once a script runs out, calls hang forever. */
class FakeSource implements ListWatchSource<Item> {
  readonly lists: ListStep[] = [];
  readonly watches: WatchStep[] = [];
  listCalls = 0;
  readonly watchedFrom: string[] = [];

  list(): Promise<ListResult<Item>> {
    this.listCalls++;
    const step = this.lists.shift();
    if (step === undefined) return forever();
    if (step instanceof Error) return Promise.reject(step);
    if (typeof step === 'function') return step();
    return Promise.resolve(step);
  }

  watch(resourceVersion: string, handlers: WatchHandlers<Item>, signal: AbortSignal): Promise<void> {
    this.watchedFrom.push(resourceVersion);
    const step = this.watches.shift();
    return step === undefined ? forever() : step(handlers, signal);
  }
}

class FakeSink {
  readonly replaced: { names: string[]; resourceVersion: string }[] = [];
  readonly applied: { type: WatchEventType; name: string }[] = [];
  failReplace = 0;
  failApply = 0;

  replace(items: Item[], resourceVersion: string): void {
    this.replaced.push({ names: items.map((i) => i.metadata.name), resourceVersion });
    if (this.failReplace > 0) {
      this.failReplace--;
      throw new Error('replace exploded');
    }
  }

  apply(type: WatchEventType, object: Item): void {
    this.applied.push({ type, name: object.metadata.name });
    if (this.failApply > 0) {
      this.failApply--;
      throw new Error('apply exploded');
    }
  }
}

/**
 * Fake time. In auto mode a sleep advances the clock and resolves on the next turn of the event loop;
 * in hold mode it waits for release() and, like a careless implementation, ignores its signal.
 */
class FakeTime {
  now = 1_000;
  hold = false;
  readonly sleeps: number[] = [];
  private readonly held: { ms: number; resolve: () => void }[] = [];
  readonly clock = () => this.now;

  readonly sleep = (ms: number, signal: AbortSignal): Promise<void> => {
    this.sleeps.push(ms);
    if (this.hold) return new Promise((resolve) => this.held.push({ ms, resolve }));
    return new Promise((resolve, reject) => {
      setImmediate(() => {
        if (signal.aborted) {
          reject(signal.reason as Error);
          return;
        }
        this.now += ms;
        resolve();
      });
    });
  };

  get heldCount(): number {
    return this.held.length;
  }

  release(): void {
    const next = this.held.shift();
    if (next === undefined) throw new Error('no sleep is held');
    this.now += next.ms;
    next.resolve();
  }
}

function setup(options: { random?: number[] | number; reflector?: ReflectorOptions } = {}) {
  const source = new FakeSource();
  const sink = new FakeSink();
  const time = new FakeTime();
  const logs: { level: string; message: string }[] = [];
  const randoms = options.random;
  const random = Array.isArray(randoms) ? () => randoms.shift() ?? 0 : () => randoms ?? 0;
  const reflector = new Reflector<Item>({
    what: 'items',
    source,
    sink,
    clock: time.clock,
    sleep: time.sleep,
    random,
    log: (level, message) => logs.push({ level, message }),
    options: options.reflector,
  });
  return { source, sink, time, logs, reflector };
}

/** A watch script: deliver `events` (a string is a bookmark RV), then end normally. */
function emits(
  events: (Item | string | [WatchEventType, Item])[],
  end: () => Promise<void> = () => Promise.resolve(),
): WatchStep {
  return async (handlers) => {
    for (const event of events) {
      if (typeof event === 'string') handlers.onBookmark(event);
      else if (Array.isArray(event)) handlers.onEvent(event[0], event[1]);
      else handlers.onEvent('ADDED', event);
    }
    await end();
  };
}

/** Resolves with true when `promise` settles within `ms` real milliseconds. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => {
      resolve(false);
    }, ms);
  });
  const result = await Promise.race([promise.then(() => true), timeout]);
  clearTimeout(timer);
  return result;
}

describe('Reflector', () => {
  const stops: (() => Promise<void>)[] = [];
  afterEach(async () => {
    await Promise.all(stops.splice(0).map((stop) => stop()));
  });
  function started(fixture: ReturnType<typeof setup>): ReturnType<typeof setup> {
    fixture.reflector.start();
    stops.push(() => fixture.reflector.stop());
    return fixture;
  }

  it('abandons a LIST that never answers after listTimeoutMs and lists again (a silent connection must not stall the store)', async () => {
    const fixture = started(setup({ reflector: { listTimeoutMs: 30 } }));
    const { source, sink, reflector } = fixture;
    source.lists.push(forever, { items: [item('a')], resourceVersion: '5' });
    // Real time: the LIST timeout is a real timer.
    for (let waited = 0; waited < 2000 && !reflector.synced; waited += 5)
      await new Promise((resolve) => setTimeout(resolve, 5));
    expect(source.listCalls).to.be.at.least(2);
    expect(reflector.synced).to.equal(true);
    expect(sink.replaced).to.deep.equal([{ names: ['a'], resourceVersion: '5' }]);
  });

  it('is not synced while the first LIST failed, and syncs when the jittered retry succeeds', async () => {
    const fixture = setup({ random: 0.25 });
    const { source, sink, time, reflector, logs } = fixture;
    time.hold = true;
    source.lists.push(new Error('apiserver unavailable'), { items: [item('a'), item('b')], resourceVersion: '10' });
    expect(reflector.downSince).to.equal(undefined);
    started(fixture);
    expect(reflector.downSince).to.equal(1_000);

    await eventually(() => time.heldCount === 1, 'the backoff pause');
    expect(reflector.synced).to.equal(false);
    expect(sink.replaced).to.deep.equal([]);
    expect(time.sleeps).to.deep.equal([1_250]);
    expect(logs.some((l) => l.level === 'warn' && l.message.includes('apiserver unavailable'))).to.equal(true);

    time.release();
    await eventually(() => reflector.synced, 'the sync');
    expect(sink.replaced).to.deep.equal([{ names: ['a', 'b'], resourceVersion: '10' }]);
    expect(reflector.downSince).to.equal(undefined);
    expect(source.listCalls).to.equal(2);
    await eventually(() => source.watchedFrom.length === 1, 'the watch');
    expect(source.watchedFrom).to.deep.equal(['10']);
  });

  it('grows the LIST backoff ×2 with jitter and caps every pause at 30 s', async () => {
    const fixture = setup({ random: [0, 0.5, 1, 0, 0.5, 0, 0.9, 0] });
    const { source, time, reflector } = fixture;
    for (let i = 0; i < 8; i++) source.lists.push(new Error(`failure ${i}`));
    source.lists.push({ items: [], resourceVersion: '1' });
    started(fixture);

    await eventually(() => reflector.synced, 'the sync');
    // base 1, 2, 4, 8, 16, 30 (capped), 30, 30 s; times (1 + random); never above 30 s.
    expect(time.sleeps).to.deep.equal([1_000, 3_000, 8_000, 8_000, 24_000, 30_000, 30_000, 30_000]);
    expect(source.listCalls).to.equal(9);
  });

  it('relists at once after a 410 and hands the new full list to replace()', async () => {
    const fixture = setup();
    const { source, sink, time } = fixture;
    source.lists.push(
      { items: [item('a'), item('b')], resourceVersion: '10' },
      { items: [item('b'), item('c')], resourceVersion: '20' },
    );
    source.watches.push(
      emits([item('x', '11')], () => Promise.reject(new ResourceExpiredError('too old resource version: 11 (15)'))),
    );
    started(fixture);

    await eventually(() => source.watchedFrom.length === 2, 'the watch after the relist');
    expect(time.sleeps).to.deep.equal([]);
    expect(source.listCalls).to.equal(2);
    expect(sink.replaced).to.deep.equal([
      { names: ['a', 'b'], resourceVersion: '10' },
      { names: ['b', 'c'], resourceVersion: '20' },
    ]);
    expect(source.watchedFrom).to.deep.equal(['10', '20']);
  });

  it('re-watches from the last event or bookmark resourceVersion after a normal end, without relisting', async () => {
    const fixture = setup();
    const { source, sink, time, reflector } = fixture;
    source.lists.push({ items: [item('a')], resourceVersion: '10' });
    source.watches.push(
      emits([item('x', '11'), ['MODIFIED', item('x', '12')]]),
      // An object without a resourceVersion is applied but moves nothing; the bookmark does.
      emits([['DELETED', item('x')], '15']),
      emits(['17', item('y', '18'), '19']),
    );
    started(fixture);

    await eventually(() => source.watchedFrom.length === 4, 'the fourth watch');
    expect(source.watchedFrom).to.deep.equal(['10', '12', '15', '19']);
    expect(reflector.seenThrough, 'the store reflects the collection up to the last bookmark').to.equal('19');
    expect(source.listCalls).to.equal(1);
    expect(time.sleeps).to.deep.equal([]);
    expect(reflector.downSince).to.equal(undefined);
    expect(sink.applied).to.deep.equal([
      { type: 'ADDED', name: 'x' },
      { type: 'MODIFIED', name: 'x' },
      { type: 'DELETED', name: 'x' },
      { type: 'ADDED', name: 'y' },
    ]);
  });

  it('reports how far the store has seen: nothing before the first LIST, then the LIST, each event and bookmark', async () => {
    const fixture = setup();
    const { source, reflector } = fixture;
    expect(reflector.seenThrough).to.equal(undefined);
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let afterEvent: string | undefined;
    source.lists.push({ items: [item('a')], resourceVersion: '10' });
    source.watches.push(async (handlers) => {
      expect(reflector.seenThrough, 'after the LIST').to.equal('10');
      handlers.onEvent('ADDED', item('x', '14'));
      afterEvent = reflector.seenThrough;
      handlers.onBookmark('20');
      await held;
    });
    started(fixture);
    await eventually(() => reflector.seenThrough === '20', 'the bookmark');
    expect(afterEvent).to.equal('14');
    release();
  });

  it('an apiserver that stays unreachable is one warning line (not one per retry), failure tells why, and one info line marks the recovery', async () => {
    const fixture = setup({ reflector: { initialBackoffMs: 1_000, maxBackoffMs: 8_000 } });
    const { source, reflector, logs } = fixture;
    const refused = () =>
      new TypeError('fetch failed', {
        cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' }),
      });
    // Twelve failed LISTs over 71 s of (fake) backoff (1, 2, 4, then 8 s pauses), then the apiserver answers.
    for (let i = 0; i < 12; i++) source.lists.push(refused());
    source.lists.push({ items: [item('a')], resourceVersion: '10' });
    started(fixture);
    await eventually(() => source.listCalls === 12, 'the failing lists');
    expect(reflector.failure).to.equal(
      'apiserver unreachable (items list): fetch failed: connect ECONNREFUSED 127.0.0.1:6443',
    );
    await eventually(() => reflector.synced, 'the sync');
    expect(reflector.failure).to.equal(undefined);
    const warnings = logs.filter((l) => l.level === 'warn');
    expect(warnings.map((l) => l.message)).to.deep.equal([
      'apiserver unreachable (items list): fetch failed: connect ECONNREFUSED 127.0.0.1:6443',
      'apiserver unreachable (items list): fetch failed: connect ECONNREFUSED 127.0.0.1:6443 (still, for 63s; 9 more not logged)',
    ]);
    expect(logs.filter((l) => l.message.startsWith('recovered'))).to.deep.equal([
      { level: 'info', message: 'recovered after 79s: apiserver unreachable' },
    ]);
  });

  it('treats a watch that closes at once without events as a failure: pause, then relist', async () => {
    const fixture = setup();
    const { source, time, reflector, logs } = fixture;
    time.hold = true;
    source.lists.push({ items: [], resourceVersion: '10' }, { items: [], resourceVersion: '30' });
    source.watches.push(() => Promise.resolve());
    started(fixture);

    await eventually(() => time.heldCount === 1, 'the pause');
    expect(time.sleeps).to.deep.equal([1_000]);
    expect(reflector.downSince).to.equal(1_000);
    expect(logs.some((l) => l.message.includes('without events'))).to.equal(true);
    time.release();
    await eventually(() => source.watchedFrom.length === 2, 'the watch after the relist');
    expect(source.watchedFrom).to.deep.equal(['10', '30']);
    expect(reflector.downSince).to.equal(undefined);
  });

  it('sets downSince to the failure time on a watch error, keeps it through failed relists, clears it on recovery', async () => {
    const fixture = setup();
    const { source, time, reflector } = fixture;
    time.hold = true;
    source.lists.push({ items: [], resourceVersion: '10' }, new Error('still down'), {
      items: [item('a')],
      resourceVersion: '40',
    });
    source.watches.push(
      emits([item('x', '11')], () => {
        time.now = 5_000;
        return Promise.reject(new Error('connection reset'));
      }),
    );
    started(fixture);

    await eventually(() => time.heldCount === 1, 'the first pause');
    expect(reflector.downSince).to.equal(5_000);
    expect(reflector.synced).to.equal(true);
    time.release();
    await eventually(() => time.heldCount === 1, 'the pause after the failed relist');
    expect(reflector.downSince).to.equal(5_000);
    expect(time.sleeps).to.deep.equal([1_000, 2_000]);
    time.release();
    await eventually(() => source.watchedFrom.length === 2, 'the watch after recovery');
    expect(reflector.downSince).to.equal(undefined);
    expect(source.watchedFrom).to.deep.equal(['10', '40']);
  });

  it('resets the backoff after a watch that stayed healthy for backoffResetAfterMs', async () => {
    const fixture = setup({ reflector: { backoffResetAfterMs: 60_000 } });
    const { source, time } = fixture;
    for (let i = 0; i < 4; i++) source.lists.push({ items: [], resourceVersion: `${i}` });
    const failAfter = (ms: number): WatchStep =>
      emits([item('x', '1')], () => {
        time.now += ms;
        return Promise.reject(new Error('broken pipe'));
      });
    source.watches.push(failAfter(10), failAfter(10), failAfter(60_000));
    started(fixture);

    await eventually(() => source.watchedFrom.length === 4, 'the fourth watch');
    expect(time.sleeps).to.deep.equal([1_000, 2_000, 1_000]);
  });

  it('stops promptly during a LIST that ignores its signal', async () => {
    const fixture = setup();
    const { source, reflector } = fixture;
    reflector.start();
    await eventually(() => source.listCalls === 1, 'the list');
    expect(await settlesWithin(reflector.stop(), 200)).to.equal(true);
    expect(reflector.synced).to.equal(false);
    expect(source.listCalls).to.equal(1);
  });

  it('stops promptly during a watch, aborts its signal and drops events it delivers afterwards', async () => {
    const fixture = setup();
    const { source, sink, reflector } = fixture;
    source.lists.push({ items: [], resourceVersion: '10' });
    let late: WatchHandlers<Item> | undefined;
    let watchSignal: AbortSignal | undefined;
    source.watches.push((handlers, signal) => {
      late = handlers;
      watchSignal = signal;
      return forever();
    });
    reflector.start();
    await eventually(() => late !== undefined, 'the watch');
    expect(await settlesWithin(reflector.stop(), 200)).to.equal(true);
    expect(watchSignal?.aborted).to.equal(true);
    late?.onEvent('ADDED', item('zombie', '99'));
    expect(sink.applied).to.deep.equal([]);
    expect(reflector.downSince).to.equal(1_000);
    expect(source.listCalls).to.equal(1);
  });

  it('stops promptly during a backoff pause, even one that ignores its signal', async () => {
    const fixture = setup();
    const { source, time, reflector } = fixture;
    time.hold = true;
    source.lists.push(new Error('down'));
    reflector.start();
    await eventually(() => time.heldCount === 1, 'the pause');
    expect(await settlesWithin(reflector.stop(), 200)).to.equal(true);
    expect(source.listCalls).to.equal(1);
  });

  it('keeps running when the sink throws, and logs it', async () => {
    const fixture = setup();
    const { source, sink, reflector, logs } = fixture;
    sink.failReplace = 1;
    sink.failApply = 1;
    source.lists.push({ items: [item('a')], resourceVersion: '10' });
    source.watches.push(emits([item('x', '11'), item('y', '12')]));
    started(fixture);

    await eventually(() => source.watchedFrom.length === 2, 'the second watch');
    expect(reflector.synced).to.equal(true);
    expect(sink.applied.map((a) => a.name)).to.deep.equal(['x', 'y']);
    expect(source.watchedFrom).to.deep.equal(['10', '12']);
    expect(logs.filter((l) => l.level === 'warn' && l.message.includes('exploded'))).to.have.length(2);
  });

  it('waitForSync resolves false after the timeout and true once a LIST lands in time', async () => {
    const slow = setup();
    started(slow);
    expect(await slow.reflector.waitForSync(5_000)).to.equal(false);
    expect(slow.time.sleeps).to.deep.equal([5_000]);

    const fixture = setup();
    const { source, time, reflector } = fixture;
    time.hold = true;
    let answer: ((result: ListResult<Item>) => void) | undefined;
    source.lists.push(
      () =>
        new Promise((resolve) => {
          answer = resolve;
        }),
    );
    started(fixture);
    const waiting = reflector.waitForSync(5_000);
    await eventually(() => answer !== undefined, 'the list');
    answer?.({ items: [], resourceVersion: '1' });
    expect(await waiting).to.equal(true);
    expect(await reflector.waitForSync(1)).to.equal(true);
  });

  it('waitForSync resolves false as soon as the reflector stops', async () => {
    const fixture = setup();
    fixture.time.hold = true;
    fixture.reflector.start();
    const waiting = fixture.reflector.waitForSync(60_000);
    await fixture.reflector.stop();
    expect(await settlesWithin(waiting, 200)).to.equal(true);
    expect(await waiting).to.equal(false);
  });
});

/** Plays client-node's Watch: a failed request calls `done` before the returned promise resolves. */
class FakeWatcher {
  readonly calls: {
    path: string;
    query: Record<string, unknown>;
    send: (type: string, object: unknown) => void;
    done: (error: unknown) => void;
    controller: AbortController;
  }[] = [];
  failWith: unknown;

  watch(
    path: string,
    query: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    const controller = new AbortController();
    if (this.failWith !== undefined) {
      done(this.failWith);
      return Promise.resolve(controller);
    }
    this.calls.push({ path, query, send: callback, done, controller });
    return Promise.resolve(controller);
  }
}

describe('kubeListWatchSource', () => {
  function source(
    watcher: FakeWatcher,
    list?: () => Promise<{ items: Item[]; metadata?: { resourceVersion?: string } }>,
  ) {
    return kubeListWatchSource<Item>(
      new KubeConfig(),
      '/api/v1/pods',
      list ?? (() => Promise.resolve({ items: [], metadata: { resourceVersion: '5' } })),
      {
        random: () => 0.5,
        watcher,
      },
    );
  }
  const recorder = () => {
    const seen: string[] = [];
    const handlers: WatchHandlers<Item> = {
      onEvent: (type, object) => seen.push(`${type} ${object.metadata.name}`),
      onBookmark: (rv) => seen.push(`BOOKMARK ${rv}`),
    };
    return { seen, handlers };
  };

  it('lists with the resourceVersion from the list metadata and refuses a list without one', async () => {
    const watcher = new FakeWatcher();
    expect(await source(watcher).list(new AbortController().signal)).to.deep.equal({ items: [], resourceVersion: '5' });
    const error: unknown = await source(watcher, () => Promise.resolve({ items: [] }))
      .list(new AbortController().signal)
      .catch((e: unknown) => e);
    expect(error).to.be.instanceOf(ListWithoutVersionError);
  });

  it('lists page by page and applies the transform to every listed item as its page arrives and to every watched object', async () => {
    const watcher = new FakeWatcher();
    const pages: (string | undefined)[] = [];
    const transformed: string[] = [];
    const paged = kubeListWatchSource<Item>(
      new KubeConfig(),
      '/api/v1/pods',
      (page) => {
        pages.push(page.continueToken);
        return Promise.resolve(
          page.continueToken === undefined
            ? { items: [item('a', '1'), item('b', '2')], metadata: { resourceVersion: '9', _continue: 'second' } }
            : { items: [item('c', '3')], metadata: { resourceVersion: '9' } },
        );
      },
      {
        watcher,
        random: () => 0.5,
        pageSize: 2,
        transform: (object) => {
          transformed.push(object.metadata.name);
          return { ...object, metadata: { ...object.metadata, name: object.metadata.name.toUpperCase() } };
        },
      },
    );
    const listed = await paged.list(new AbortController().signal);
    expect(pages).to.deep.equal([undefined, 'second']);
    expect(listed.resourceVersion).to.equal('9');
    expect(listed.items.map((object) => object.metadata.name)).to.deep.equal(['A', 'B', 'C']);
    const { seen, handlers } = recorder();
    const watching = paged.watch('9', handlers, new AbortController().signal);
    await eventually(() => watcher.calls.length === 1, 'the watch request');
    watcher.calls[0]!.send('ADDED', item('d', '10'));
    watcher.calls[0]!.done(null);
    await watching;
    expect(seen).to.deep.equal(['ADDED D']);
    expect(transformed).to.deep.equal(['a', 'b', 'c', 'd']);
  });

  it('watches with bookmarks from the given resourceVersion, maps events and bookmarks, and ends on a normal close', async () => {
    const watcher = new FakeWatcher();
    const { seen, handlers } = recorder();
    const watching = source(watcher).watch('7', handlers, new AbortController().signal);
    await eventually(() => watcher.calls.length === 1, 'the watch request');
    const call = watcher.calls[0]!;
    expect(call.path).to.equal('/api/v1/pods');
    expect(call.query).to.deep.equal({ allowWatchBookmarks: true, resourceVersion: '7', timeoutSeconds: 450 });
    call.send('ADDED', item('a', '8'));
    call.send('MODIFIED', item('a', '9'));
    call.send('BOOKMARK', { metadata: { resourceVersion: '12' } });
    call.send('DELETED', item('a', '13'));
    call.send('SOMETHING-NEW', item('b'));
    call.done(null);
    await watching;
    expect(seen).to.deep.equal(['ADDED a', 'MODIFIED a', 'BOOKMARK 12', 'DELETED a']);
  });

  it('rejects with ResourceExpiredError on an ERROR event with a 410 Status, and closes the stream', async () => {
    const watcher = new FakeWatcher();
    const watching = source(watcher).watch('7', recorder().handlers, new AbortController().signal);
    await eventually(() => watcher.calls.length === 1, 'the watch request');
    watcher.calls[0]!.send('ERROR', {
      kind: 'Status',
      code: 410,
      reason: 'Expired',
      message: 'too old resource version: 7 (20)',
    });
    const error: unknown = await watching.catch((e: unknown) => e);
    expect(error).to.be.instanceOf(ResourceExpiredError);
    expect((error as Error).message).to.include('too old resource version');
    expect(watcher.calls[0]!.controller.signal.aborted).to.equal(true);
  });

  it('rejects with the Status message on any other ERROR event', async () => {
    const watcher = new FakeWatcher();
    const watching = source(watcher).watch('7', recorder().handlers, new AbortController().signal);
    await eventually(() => watcher.calls.length === 1, 'the watch request');
    watcher.calls[0]!.send('ERROR', { kind: 'Status', code: 500, reason: 'InternalError', message: 'etcd is sad' });
    const error: unknown = await watching.catch((e: unknown) => e);
    expect(error).to.be.instanceOf(WatchFailedError);
    expect((error as Error).message).to.include('etcd is sad');
  });

  it('maps an HTTP 410 to ResourceExpiredError and other HTTP errors to WatchFailedError', async () => {
    const gone = new FakeWatcher();
    gone.failWith = Object.assign(new Error('Gone'), { statusCode: 410 });
    expect(
      await source(gone)
        .watch('7', recorder().handlers, new AbortController().signal)
        .catch((e: unknown) => e),
    ).to.be.instanceOf(ResourceExpiredError);
    const forbidden = new FakeWatcher();
    forbidden.failWith = Object.assign(new Error('Forbidden'), { statusCode: 403 });
    const error: unknown = await source(forbidden)
      .watch('7', recorder().handlers, new AbortController().signal)
      .catch((e: unknown) => e);
    expect(error).to.be.instanceOf(WatchFailedError);
    expect((error as Error).message).to.include('403');
  });

  it('ends normally on the idle timeout of an open stream but fails on a connect timeout', async () => {
    const timeout = () => new DOMException('The operation was aborted due to timeout', 'TimeoutError');
    const idle = new FakeWatcher();
    const watching = source(idle).watch('7', recorder().handlers, new AbortController().signal);
    await eventually(() => idle.calls.length === 1, 'the watch request');
    await tick();
    idle.calls[0]!.done(timeout());
    await watching;

    const unreachable = new FakeWatcher();
    unreachable.failWith = timeout();
    expect(
      await source(unreachable)
        .watch('7', recorder().handlers, new AbortController().signal)
        .catch((e: unknown) => e),
    ).to.be.instanceOf(WatchFailedError);
  });

  it('aborts the stream when its signal aborts', async () => {
    const watcher = new FakeWatcher();
    const abort = new AbortController();
    const watching = source(watcher).watch('7', recorder().handlers, abort.signal);
    await eventually(() => watcher.calls.length === 1, 'the watch request');
    await tick();
    abort.abort(new Error('stopping'));
    expect(await watching.catch((e: unknown) => (e as Error).message)).to.equal('stopping');
    expect(watcher.calls[0]!.controller.signal.aborted).to.equal(true);
  });
});
