import { expect } from 'chai';
import { startMetricsListener, type MetricsListener } from '../../../src/server/metrics-app.js';
import { WardenMetrics } from '../../../src/telemetry/metrics.js';
import { httpGet as get } from '../../support/http-get.js';


describe('metrics listener', () => {
  let listener: MetricsListener | undefined;
  afterEach(async () => { await listener?.close(); listener = undefined; });

  it('serves the registry on GET /metrics with its content type', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    metrics.observeSweep(0.5, 'ok');
    listener = await startMetricsListener({ host: '127.0.0.1', port: 0, metrics });
    const answer = await get(listener.port, '/metrics');
    expect(answer.status).to.equal(200);
    expect(answer.headers['content-type']).to.equal(metrics.contentType);
    expect(answer.body).to.include('vgpu_warden_sweep_passes_total{result="ok"} 1');
  });

  it('answers /healthz, and 404 for other paths and methods', async () => {
    listener = await startMetricsListener({ host: '127.0.0.1', port: 0, metrics: new WardenMetrics({ processMetrics: false }) });
    expect(await get(listener.port, '/healthz')).to.deep.include({ status: 200, body: 'ok' });
    expect((await get(listener.port, '/nope')).status).to.equal(404);
    expect((await get(listener.port, '/metrics', { method: 'POST' })).status).to.equal(404);
  });

  it('answers 500 and reports when collecting fails', async () => {
    const errors: string[] = [];
    listener = await startMetricsListener({
      host: '127.0.0.1', port: 0, onError: (message) => errors.push(message),
      metrics: { contentType: 'text/plain', text: () => Promise.reject(new Error('registry broke')) },
    });
    const answer = await get(listener.port, '/metrics');
    expect(answer.status).to.equal(500);
    expect(answer.body).to.include('registry broke');
    expect(errors).to.deep.equal(['registry broke']);
  });

  it('answers /readyz with the process readiness given to it (503 with the reasons), and 404 without one', async () => {
    let state = { ready: false, reasons: ['cluster cache: nodes not listed yet', 'leader election: namespace "x" does not exist'] };
    listener = await startMetricsListener({ host: '127.0.0.1', port: 0, metrics: new WardenMetrics({ processMetrics: false }), readiness: () => state });
    expect(await get(listener.port, '/readyz')).to.deep.include({ status: 503, body: 'not ready: cluster cache: nodes not listed yet; leader election: namespace "x" does not exist' });
    state = { ready: true, reasons: [] };
    expect(await get(listener.port, '/readyz')).to.deep.include({ status: 200, body: 'ok' });
    expect(listener.listening).to.equal(true);
    await listener.close();
    expect(listener.listening).to.equal(false);
    listener = await startMetricsListener({ host: '127.0.0.1', port: 0, metrics: new WardenMetrics({ processMetrics: false }) });
    expect((await get(listener.port, '/readyz')).status).to.equal(404);
  });

  it('close lets a scrape in progress finish, but cuts it once its bound has passed', async () => {
    const slow = { contentType: 'text/plain', text: () => new Promise<string>((resolve) => { setTimeout(() => { resolve('late'); }, 5_000); }) };
    listener = await startMetricsListener({ host: '127.0.0.1', port: 0, metrics: slow });
    const scrape = get(listener.port, '/metrics').then(() => 'answered', () => 'cut');
    await new Promise((resolve) => setTimeout(resolve, 50));
    const started = Date.now();
    await listener.close(100);
    expect(Date.now() - started).to.be.below(1_000);
    expect(await scrape).to.equal('cut');
  });

  it('close waits for a scrape in progress to be answered, then closes its kept-alive connection at once', async () => {
    const slow = { contentType: 'text/plain', text: () => new Promise<string>((resolve) => { setTimeout(() => { resolve('late'); }, 200); }) };
    listener = await startMetricsListener({ host: '127.0.0.1', port: 0, metrics: slow });
    const scrape = get(listener.port, '/metrics').then((answer) => answer.body, () => 'cut');
    await new Promise((resolve) => setTimeout(resolve, 20));
    const started = Date.now();
    await listener.close(10_000);
    expect(await scrape).to.equal('late');
    // Not the 90 s keep-alive, nor the 10 s bound: closed as soon as the answer went out.
    expect(Date.now() - started).to.be.below(1_000);
  });

  it('closes, freeing the port, and tolerates a second close', async () => {
    const started = await startMetricsListener({ host: '127.0.0.1', port: 0, metrics: new WardenMetrics({ processMetrics: false }) });
    await started.close();
    await started.close();
    const error = await get(started.port, '/healthz').then(() => undefined, (failure: unknown) => failure);
    expect((error as NodeJS.ErrnoException | undefined)?.code).to.equal('ECONNREFUSED');
  });
});
