import { expect } from 'chai';
import { Lifecycle } from '../../../src/lifecycle/lifecycle.js';
import { untilAborted } from '../../../src/base/abort.js';
import type { Leadership, Runnable } from '../../../src/lifecycle/runnable.js';

/** Leadership by hand: elect() starts a term, lose() ends it. */
class ScriptedLeadership implements Leadership {
  private term: AbortController | undefined;
  private readonly listeners = new Set<(term: AbortSignal) => void>();

  onElected(elected: (term: AbortSignal) => void): () => void {
    this.listeners.add(elected);
    if (this.term) elected(this.term.signal);
    return () => {
      this.listeners.delete(elected);
    };
  }

  elect(): void {
    this.term = new AbortController();
    for (const listener of this.listeners) listener(this.term.signal);
  }

  lose(): void {
    this.term?.abort(new Error('lease lost'));
    this.term = undefined;
  }
}

/** A runnable that records its runs: 'start' when started, 'stop: <reason>' once its signal aborts. */
function recording(name: string, needsLeader = false): Runnable & { log: string[] } {
  const log: string[] = [];
  return {
    name,
    needsLeader,
    log,
    start: async (signal) => {
      log.push('start');
      await untilAborted(signal);
      log.push(`stop: ${(signal.reason as Error).message}`);
    },
  };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('Lifecycle runnables', () => {
  it('starts a runnable at once and stops it with the others, last started first, waiting until it has stopped', async () => {
    const order: string[] = [];
    const lifecycle = new Lifecycle({ boundMs: 1_000 });
    lifecycle.defer('connections', () => {
      order.push('connections');
    });
    const cache = recording('cluster cache');
    lifecycle.run(cache);
    lifecycle.run({
      name: 'keeper',
      start: async (signal) => {
        await untilAborted(signal);
        await new Promise((resolve) => setTimeout(resolve, 20));
        order.push('keeper stopped');
      },
    });
    expect(cache.log).to.deep.equal(['start']);
    expect(await lifecycle.stopAll()).to.deep.equal({ timedOut: false, unfinished: [] });
    expect(order).to.deep.equal(['keeper stopped', 'connections']);
    expect(cache.log).to.deep.equal(['start', 'stop: cluster cache is stopping']);
  });

  it('a start that throws fails the start-up; a runnable that fails or ends on its own is reported', async () => {
    const problems: string[] = [];
    const lifecycle = new Lifecycle({
      onRunProblem: (part, problem) => {
        problems.push(`${part}: ${problem}`);
      },
    });
    expect(() => {
      lifecycle.run({
        name: 'bad schedule',
        start: () => {
          throw new Error('invalid cron');
        },
      });
    }).to.throw('invalid cron');
    lifecycle.run({ name: 'watch', start: () => Promise.reject(new Error('watch broke')) });
    lifecycle.run({ name: 'quitter', start: () => Promise.resolve() });
    await tick();
    expect(problems).to.deep.equal(['watch: watch broke', 'quitter: stopped before it was asked to']);
    expect(await lifecycle.stopAll()).to.deep.equal({ timedOut: false, unfinished: [] });
  });

  it('starts a runnable that needs a leader on election and stops it when the term ends, once per term', async () => {
    const leadership = new ScriptedLeadership();
    const lifecycle = new Lifecycle({ leadership });
    const sweeper = recording('lock sweeper', true);
    const everywhere = recording('pod watch');
    lifecycle.run(sweeper);
    lifecycle.run(everywhere);
    await tick();
    expect(sweeper.log, 'not leading yet').to.deep.equal([]);
    expect(everywhere.log).to.deep.equal(['start']);

    leadership.elect();
    await tick();
    expect(sweeper.log).to.deep.equal(['start']);
    leadership.lose();
    await tick();
    expect(sweeper.log).to.deep.equal(['start', 'stop: lease lost']);

    leadership.elect();
    await tick();
    expect(sweeper.log).to.have.length(3);
    expect(await lifecycle.stopAll()).to.deep.equal({ timedOut: false, unfinished: [] });
    expect(sweeper.log).to.deep.equal(['start', 'stop: lease lost', 'start', 'stop: lock sweeper is stopping']);
    leadership.lose();
    leadership.elect();
    await tick();
    expect(sweeper.log, 'never started again after the stop').to.have.length(4);
  });

  it('starts at once a runnable that needs a leader when already leading, or when there is no election', async () => {
    const leadership = new ScriptedLeadership();
    leadership.elect();
    const elected = new Lifecycle({ leadership });
    const sweeper = recording('lock sweeper', true);
    elected.run(sweeper);
    await tick();
    expect(sweeper.log).to.deep.equal(['start']);
    await elected.stopAll();

    const alone = new Lifecycle();
    const single = recording('lock sweeper', true);
    alone.run(single);
    await tick();
    expect(single.log).to.deep.equal(['start']);
    await alone.stopAll();
    expect(single.log).to.have.length(2);
  });

  it('a new term waits for the last term’s run to have stopped: two runs never overlap', async () => {
    const leadership = new ScriptedLeadership();
    const lifecycle = new Lifecycle({ leadership });
    let running = 0;
    let most = 0;
    lifecycle.run({
      name: 'slow to stop',
      needsLeader: true,
      start: async (signal) => {
        running++;
        most = Math.max(most, running);
        await untilAborted(signal);
        await new Promise((resolve) => setTimeout(resolve, 30));
        running--;
      },
    });
    leadership.elect();
    await tick();
    leadership.lose();
    leadership.elect();
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(running).to.equal(1);
    expect(most).to.equal(1);
    await lifecycle.stopAll();
    expect(running).to.equal(0);
  });
});
