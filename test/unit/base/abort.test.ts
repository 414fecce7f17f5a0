import { expect } from 'chai';
import { abortReason, sleep, timeoutSignal, until, untilAborted } from '../../../src/base/abort.js';
import { WardenError } from '../../../src/base/errors.js';

describe('abort helpers', () => {
  it('until settles like the promise while the signal stays quiet', async () => {
    expect(await until(Promise.resolve(7), new AbortController().signal)).to.equal(7);
    const failed = await until(Promise.reject(new Error('boom')), new AbortController().signal).catch(
      (error: unknown) => error,
    );
    expect((failed as Error).message).to.equal('boom');
  });

  it('until rejects with the abort reason at once, also when aborted before the call', async () => {
    const controller = new AbortController();
    const pending = until(new Promise<never>(() => undefined), controller.signal);
    controller.abort(new Error('deadline'));
    expect(((await pending.catch((error: unknown) => error)) as Error).message).to.equal('deadline');
    const late = await until(Promise.resolve(1), controller.signal).catch((error: unknown) => error);
    expect((late as Error).message).to.equal('deadline');
  });

  it('until leaves no unhandled rejection when the losing promise rejects later', async () => {
    const unhandled: unknown[] = [];
    const record = (reason: unknown) => {
      unhandled.push(reason);
    };
    process.on('unhandledRejection', record);
    try {
      const controller = new AbortController();
      controller.abort(new Error('gone'));
      let rejectLater: (error: Error) => void = () => undefined;
      const loser = new Promise<never>((_resolve, reject) => {
        rejectLater = reject;
      });
      await until(loser, controller.signal).catch(() => undefined);
      rejectLater(new Error('late'));
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).to.deep.equal([]);
    } finally {
      process.off('unhandledRejection', record);
    }
  });

  it('untilAborted resolves once the signal aborts, and at once for a signal aborted already', async () => {
    const controller = new AbortController();
    let resolved = false;
    const waiting = untilAborted(controller.signal).then(() => {
      resolved = true;
    });
    await Promise.resolve();
    expect(resolved).to.equal(false);
    controller.abort(new Error('stop'));
    await waiting;
    expect(resolved).to.equal(true);
    await untilAborted(controller.signal);
  });

  it('abortReason turns a non-Error reason into a WardenError carrying it', () => {
    const controller = new AbortController();
    controller.abort('just because');
    const reason = abortReason(controller.signal);
    expect(reason).to.be.instanceOf(WardenError);
    expect(reason.cause).to.equal('just because');
  });

  it('timeoutSignal aborts with its error, and clear stops it', async () => {
    const fired = timeoutSignal(5, () => new Error('late'));
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect((fired.signal.reason as Error).message).to.equal('late');
    const cleared = timeoutSignal(5, () => new Error('late'));
    cleared.clear();
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(cleared.signal.aborted).to.equal(false);
  });

  it('sleep with a signal rejects with an AbortError carrying the reason when the signal aborts', async () => {
    const controller = new AbortController();
    const sleeping = sleep(60_000, controller.signal);
    controller.abort(new Error('stop'));
    const error = (await sleeping.catch((reason: unknown) => reason)) as Error;
    expect(error.name).to.equal('AbortError');
    expect((error.cause as Error).message).to.equal('stop');
  });
});
