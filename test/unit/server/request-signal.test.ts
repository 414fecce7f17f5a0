import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { AdmissionResponse } from '../../../src/admission/admission-types.js';
import type { ExtenderBindingResult } from '../../../src/extender/protocol.js';
import { createExtenderApp } from '../../../src/server/extender-app.js';
import { ClientGoneError, RequestTimeoutError } from '../../../src/server/request-signal.js';
import { createWebhookApp } from '../../../src/server/webhook-app.js';
import { until } from '../../support/eventually.js';

const ready = () => ({ ready: true, reasons: [] });

/** Resolves with the signal's reason once it aborts, rejecting nothing: a handler that waits for its request to end. */
function abortOf(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    signal.addEventListener(
      'abort',
      () => {
        resolve(signal.reason);
      },
      { once: true },
    );
  });
}

/** POSTs `body`; with `closeAfterMs` the client gives up (closes the connection) before any answer. */
function post(server: Server, path: string, body: unknown, closeAfterMs?: number): Promise<number | 'closed'> {
  return new Promise((done) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: (server.address() as AddressInfo).port,
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          done(res.statusCode ?? 0);
        });
      },
    );
    req.on('error', () => {
      done('closed');
    });
    req.end(JSON.stringify(body));
    if (closeAfterMs !== undefined)
      setTimeout(() => {
        req.destroy();
      }, closeAfterMs);
  });
}

async function listening(app: Parameters<typeof createServer>[1]): Promise<Server> {
  const server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

const bindArgs = { PodName: 'p', PodNamespace: 'ns', PodUID: 'u', Node: 'n1' };
const review = {
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: { uid: 'r-1', operation: 'DELETE', kind: { group: '', version: 'v1', kind: 'Pod' } },
};

describe('the request signal handlers get', () => {
  const servers: Server[] = [];
  afterEach(() => {
    for (const server of servers.splice(0)) server.close();
  });

  function extender(bindTimeoutMs: number) {
    const reasons: unknown[] = [];
    const app = createExtenderApp({
      handlers: {
        filter: () => Promise.reject(new Error('unused')),
        prioritize: () => Promise.reject(new Error('unused')),
        bind: async (_args, signal): Promise<ExtenderBindingResult> => {
          reasons.push(await abortOf(signal));
          return { Error: 'gave up' };
        },
      },
      readiness: ready,
      bindTimeoutMs,
    });
    return { app, reasons };
  }

  it('aborts a bind when kube-scheduler closes the request', async () => {
    const { app, reasons } = extender(10_000);
    const server = await listening(app);
    servers.push(server);
    expect(await post(server, '/bind', bindArgs, 50)).to.equal('closed');
    await until('the bind to see its request end', () => reasons.length === 1);
    expect(reasons[0]).to.be.instanceOf(ClientGoneError);
  });

  it('aborts a bind when its timeout (BIND_TIMEOUT) passes, and the answer still goes out', async () => {
    const { app, reasons } = extender(60);
    const server = await listening(app);
    servers.push(server);
    const started = Date.now();
    expect(await post(server, '/bind', bindArgs)).to.equal(200);
    expect(Date.now() - started).to.be.below(2_000);
    expect(reasons[0]).to.be.instanceOf(RequestTimeoutError);
  });

  it('aborts an admission review when the apiserver closes it, or at the webhook timeout', async () => {
    const reasons: unknown[] = [];
    const app = createWebhookApp({
      handler: {
        handle: async (request, signal): Promise<AdmissionResponse> => {
          reasons.push(await abortOf(signal));
          return { uid: request.uid, allowed: true };
        },
      },
      readiness: ready,
      answerTimeoutMs: 300,
    });
    const server = await listening(app);
    servers.push(server);
    expect(await post(server, '/mutate', review, 50)).to.equal('closed');
    await until('the review to see its request end', () => reasons.length === 1);
    expect(reasons[0]).to.be.instanceOf(ClientGoneError);

    expect(await post(server, '/mutate', review)).to.equal(200);
    expect(reasons[1]).to.be.instanceOf(RequestTimeoutError);
  });
});
