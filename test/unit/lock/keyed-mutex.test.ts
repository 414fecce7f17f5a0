import { expect } from 'chai';
import { KeyedMutex } from '../../../src/lock/keyed-mutex.js';

const tick = (ms = 5) => new Promise((resolve) => setTimeout(resolve, ms));

describe('KeyedMutex', () => {
  it('runs work on one key one at a time, in order', async () => {
    const mutex = new KeyedMutex();
    const log: string[] = [];
    await Promise.all(
      [1, 2, 3].map((n) =>
        mutex.run('node-a', async () => {
          log.push(`start ${n}`);
          await tick();
          log.push(`end ${n}`);
        }),
      ),
    );
    expect(log).to.deep.equal(['start 1', 'end 1', 'start 2', 'end 2', 'start 3', 'end 3']);
  });

  it('does not block work on another key (no global lock)', async () => {
    const mutex = new KeyedMutex();
    let releaseA: () => void = () => undefined;
    const holdingA = mutex.run(
      'node-a',
      () =>
        new Promise<void>((resolve) => {
          releaseA = resolve;
        }),
    );
    const onB = await mutex.run('node-b', () => Promise.resolve('b ran'));
    expect(onB).to.equal('b ran');
    releaseA();
    await holdingA;
  });

  it('keeps serving the key after a failure and forgets idle keys', async () => {
    const mutex = new KeyedMutex();
    const failed = await mutex.run('node-a', () => Promise.reject(new Error('boom'))).catch((error: unknown) => error);
    expect((failed as Error).message).to.equal('boom');
    expect(await mutex.run('node-a', () => Promise.resolve(42))).to.equal(42);
    expect(mutex.activeKeys).to.equal(0);
  });
});
