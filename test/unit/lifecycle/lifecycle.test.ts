import { expect } from 'chai';
import { Lifecycle, StartAborted } from '../../../src/lifecycle/lifecycle.js';

const never = new Promise<never>(() => undefined);

describe('Lifecycle (all-or-nothing start, bounded stop)', () => {
  it('stops parts last started first, each told the time left of the bound', async () => {
    const order: string[] = [];
    const lifecycle = new Lifecycle({ boundMs: 1_000 });
    lifecycle.defer('connections', () => {
      order.push('connections');
    });
    await lifecycle.step(
      'certificates',
      () => Promise.resolve('pem'),
      (value) => {
        order.push(`certificates:${value}`);
      },
    );
    lifecycle.defer('listeners', (remainingMs) => {
      order.push(`listeners:${remainingMs > 900 ? 'full bound' : 'less'}`);
    });
    const report = await lifecycle.stopAll();
    expect(order).to.deep.equal(['listeners:full bound', 'certificates:pem', 'connections']);
    expect(report).to.deep.equal({ timedOut: false, unfinished: [] });
    // Idempotent: nothing runs twice.
    await lifecycle.stopAll();
    expect(order).to.have.length(3);
  });

  it('ends a start step at once when the stop signal comes, and stops what that step starts late', async () => {
    const abort = new AbortController();
    const lifecycle = new Lifecycle({ signal: abort.signal, boundMs: 1_000 });
    let finishStart: (value: string) => void = () => undefined;
    const stopped: string[] = [];
    const step = lifecycle.step(
      'listener',
      () =>
        new Promise<string>((resolve) => {
          finishStart = resolve;
        }),
      (value) => {
        stopped.push(value);
      },
    );
    abort.abort();
    const error = await step.catch((caught: unknown) => caught);
    expect(error).to.be.instanceOf(StartAborted);
    expect(stopped).to.deep.equal([]);
    finishStart('late listener');
    await new Promise((resolve) => setImmediate(resolve));
    expect(stopped).to.deep.equal(['late listener']);
    expect(() => {
      lifecycle.checkpoint();
    }).to.throw(StartAborted);
  });

  it('never takes longer than the bound: a hanging part is left behind and the parts after it are still told to stop', async () => {
    const problems: string[] = [];
    const lifecycle = new Lifecycle({
      boundMs: 50,
      onStopProblem: (part, problem) => {
        problems.push(`${part}: ${problem}`);
      },
    });
    let cacheStopped = false;
    lifecycle.defer('cluster cache', () => {
      cacheStopped = true;
      return never;
    });
    lifecycle.defer('listeners', () => never);
    const started = Date.now();
    const report = await lifecycle.stopAll();
    expect(Date.now() - started).to.be.below(500);
    expect(report).to.deep.equal({ timedOut: true, unfinished: ['listeners', 'cluster cache'] });
    expect(cacheStopped).to.equal(true);
    expect(problems).to.have.length(1);
    expect(problems[0]).to.match(/^listeners: still stopping after \d+ ms; left behind$/);
  });

  it('a part with its own bound is skipped after it, and the others keep the rest of the total', async () => {
    const lifecycle = new Lifecycle({ boundMs: 2_000 });
    const told: number[] = [];
    lifecycle.defer('listeners', (remainingMs) => {
      told.push(remainingMs);
    });
    lifecycle.defer('leader election', () => never, { boundMs: 30 });
    const report = await lifecycle.stopAll();
    expect(report).to.deep.equal({ timedOut: false, unfinished: ['leader election'] });
    expect(told[0]).to.be.above(1_500);
  });

  it('reports a part whose stop throws, and goes on with the others', async () => {
    const lifecycle = new Lifecycle({ boundMs: 1_000 });
    let closed = false;
    lifecycle.defer('connections', () => {
      closed = true;
    });
    lifecycle.defer('keeper', () => {
      throw new Error('boom\nsecond line');
    });
    expect(await lifecycle.stopAll()).to.deep.equal({ timedOut: false, unfinished: ['keeper (boom)'] });
    expect(closed).to.equal(true);
  });
});
