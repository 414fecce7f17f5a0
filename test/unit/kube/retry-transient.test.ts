import { ApiException } from '@kubernetes/client-node';
import { expect } from 'chai';
import { isTransientApiError } from '../../../src/kube/errors.js';
import { untilNotTransient } from '../../../src/kube/retry-transient.js';

const api = (code: number) => new ApiException(code, `HTTP ${code}`, {}, {});

describe('untilNotTransient (start-up retries)', () => {
  it('tells transient failures (no answer, 408, 429, 5xx, also as a cause) from definite ones', () => {
    expect(isTransientApiError(new Error('fetch failed: other side closed'))).to.equal(true);
    for (const code of [408, 429, 500, 502, 503]) expect(isTransientApiError(api(code)), String(code)).to.equal(true);
    for (const code of [401, 403, 404, 422]) expect(isTransientApiError(api(code)), String(code)).to.equal(false);
    expect(isTransientApiError(new Error('cannot read secret', { cause: api(403) }))).to.equal(false);
    expect(isTransientApiError(new Error('cannot read secret', { cause: api(503) }))).to.equal(true);
  });

  it('counts an unwritable or missing local file as definite, also as a cause: retrying will not make CERT_DIR writable', () => {
    const fileError = (code: string) => Object.assign(new Error(`${code}: mkdir 'webhook-certs'`), { code });
    for (const code of ['EACCES', 'EROFS', 'ENOENT', 'ENOSPC']) {
      expect(isTransientApiError(new Error('cannot create webhook-certs', { cause: fileError(code) })), code).to.equal(
        false,
      );
    }
    // Network failures carry codes too, and stay transient.
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EAI_AGAIN'])
      expect(isTransientApiError(fileError(code)), code).to.equal(true);
  });

  it('retries a transient failure with growing pauses and returns the first success', async () => {
    const pauses: number[] = [];
    let calls = 0;
    const result = await untilNotTransient(
      () => (++calls < 4 ? Promise.reject(new Error('reset')) : Promise.resolve('ok')),
      {
        deadlineMs: 60_000,
        onRetry: () => undefined,
        sleep: (ms) => {
          pauses.push(ms);
          return Promise.resolve();
        },
        now: () => 0,
      },
    );
    expect(result).to.equal('ok');
    expect(pauses).to.deep.equal([500, 1000, 2000]);
  });

  it('gives up at once on a definite failure, and after the deadline on a transient one', async () => {
    let calls = 0;
    const forbidden = await untilNotTransient(
      () => {
        calls++;
        return Promise.reject(api(403));
      },
      { deadlineMs: 60_000, onRetry: () => undefined, sleep: () => Promise.resolve() },
    ).catch((error: unknown) => error);
    expect(forbidden).to.be.instanceOf(ApiException);
    expect(calls).to.equal(1);
    let clock = 0;
    const down = await untilNotTransient(() => Promise.reject(new Error('refused')), {
      deadlineMs: 10_000,
      onRetry: () => undefined,
      sleep: (ms) => {
        clock += ms;
        return Promise.resolve();
      },
      now: () => clock,
    }).catch((error: unknown) => error);
    expect((down as Error).message).to.equal('refused');
    expect(clock).to.be.at.most(10_000);
  });

  it('ends at once when the stop signal aborts, during a pause or during an attempt', async () => {
    const duringPause = new AbortController();
    let calls = 0;
    const started = Date.now();
    const paused = untilNotTransient(
      () => {
        calls++;
        return Promise.reject(new Error('refused'));
      },
      {
        deadlineMs: 60_000,
        signal: duringPause.signal,
        onRetry: () => {
          setImmediate(() => {
            duringPause.abort(new Error('SIGTERM received'));
          });
        },
      },
    ).catch((error: unknown) => error);
    expect(((await paused) as Error).message).to.equal('SIGTERM received');
    expect(calls).to.equal(1);
    expect(Date.now() - started).to.be.below(400);

    const duringAttempt = new AbortController();
    const hanging = untilNotTransient(() => new Promise<never>(() => undefined), {
      deadlineMs: 60_000,
      signal: duringAttempt.signal,
      onRetry: () => undefined,
    }).catch((error: unknown) => error);
    duringAttempt.abort(new Error('SIGINT received'));
    expect(((await hanging) as Error).message).to.equal('SIGINT received');
  });
});
