import { connect as tcpConnect } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { expect } from 'chai';
import { type AdmissionRequest, respond } from '../../../src/admission/admission-types.js';
import { createExtenderApp } from '../../../src/server/extender-app.js';
import { HttpsListener, LISTENER_DEFAULTS, type ListenerLimits } from '../../../src/server/https-listener.js';
import { startMetricsListener, type MetricsListener } from '../../../src/server/metrics-app.js';
import { createWebhookApp } from '../../../src/server/webhook-app.js';
import { createCertificateAuthority, issueCertificate } from '../../../src/tls/certificates.js';

/** A raw TLS connection: what the server sent, and when it closed (ms after connecting). */
interface RawConnection {
  socket: TLSSocket;
  received: () => string;
  closed: Promise<number>;
}

function openTls(port: number): Promise<RawConnection> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let text = '';
    const socket = tlsConnect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      socket.off('error', reject);
      resolve({ socket, received: () => text, closed });
    });
    const closed = new Promise<number>((done) => {
      socket.once('close', () => {
        done(performance.now() - started);
      });
    });
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
    });
    socket.once('error', reject);
    // After the handshake, resets are part of what the tests observe.
    socket.on('error', () => undefined);
  });
}

/** Resolves once `predicate` holds for what the server sent, or rejects after `withinMs`. */
async function waitForText(
  connection: RawConnection,
  predicate: (text: string) => boolean,
  withinMs: number,
): Promise<number> {
  const started = performance.now();
  while (!predicate(connection.received())) {
    if (performance.now() - started > withinMs)
      throw new Error(
        `no matching answer within ${withinMs} ms; got ${JSON.stringify(connection.received().slice(0, 300))}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return performance.now() - started;
}

const statusOf = (text: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const SHORT: ListenerLimits = {
  requestTimeoutMs: 1000,
  headersTimeoutMs: 800,
  timeoutCheckIntervalMs: 100,
  handshakeTimeoutMs: 800,
  keepAliveTimeoutMs: 5000,
};
const review = JSON.stringify({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: { uid: 'u1', operation: 'CONNECT' },
});

describe('listeners: timeouts, body limits, encodings and the connection cap (raw sockets)', function () {
  this.timeout(30_000);
  const ca = createCertificateAuthority({ commonName: 'listener-limits-ca', validityDays: 1 });
  const leaf = issueCertificate(ca, {
    commonName: 'vgpu-warden',
    subjectAltNames: ['127.0.0.1'],
    usage: 'server',
    validityDays: 1,
  });
  let reviews: AdmissionRequest[];
  let webhook: HttpsListener;
  let extender: HttpsListener;
  let metrics: MetricsListener;
  const open: RawConnection[] = [];
  const connect = async (port: number) => {
    const connection = await openTls(port);
    open.push(connection);
    return connection;
  };

  before(async () => {
    reviews = [];
    const webhookApp = createWebhookApp({
      handler: {
        handle: (request) => {
          reviews.push(request);
          return Promise.resolve(respond.allowed(request.uid));
        },
      },
      readiness: () => ({ ready: true, reasons: [] }),
      bodyLimitBytes: 1024 * 1024,
    });
    webhook = await HttpsListener.start(webhookApp, {
      host: '127.0.0.1',
      port: 0,
      certPem: leaf.certPem,
      keyPem: leaf.keyPem,
      ...SHORT,
      maxConnections: 4,
    });
    const extenderApp = createExtenderApp({
      handlers: {
        filter: (args) =>
          Promise.resolve({
            Nodes: null,
            NodeNames: args.nodeNames,
            FailedNodes: null,
            FailedAndUnresolvableNodes: null,
            Error: '',
          }),
        prioritize: () => Promise.resolve([]),
        // A bind may take far longer than the request timeout: only receiving is bounded.
        bind: async () => {
          await sleep(1500);
          return { Error: '' };
        },
      },
      readiness: () => ({ ready: true, reasons: [] }),
      bodyLimitBytes: 1024 * 1024,
    });
    extender = await HttpsListener.start(extenderApp, {
      host: '127.0.0.1',
      port: 0,
      certPem: leaf.certPem,
      keyPem: leaf.keyPem,
      ...SHORT,
    });
    metrics = await startMetricsListener({
      host: '127.0.0.1',
      port: 0,
      metrics: {
        contentType: 'text/plain',
        exposition: async function* () {
          yield await Promise.resolve('up 1\n');
        },
      },
      ...SHORT,
    });
  });
  afterEach(() => {
    for (const connection of open.splice(0)) connection.socket.destroy();
  });
  after(async () => {
    await webhook.close();
    await extender.close();
    await metrics.close();
  });

  it('ships timeouts sized to the webhook timeout, with keep-alive kept at 90 s', () => {
    expect(LISTENER_DEFAULTS).to.deep.include({
      keepAliveTimeoutMs: 90_000,
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 15_000,
      timeoutCheckIntervalMs: 1000,
    });
    expect(webhook.server.requestTimeout).to.equal(1000);
    expect(webhook.server.headersTimeout).to.equal(800);
    expect(webhook.server.keepAliveTimeout).to.equal(5000);
  });

  it('cuts a request whose body stalls, within the request timeout, and never calls the handler', async () => {
    const connection = await connect(webhook.port);
    connection.socket.write(
      `POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${review.length}\r\n\r\n${review.slice(0, 10)}`,
    );
    const closedAfter = await connection.closed;
    expect(closedAfter).to.be.within(900, 2500);
    expect(statusOf(connection.received())).to.be.oneOf([0, 408]);
    expect(reviews).to.deep.equal([]);
  });

  it('cuts a body dribbled one byte every 100 ms at the request timeout, long before it ends', async () => {
    const connection = await connect(extender.port);
    const body = JSON.stringify({ PodName: 'p', PodNamespace: 'ns', PodUID: 'u', Node: 'n1' });
    connection.socket.write(`POST /bind HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n`);
    let sent = 0;
    const dribble = setInterval(() => {
      if (!connection.socket.destroyed) connection.socket.write(body.charAt(sent++));
    }, 100);
    try {
      const closedAfter = await connection.closed;
      expect(closedAfter).to.be.within(900, 2500);
      expect(sent).to.be.below(body.length);
    } finally {
      clearInterval(dribble);
    }
  });

  it('cuts headers dribbled byte by byte at the headers timeout (slowloris)', async () => {
    const connection = await connect(webhook.port);
    const head = 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n';
    let sent = 0;
    const dribble = setInterval(() => {
      if (!connection.socket.destroyed) connection.socket.write(head.charAt(sent++));
    }, 50);
    try {
      expect(await connection.closed).to.be.within(700, 2500);
      expect(sent).to.be.below(head.length);
    } finally {
      clearInterval(dribble);
    }
  });

  it('cuts a plain-HTTP connection to the metrics listener that sends nothing, at the headers timeout', async () => {
    const socket = tcpConnect({ host: '127.0.0.1', port: metrics.port });
    // Read what arrives (a 408), or the end of the stream is never seen.
    socket.resume();
    const started = performance.now();
    const closedAfter = await new Promise<number>((done) => {
      socket.on('error', () => undefined);
      socket.once('close', () => {
        done(performance.now() - started);
      });
    });
    expect(closedAfter).to.be.within(700, 2500);
  });

  it('cuts a TCP connection that never starts the TLS handshake, at the handshake timeout', async () => {
    const socket = tcpConnect({ host: '127.0.0.1', port: extender.port });
    socket.resume();
    const started = performance.now();
    const closedAfter = await new Promise<number>((done) => {
      socket.on('error', () => undefined);
      socket.once('close', () => {
        done(performance.now() - started);
      });
    });
    expect(closedAfter).to.be.within(700, 2500);
  });

  it('keeps an idle keep-alive connection past the request timeout, and answers a slow handler in full', async () => {
    const connection = await connect(extender.port);
    connection.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await waitForText(connection, (text) => text.endsWith('ok'), 2000);
    await sleep(1500);
    const body = JSON.stringify({ PodName: 'p', PodNamespace: 'ns', PodUID: 'u', Node: 'n1' });
    connection.socket.write(
      `POST /bind HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    // The bind handler takes 1.5 s, longer than the 1 s request timeout: it must still be answered.
    await waitForText(
      connection,
      (text) => text.split('HTTP/1.1 200').length === 3 && text.endsWith('{"Error":""}'),
      5000,
    );
    expect(connection.socket.destroyed).to.equal(false);
  });

  for (const [name, path] of [
    ['webhook', '/mutate'],
    ['extender', '/filter'],
    ['metrics', '/metrics'],
  ] as const) {
    it(`${name}: refuses a declared Content-Length over the limit with 413 at once, before the body is sent, and closes`, async () => {
      const port = name === 'webhook' ? webhook.port : name === 'extender' ? extender.port : metrics.port;
      const connection = name === 'metrics' ? await plainConnection(port) : await connect(port);
      connection.socket.write(
        `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 104857600\r\n\r\n`,
      );
      const answeredAfter = await waitForText(
        connection,
        (text) => statusOf(text) !== 0 && text.includes('\r\n\r\n'),
        500,
      );
      expect(statusOf(connection.received())).to.equal(413);
      expect(connection.received()).to.match(/\r\nConnection: close\r\n/i);
      expect(answeredAfter).to.be.below(500);
      expect(await connection.closed).to.be.below(1000);
      if (name === 'webhook')
        expect(connection.received()).to.include('"code":413').and.include('"reason":"RequestEntityTooLarge"');
    });
  }

  it('refuses a chunked body the moment it grows past the limit, without waiting for its end', async () => {
    const connection = await connect(webhook.port);
    connection.socket.write(
      'POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n',
    );
    const chunk = 'x'.repeat(64 * 1024);
    for (let index = 0; index < 20; index += 1) connection.socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
    await waitForText(connection, (text) => statusOf(text) !== 0, 2000);
    expect(statusOf(connection.received())).to.equal(413);
    expect(await connection.closed).to.be.below(2000);
    expect(reviews).to.deep.equal([]);
  });

  for (const encoding of ['br', 'gzip', 'deflate', 'x-anything', 'identity, gzip']) {
    it(`answers Content-Encoding ${encoding} with 415 on the webhook and the extender, before reading the body`, async () => {
      for (const [port, path] of [
        [webhook.port, '/mutate'],
        [extender.port, '/filter'],
      ] as const) {
        const connection = await connect(port);
        connection.socket.write(
          `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Encoding: ${encoding}\r\nContent-Length: 1000\r\n\r\n`,
        );
        await waitForText(connection, (text) => statusOf(text) !== 0, 1000);
        expect(statusOf(connection.received()), path).to.equal(415);
        expect(connection.received()).to.include('is not supported: send the body uncompressed');
      }
    });
  }

  it('reads an identity-encoded body as usual', async () => {
    const connection = await connect(webhook.port);
    connection.socket.write(
      `POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Encoding: identity\r\nContent-Length: ${review.length}\r\n\r\n${review}`,
    );
    await waitForText(connection, (text) => text.includes('"allowed":true'), 2000);
    expect(statusOf(connection.received())).to.equal(200);
  });

  it('closes connections beyond the cap as they arrive, and takes new ones once others close', async () => {
    const held = await Promise.all([1, 2, 3, 4].map(() => connect(webhook.port)));
    // The fifth is closed by the server as it arrives: no TLS handshake, within moments.
    const fifth = await new Promise<{ secured: boolean; closedAfter: number }>((done) => {
      const started = performance.now();
      let secured = false;
      const socket = tlsConnect({ host: '127.0.0.1', port: webhook.port, rejectUnauthorized: false }, () => {
        secured = true;
      });
      socket.on('error', () => undefined);
      socket.once('close', () => {
        done({ secured, closedAfter: performance.now() - started });
      });
    });
    expect(fifth.secured).to.equal(false);
    expect(fifth.closedAfter).to.be.below(500);
    held[0]?.socket.destroy();
    await held[0]?.closed;
    await sleep(50);
    const next = await connect(webhook.port);
    next.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await waitForText(next, (text) => text.endsWith('ok'), 2000);
  });

  /** The metrics listener is plain HTTP: the same helpers over a TCP socket. */
  function plainConnection(port: number): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const started = performance.now();
      let text = '';
      const socket = tcpConnect({ host: '127.0.0.1', port }, () => {
        const connection = { socket: socket as unknown as TLSSocket, received: () => text, closed };
        open.push(connection);
        resolve(connection);
      });
      const closed = new Promise<number>((done) => {
        socket.once('close', () => {
          done(performance.now() - started);
        });
      });
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString('latin1');
      });
      socket.once('error', reject);
    });
  }
});
