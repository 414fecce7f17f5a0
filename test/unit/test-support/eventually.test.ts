import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import { eventually, EventuallyTimeoutError, notYet, wakeOn } from '../../support/eventually.js';

describe('eventually (test support)', () => {
  it('answers the first value that is not notYet', async () => {
    let calls = 0;
    const value = await eventually(
      'the third call',
      () => Promise.resolve(++calls === 3 ? 'done' : notYet(`call ${calls}`)),
      1_000,
      1,
    );
    expect(value).to.equal('done');
    expect(calls).to.equal(3);
  });

  it('gives up naming what it waited for, what it saw last and how often it looked', async () => {
    let calls = 0;
    const error = await eventually(
      'the pod to be bound',
      () => Promise.resolve(notYet(`Pending, unbound (look ${++calls})`)),
      50,
      5,
    ).then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(error).to.be.instanceOf(EventuallyTimeoutError);
    const message = (error as Error).message;
    expect(message).to.match(
      new RegExp(
        /^timed out after 50 ms waiting for the pod to be bound \(\d+ checks\); /.source +
          /last seen: Pending, unbound \(look \d+\)$/.source,
      ),
    );
    expect(message).to.include(`look ${calls})`);
  });

  it('keeps the last error as the cause, beside the last observation before it', async () => {
    let calls = 0;
    const error = await eventually(
      'x',
      () => (++calls === 1 ? Promise.resolve(notYet('first look')) : Promise.reject(new Error('connection refused'))),
      30,
      5,
    ).then(
      () => undefined,
      (reason: unknown) => reason as Error,
    );
    expect(error?.message).to.include('last seen: first look; last error: connection refused');
    expect((error?.cause as Error).message).to.equal('connection refused');
  });

  it('says so when no check ever answered', async () => {
    const error = await eventually('x', () => Promise.reject(new Error('down')), 20, 5).then(
      () => undefined,
      (reason: unknown) => reason as Error,
    );
    expect(error?.message).to.include('last seen: no check answered; last error: down');
  });

  it('clips a long observation', async () => {
    const error = await eventually('x', () => Promise.resolve(notYet('y'.repeat(10_000))), 10, 5).then(
      () => undefined,
      (reason: unknown) => reason as Error,
    );
    expect(error?.message.length).to.be.below(2_200);
    expect(error?.message).to.include('(8000 more chars)');
  });

  it('re-checks at once when the wake source fires, instead of at the next poll', async () => {
    const emitter = new EventEmitter();
    let ready = false;
    setTimeout(() => {
      ready = true;
      emitter.emit('data');
    }, 20);
    // The poll alone would look again only after a minute, far past the test's timeout.
    await eventually(
      'the flag',
      () => Promise.resolve(ready ? true : notYet('not set')),
      120_000,
      60_000,
      wakeOn(emitter, 'data'),
    );
    expect(emitter.listenerCount('data'), 'unsubscribed').to.equal(0);
  });

  it('does not miss a wake that fires while a check is running', async () => {
    const emitter = new EventEmitter();
    let calls = 0;
    await eventually(
      'the second call',
      async () => {
        calls++;
        if (calls === 1) emitter.emit('data');
        return Promise.resolve(calls >= 2 ? true : notYet('first'));
      },
      120_000,
      60_000,
      wakeOn(emitter, 'data'),
    );
    expect(calls).to.equal(2);
  });
});
