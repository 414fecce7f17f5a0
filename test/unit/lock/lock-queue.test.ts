import { expect } from 'chai';
import { NodeLockQueue } from '../../../src/lock/lock-queue.js';

const settled = async (promise: Promise<void>) => {
  let done = false;
  void promise.then(() => {
    done = true;
  });
  await new Promise((resolve) => setImmediate(resolve));
  return done;
};

describe('NodeLockQueue (one FIFO of waiting binds per node)', () => {
  it('only the head is ready; leaving hands the turn to the next in arrival order', async () => {
    const queue = new NodeLockQueue();
    const first = queue.enter('n');
    const second = queue.enter('n');
    const third = queue.enter('n');
    expect(await settled(first.ready)).to.equal(true);
    expect(await settled(second.ready)).to.equal(false);
    first.leave();
    expect(await settled(second.ready)).to.equal(true);
    expect(await settled(third.ready)).to.equal(false);
    second.leave();
    expect(await settled(third.ready)).to.equal(true);
    third.leave();
    expect(queue.waiting('n')).to.equal(0);
  });

  it('a waiter that gives up before its turn leaves without waking anyone early; leave is idempotent', async () => {
    const queue = new NodeLockQueue();
    const head = queue.enter('n');
    const quitter = queue.enter('n');
    const last = queue.enter('n');
    quitter.leave();
    quitter.leave();
    expect(await settled(last.ready)).to.equal(false);
    head.leave();
    expect(await settled(last.ready)).to.equal(true);
  });

  it('nodes are independent', async () => {
    const queue = new NodeLockQueue();
    queue.enter('a');
    expect(await settled(queue.enter('b').ready)).to.equal(true);
  });
});
