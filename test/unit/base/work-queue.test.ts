import { expect } from 'chai';
import { WorkQueue, type WorkQueueOptions } from '../../../src/base/work-queue.js';

/** Time the test moves by hand: the queue's pauses end only when `advance` passes them. */
class FakeTime {
  now = 0;
  private timers: { at: number; resolve: () => void; signal: AbortSignal }[] = [];

  readonly sleep = (ms: number, signal: AbortSignal): Promise<void> =>
    new Promise((resolve, reject) => {
      const timer = { at: this.now + ms, resolve, signal };
      this.timers.push(timer);
      signal.addEventListener(
        'abort',
        () => {
          this.timers = this.timers.filter((other) => other !== timer);
          reject(new Error('aborted'));
        },
        { once: true },
      );
    });

  readonly clock = (): number => this.now;

  /** Pauses not yet over and not cancelled. */
  get pending(): number {
    return this.timers.length;
  }

  /** Moves time on, ending every pause due by then, and lets what they start run. */
  async advance(ms: number): Promise<void> {
    this.now += ms;
    const due = this.timers.filter((timer) => timer.at <= this.now);
    this.timers = this.timers.filter((timer) => timer.at > this.now);
    for (const timer of due) timer.resolve();
    await settle();
  }
}

/** Lets every promise callback queued so far run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

/** A run that lasts until the test ends it. */
interface Run {
  key: string;
  signal: AbortSignal;
  end: () => void;
}

function harness(options: Partial<WorkQueueOptions<string>> & { hold?: boolean } = {}) {
  const time = new FakeTime();
  const runs: Run[] = [];
  const started: string[] = [];
  const active = new Map<string, number>();
  let overlapped = false;
  const queue = new WorkQueue<string>({
    sleep: time.sleep,
    clock: time.clock,
    process: (key, signal) => {
      started.push(key);
      const now = (active.get(key) ?? 0) + 1;
      if (now > 1) overlapped = true;
      active.set(key, now);
      const finish = () => {
        active.set(key, (active.get(key) ?? 1) - 1);
      };
      if (options.hold !== true) {
        finish();
        return;
      }
      return new Promise<void>((resolve) => {
        runs.push({
          key,
          signal,
          end: () => {
            finish();
            resolve();
          },
        });
      });
    },
    ...options,
  });
  /** Ends the oldest run still going, and lets the queue hand out the next key. */
  const endRun = async (key?: string) => {
    const at = key === undefined ? 0 : runs.findIndex((run) => run.key === key);
    const [run] = runs.splice(at, 1);
    expect(run, `a run of ${key ?? 'any key'} in progress`).to.not.equal(undefined);
    run?.end();
    await settle();
  };
  return {
    queue,
    time,
    runs,
    started,
    endRun,
    overlapped: () => overlapped,
    inProgress: () => runs.map((run) => run.key),
  };
}

describe("WorkQueue (the one keyed work queue: client-go's rate-limiting delaying queue)", () => {
  it('starts a key at once when a worker is free, before add returns', () => {
    const { queue, started } = harness();
    queue.add('a');
    expect(started).to.deep.equal(['a']);
  });

  it('queues a key once however often it is added while it waits', async () => {
    const { queue, started, endRun } = harness({ hold: true });
    queue.add('a');
    queue.add('b');
    queue.add('b');
    queue.add('c');
    queue.add('b');
    expect(queue.length).to.equal(2);
    await endRun();
    await endRun();
    await endRun();
    expect(started).to.deep.equal(['a', 'b', 'c']);
    expect(queue.length).to.equal(0);
  });

  it('runs a key added while it is processed once more after that run, never two runs at once', async () => {
    const { queue, started, endRun, overlapped, inProgress } = harness({ hold: true, workers: 4 });
    queue.add('a');
    queue.add('a');
    queue.add('a');
    expect(inProgress(), 'a second worker does not take the same key').to.deep.equal(['a']);
    expect(queue.length, 'owed a run, not waiting for a worker').to.equal(0);
    await endRun();
    expect(started).to.deep.equal(['a', 'a']);
    await endRun();
    expect(started, 'the adds during one run owe one run').to.deep.equal(['a', 'a']);
    expect(overlapped()).to.equal(false);
  });

  it('processes at most `workers` keys at once, in the order they became ready', async () => {
    const { queue, started, endRun, inProgress } = harness({ hold: true, workers: 2 });
    for (const key of ['a', 'b', 'c', 'd']) queue.add(key);
    expect(inProgress()).to.deep.equal(['a', 'b']);
    expect(queue.length).to.equal(2);
    await endRun('b');
    expect(inProgress()).to.deep.equal(['a', 'c']);
    await endRun('a');
    expect(inProgress()).to.deep.equal(['c', 'd']);
    await endRun();
    await endRun();
    expect(started).to.deep.equal(['a', 'b', 'c', 'd']);
  });

  it('addAfter runs a key once its delay has passed', async () => {
    const { queue, time, started } = harness();
    queue.addAfter('a', 100);
    await time.advance(99);
    expect(started).to.deep.equal([]);
    await time.advance(1);
    expect(started).to.deep.equal(['a']);
    expect(time.pending).to.equal(0);
  });

  it('addAfter of a key already delayed keeps the earlier time, and runs it once', async () => {
    const { queue, time, started } = harness();
    queue.addAfter('sooner', 100);
    queue.addAfter('sooner', 50);
    queue.addAfter('later', 50);
    queue.addAfter('later', 100);
    expect(time.pending, 'the replaced delay is cancelled').to.equal(2);
    await time.advance(50);
    expect(started).to.deep.equal(['sooner', 'later']);
    await time.advance(100);
    expect(started).to.deep.equal(['sooner', 'later']);
  });

  it('addAfter with no delay is add; a delayed key added meanwhile runs now and again when due', async () => {
    const { queue, time, started } = harness();
    queue.addAfter('a', 0);
    expect(started).to.deep.equal(['a']);
    await settle();
    queue.addAfter('b', 10);
    queue.add('b');
    expect(started).to.deep.equal(['a', 'b']);
    await time.advance(10);
    expect(started).to.deep.equal(['a', 'b', 'b']);
  });

  it('retries a key with its own growing backoff until forget starts it over', async () => {
    const at: number[] = [];
    const box: { queue?: WorkQueue<string> } = {};
    const { queue, time } = harness({
      backoff: { initialMs: 10, factor: 2, capMs: 40 },
      process: (key) => {
        at.push(time.now);
        if (key === 'a') box.queue?.addRateLimited(key);
      },
    });
    box.queue = queue;
    queue.add('a');
    for (let step = 0; step < 80; step += 5) await time.advance(5);
    expect(at, 'pauses of 10, 20, 40 and 40 (the cap)').to.deep.equal([0, 10, 30, 70]);
    expect(queue.retries('a')).to.equal(4);
    expect(queue.retries('b'), 'each key has its own').to.equal(0);
    queue.forget('a');
    expect(queue.retries('a')).to.equal(0);
    const now = time.now;
    queue.addRateLimited('a');
    await time.advance(10);
    expect(at.at(-1), 'the first pause again').to.equal(now + 10);
  });

  it('remove drops a delayed key (its pause cancelled), a waiting key, and the run a processed key was owed', async () => {
    const { queue, time, started, endRun } = harness({ hold: true });
    queue.addAfter('delayed', 10);
    expect(time.pending).to.equal(1);
    queue.remove('delayed');
    expect(time.pending).to.equal(0);
    queue.add('busy');
    queue.add('waiting');
    queue.remove('waiting');
    expect(queue.length).to.equal(0);
    queue.add('busy');
    queue.remove('busy');
    await endRun('busy');
    await time.advance(10);
    expect(started).to.deep.equal(['busy']);
    queue.remove('never-added');
  });

  it('passes a failed run to onError and goes on with the next key', async () => {
    const failures: string[] = [];
    const { queue, started } = harness({
      process: (key) => {
        started.push(key);
        if (key === 'sync') throw new Error('thrown');
        if (key === 'async') return Promise.reject(new Error('rejected'));
        return undefined;
      },
      onError: (key, error) => {
        failures.push(`${key}: ${(error as Error).message}`);
      },
    });
    queue.add('sync');
    queue.add('async');
    queue.add('fine');
    await settle();
    expect(started).to.deep.equal(['sync', 'async', 'fine']);
    expect(failures).to.deep.equal(['sync: thrown', 'async: rejected']);
    queue.add('sync');
    await settle();
    expect(started, 'a failed key can be added again').to.have.length(4);
  });

  it('shutDown drops waiting and delayed keys (their pauses cancelled), ignores adds, aborts runs and waits for them', async () => {
    const { queue, time, started, runs, endRun } = harness({ hold: true });
    queue.add('running');
    queue.add('waiting');
    queue.addAfter('delayed', 10);
    queue.addRateLimited('retried');
    expect(time.pending).to.equal(2);
    let drained = false;
    const shutDown = queue.shutDown().then(() => {
      drained = true;
    });
    expect(queue.shuttingDown).to.equal(true);
    expect(time.pending).to.equal(0);
    expect(queue.length).to.equal(0);
    expect(runs[0]?.signal.aborted, "the run's signal").to.equal(true);
    queue.add('late');
    queue.addAfter('late', 1);
    queue.addRateLimited('late');
    expect(time.pending).to.equal(0);
    await settle();
    expect(drained, 'a run is still going').to.equal(false);
    await endRun('running');
    await shutDown;
    await time.advance(100);
    expect(started).to.deep.equal(['running']);
    await queue.shutDown();
  });

  it('shuts down when its signal aborts, or at once when given an aborted one', async () => {
    const controller = new AbortController();
    const { queue, time, started } = harness({ signal: controller.signal });
    queue.addAfter('a', 10);
    controller.abort();
    expect(queue.shuttingDown).to.equal(true);
    expect(time.pending).to.equal(0);
    await time.advance(10);
    queue.add('b');
    expect(started).to.deep.equal([]);
    const born = harness({ signal: AbortSignal.abort() });
    born.queue.add('a');
    expect(born.started).to.deep.equal([]);
  });

  it('by default pauses with the one sleep, and shutDown clears its timer', async () => {
    const done: string[] = [];
    let ran: () => void = () => undefined;
    const first = new Promise<void>((resolve) => {
      ran = resolve;
    });
    const queue = new WorkQueue<string>({
      process: (key) => {
        done.push(key);
        ran();
      },
    });
    queue.addAfter('soon', 1);
    // A pause that would hold the test run for an hour were its timer left behind.
    queue.addAfter('an hour', 3_600_000);
    await first;
    expect(done).to.deep.equal(['soon']);
    await queue.shutDown();
  });
});
