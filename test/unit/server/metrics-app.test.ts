import { request as httpRequest } from 'node:http';
import { expect } from 'chai';
import { startMetricsListener, type MetricsListener } from '../../../src/server/metrics-app.js';
import { WardenMetrics } from '../../../src/telemetry/metrics.js';
import { httpGet as get } from '../../support/http-get.js';

/** An exposition whose first piece is `first`, then the given rest. */
async function* pieces(first: Promise<string>, ...rest: string[]): AsyncGenerator<string> {
  yield await first;
  yield* rest;
}

describe('metrics listener', () => {
  let listener: MetricsListener | undefined;
  afterEach(async () => {
    await listener?.close();
    listener = undefined;
  });

  it('serves the registry on GET /metrics with its content type', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    metrics.observeSweep(0.5, 'ok');
    listener = await startMetricsListener({ host: '127.0.0.1', port: 0, metrics });
    const answer = await get(listener.port, '/metrics');
    expect(answer.status).to.equal(200);
    expect(answer.headers['content-type']).to.equal(metrics.contentType);
    expect(answer.body).to.include('vgpu_warden_sweep_passes_total{result="ok"} 1');
  });

  it('streams a large exposition piece by piece as the scraper reads it, and stops reading pieces when the scraper goes away', async () => {
    const piece = `${'x'.repeat(1023)}\n`.repeat(256);
    let made = 0;
    let finished = false;
    let pieceCount = 64;
    async function* large(): AsyncGenerator<string> {
      try {
        for (let index = 0; index < pieceCount; index++) {
          made++;
          yield await Promise.resolve(piece);
        }
      } finally {
        finished = true;
      }
    }
    listener = await startMetricsListener({
      host: '127.0.0.1',
      port: 0,
      metrics: { contentType: 'text/plain', exposition: large },
    });
    const whole = await get(listener.port, '/metrics');
    expect(whole.status).to.equal(200);
    expect(whole.body.length).to.equal(64 * piece.length);
    expect([made, finished]).to.deep.equal([64, true]);

    // 32 MiB more than loopback's socket buffers hold: a scraper that stops reading holds it back.
    made = 0;
    finished = false;
    pieceCount = 128;
    const port = listener.port;
    const madeWhilePaused = await new Promise<number>((resolve, reject) => {
      const request = httpRequest({ host: '127.0.0.1', port, path: '/metrics' }, (response) => {
        response.pause();
        setTimeout(() => {
          const count = made;
          request.destroy();
          resolve(count);
        }, 300);
      });
      request.on('error', () => undefined);
      request.end();
      setTimeout(() => {
        reject(new Error('no answer'));
      }, 5_000).unref();
    });
    expect(madeWhilePaused, 'pieces made while the scraper did not read').to.be.below(64);
    const deadline = Date.now() + 5_000;
    const closed = () => finished;
    while (!closed() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(closed(), 'the exposition was closed once the scraper went away').to.equal(true);
    expect(made).to.be.below(128);
  });

  it('cuts the answer and reports when a later piece fails', async () => {
    const errors: string[] = [];
    async function* failing(): AsyncGenerator<string> {
      yield 'first\n';
      await Promise.resolve();
      throw new Error('source broke');
    }
    listener = await startMetricsListener({
      host: '127.0.0.1',
      port: 0,
      onError: (message) => errors.push(message),
      metrics: { contentType: 'text/plain', exposition: failing },
    });
    const cut = await get(listener.port, '/metrics').then(
      () => 'answered',
      () => 'cut',
    );
    expect(cut).to.equal('cut');
    expect(errors).to.deep.equal(['source broke']);
  });

  it('answers /healthz, and 404 for other paths and methods', async () => {
    listener = await startMetricsListener({
      host: '127.0.0.1',
      port: 0,
      metrics: new WardenMetrics({ processMetrics: false }),
    });
    expect(await get(listener.port, '/healthz')).to.deep.include({ status: 200, body: 'ok' });
    expect((await get(listener.port, '/nope')).status).to.equal(404);
    expect((await get(listener.port, '/metrics', { method: 'POST' })).status).to.equal(404);
  });

  it('answers 500 and reports when collecting fails', async () => {
    const errors: string[] = [];
    listener = await startMetricsListener({
      host: '127.0.0.1',
      port: 0,
      onError: (message) => errors.push(message),
      metrics: { contentType: 'text/plain', exposition: () => pieces(Promise.reject(new Error('registry broke'))) },
    });
    const answer = await get(listener.port, '/metrics');
    expect(answer.status).to.equal(500);
    expect(answer.body).to.include('registry broke');
    expect(errors).to.deep.equal(['registry broke']);
  });

  it('answers /readyz with the process readiness given to it (503 with the reasons), and 404 without one', async () => {
    let state = {
      ready: false,
      reasons: ['cluster cache: nodes not listed yet', 'leader election: namespace "x" does not exist'],
    };
    listener = await startMetricsListener({
      host: '127.0.0.1',
      port: 0,
      metrics: new WardenMetrics({ processMetrics: false }),
      readiness: () => state,
    });
    expect(await get(listener.port, '/readyz')).to.deep.include({
      status: 503,
      body: 'not ready: cluster cache: nodes not listed yet; leader election: namespace "x" does not exist',
    });
    state = { ready: true, reasons: [] };
    expect(await get(listener.port, '/readyz')).to.deep.include({ status: 200, body: 'ok' });
    expect(listener.listening).to.equal(true);
    await listener.close();
    expect(listener.listening).to.equal(false);
    listener = await startMetricsListener({
      host: '127.0.0.1',
      port: 0,
      metrics: new WardenMetrics({ processMetrics: false }),
    });
    expect((await get(listener.port, '/readyz')).status).to.equal(404);
  });

  it('close lets a scrape in progress finish, but cuts it once its bound has passed', async () => {
    const slow = {
      contentType: 'text/plain',
      exposition: () =>
        pieces(
          new Promise<string>((resolve) => {
            setTimeout(() => {
              resolve('late');
            }, 5_000);
          }),
        ),
    };
    listener = await startMetricsListener({ host: '127.0.0.1', port: 0, metrics: slow });
    const scrape = get(listener.port, '/metrics').then(
      () => 'answered',
      () => 'cut',
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    const started = Date.now();
    await listener.close(100);
    expect(Date.now() - started).to.be.below(1_000);
    expect(await scrape).to.equal('cut');
  });

  it('close waits for a scrape in progress to be answered, then closes its kept-alive connection at once', async () => {
    const slow = {
      contentType: 'text/plain',
      exposition: () =>
        pieces(
          new Promise<string>((resolve) => {
            setTimeout(() => {
              resolve('late');
            }, 200);
          }),
        ),
    };
    listener = await startMetricsListener({ host: '127.0.0.1', port: 0, metrics: slow });
    const scrape = get(listener.port, '/metrics').then(
      (answer) => answer.body,
      () => 'cut',
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    const started = Date.now();
    await listener.close(10_000);
    expect(await scrape).to.equal('late');
    // Not the 90 s keep-alive, nor the 10 s bound: closed as soon as the answer went out.
    expect(Date.now() - started).to.be.below(1_000);
  });

  it('closes, freeing the port, and tolerates a second close', async () => {
    const started = await startMetricsListener({
      host: '127.0.0.1',
      port: 0,
      metrics: new WardenMetrics({ processMetrics: false }),
    });
    await started.close();
    await started.close();
    const error = await get(started.port, '/healthz').then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect((error as NodeJS.ErrnoException | undefined)?.code).to.equal('ECONNREFUSED');
  });
});
