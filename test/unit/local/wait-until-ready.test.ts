import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ManagedProcess } from '../../../src/local/managed-process.js';
import { PortTakenError, ReadinessError, waitUntilReady } from '../../../src/local/wait-until-ready.js';

describe('waitUntilReady', function () {
  this.timeout(15_000);
  let dir: string;
  let server: Server | undefined;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ready-'));
  });
  afterEach(() => {
    server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function serve(handler: (count: number) => [number, string]): Promise<string> {
    let count = 0;
    server = createServer((_req, res) => {
      const [status, body] = handler(++count);
      res.writeHead(status).end(body);
    });
    const listening = server;
    await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(listening.address() as AddressInfo).port}/health`;
  }

  it('resolves once the endpoint answers 200 with the expected body', async () => {
    const url = await serve((count) => (count < 3 ? [503, 'starting'] : [200, '{"health":"true"}']));
    const child = ManagedProcess.start({
      name: 'idle',
      command: 'sleep',
      args: ['30'],
      logFile: join(dir, 'idle.log'),
    });
    try {
      await waitUntilReady(child, { url, timeoutMs: 5000, expectBody: '"health":"true"' });
    } finally {
      await child.stop();
    }
  });

  it('fails fast with the last log lines when the process exits first', async () => {
    const child = ManagedProcess.start({
      name: 'crasher',
      command: 'bash',
      args: ['-c', 'echo "fatal: bad flag --nope"; exit 2'],
      logFile: join(dir, 'crash.log'),
    });
    const started = Date.now();
    const error = await waitUntilReady(child, { url: 'http://127.0.0.1:1/health', timeoutMs: 10_000 }).catch(
      (caught: unknown) => caught,
    );
    expect(error).to.be.instanceOf(ReadinessError);
    expect((error as Error).message)
      .to.include('crasher exited (code 2')
      .and.include('fatal: bad flag --nope');
    expect(Date.now() - started).to.be.lessThan(5000);
  });

  it('times out with the last answer it got', async () => {
    const url = await serve(() => [500, 'etcd not ready']);
    const child = ManagedProcess.start({
      name: 'idle',
      command: 'sleep',
      args: ['30'],
      logFile: join(dir, 'idle.log'),
    });
    try {
      const error = await waitUntilReady(child, { url, timeoutMs: 600 }).catch((caught: unknown) => caught);
      expect((error as Error).message)
        .to.include('not ready')
        .and.include('HTTP 500: etcd not ready');
    } finally {
      await child.stop();
    }
  });

  it('ends with PortTakenError when a running process logs that it could not bind the probed port', async () => {
    const url = await serve(() => [404, '404 page not found']);
    const script =
      'echo "E1205 server.go:996] \\"Failed to start healthz server\\" err=\\"listen tcp 127.0.0.1:46785: bind: address already in use\\""; sleep 30';
    const child = ManagedProcess.start({
      name: 'kubelet',
      command: 'bash',
      args: ['-c', script],
      logFile: join(dir, 'kubelet.log'),
    });
    try {
      const started = Date.now();
      const error = await waitUntilReady(child, {
        url,
        timeoutMs: 10_000,
        portFailureLog: 'Failed to start healthz server',
      }).catch((caught: unknown) => caught);
      expect(error).to.be.instanceOf(PortTakenError);
      expect((error as Error).message)
        .to.include('could not bind')
        .and.include('HTTP 404');
      expect(Date.now() - started).to.be.lessThan(5000);
    } finally {
      await child.stop();
    }
  });

  it('keeps waiting through an unrelated address-in-use line', async () => {
    const url = await serve((count) => (count < 3 ? [503, 'starting'] : [200, 'ok']));
    const child = ManagedProcess.start({
      name: 'kubelet',
      command: 'bash',
      args: ['-c', 'echo "metrics: bind: address already in use"; sleep 30'],
      logFile: join(dir, 'kubelet.log'),
    });
    try {
      await waitUntilReady(child, { url, timeoutMs: 5000, portFailureLog: 'Failed to start healthz server' });
    } finally {
      await child.stop();
    }
  });
});
