import { expect } from 'chai';
import { RefusalRequeue, type RefusedPod } from '../../../src/extender/refusal-requeue.js';

/** A store of node generations the test changes by hand, with the listeners RefusalRequeue subscribes. */
function harness(
  options: { pending?: (pod: RefusedPod) => boolean; failNudge?: boolean; windowMs?: number; maxPods?: number } = {},
) {
  const generations = new Map<string, number>([
    ['a', 1],
    ['b', 1],
    ['c', 1],
  ]);
  const listeners = new Set<(node: string) => void>();
  const nudged: string[] = [];
  const logged: string[] = [];
  let now = 0;
  const requeue = new RefusalRequeue({
    nodeGeneration: (node) => generations.get(node),
    onNodeChange: (listener) => {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
    stillPending: options.pending ?? (() => true),
    nudge: (pod) => {
      nudged.push(`${pod.namespace}/${pod.name}`);
      return options.failNudge === true ? Promise.reject(new Error('HTTP 409')) : Promise.resolve();
    },
    clock: () => now,
    windowMs: options.windowMs ?? 60_000,
    ...(options.maxPods === undefined ? {} : { maxPods: options.maxPods }),
    log: (line) => {
      logged.push(line);
    },
  });
  requeue.start();
  const change = (node: string, bump = true) => {
    if (bump) generations.set(node, (generations.get(node) ?? 0) + 1);
    for (const listener of [...listeners]) listener(node);
  };
  return {
    requeue,
    change,
    nudged,
    logged,
    listeners,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

const pod = (name: string): RefusedPod => ({ namespace: 'ns', name, uid: `uid-${name}` });

describe('RefusalRequeue: a pod refused everywhere is requeued once a refusing node changes', () => {
  it('nudges the pod once when a node that refused it changes, and not again', () => {
    const { requeue, change, nudged } = harness();
    requeue.noteRefusal(pod('p'), [
      ['a', 1],
      ['b', 1],
    ]);
    change('c');
    expect(nudged, 'a node that did not refuse it').to.deep.equal([]);
    change('b');
    change('a');
    expect(nudged).to.deep.equal(['ns/p']);
    expect(requeue.size).to.equal(0);
  });

  it('ignores a change that keeps the generation (a status heartbeat)', () => {
    const { requeue, change, nudged } = harness();
    requeue.noteRefusal(pod('p'), [['a', 1]]);
    change('a', false);
    expect(nudged).to.deep.equal([]);
    change('a');
    expect(nudged).to.deep.equal(['ns/p']);
  });

  it('nudges when a node refused as unseen appears', () => {
    const { requeue, change, nudged } = harness();
    requeue.noteRefusal(pod('p'), [['new', undefined]]);
    change('new');
    expect(nudged).to.deep.equal(['ns/p']);
  });

  it('does not nudge a pod that is no longer pending, nor after the window', () => {
    const bound = harness({ pending: () => false });
    bound.requeue.noteRefusal(pod('p'), [['a', 1]]);
    bound.change('a');
    expect(bound.nudged).to.deep.equal([]);
    const late = harness({ windowMs: 1_000 });
    late.requeue.noteRefusal(pod('p'), [['a', 1]]);
    late.advance(1_001);
    late.change('a');
    expect(late.nudged).to.deep.equal([]);
    expect(late.requeue.size).to.equal(0);
  });

  it('forgets a pod placed since, and keeps only the latest refusal of a pod', () => {
    const { requeue, change, nudged } = harness();
    requeue.noteRefusal(pod('p'), [['a', 1]]);
    requeue.forget('uid-p');
    change('a');
    requeue.noteRefusal(pod('q'), [['a', 2]]);
    requeue.noteRefusal(pod('q'), [['b', 1]]);
    change('a');
    expect(nudged).to.deep.equal([]);
    change('b');
    expect(nudged).to.deep.equal(['ns/q']);
  });

  it('watches at most maxPods refusals, dropping the oldest', () => {
    const { requeue, change, nudged } = harness({ maxPods: 2 });
    for (const name of ['p1', 'p2', 'p3']) requeue.noteRefusal(pod(name), [['a', 1]]);
    expect(requeue.size).to.equal(2);
    change('a');
    expect(nudged).to.deep.equal(['ns/p2', 'ns/p3']);
  });

  it('logs a failed nudge and carries on', async () => {
    const { requeue, change, nudged, logged } = harness({ failNudge: true });
    requeue.noteRefusal(pod('p'), [['a', 1]]);
    change('a');
    await new Promise((resolve) => setImmediate(resolve));
    expect(nudged).to.deep.equal(['ns/p']);
    expect(logged).to.have.length(1);
    expect(logged[0]).to.include('could not requeue ns/p after node a changed').and.include('HTTP 409');
  });

  it('unsubscribes and forgets everything on stop', () => {
    const { requeue, listeners } = harness();
    requeue.noteRefusal(pod('p'), [['a', 1]]);
    requeue.stop();
    expect(listeners.size).to.equal(0);
    expect(requeue.size).to.equal(0);
  });
});
