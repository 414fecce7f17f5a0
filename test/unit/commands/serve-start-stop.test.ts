import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { serveCommand } from '../../../src/commands/serve-command.js';
import { startServer, type RunningServer } from '../../../src/serve/start-server.js';
import { loadConfig } from '../../../src/config/load.js';
import { StartAborted, StartupError } from '../../../src/lifecycle/lifecycle.js';
import { findFreePort, findFreePorts } from '../../../src/local/free-port.js';
import { renderKubeconfig } from '../../../src/local/kubeconfig.js';
import { createLogger } from '../../../src/telemetry/logger.js';
import { ConditionLog } from '../../../src/telemetry/condition-log.js';
import { eventually, notYet } from '../../support/eventually.js';
import { httpGet } from '../../support/http-get.js';

/**
 * startServer's own start and stop logic, against an apiserver address where nothing listens (no
 * control plane needed: certificates come from a directory). The same paths against the real
 * control plane, as a process with signals, are in test/integration/serve-lifecycle.test.ts.
 */
/** A fresh connection each: the server is stopped right after and must not wait on an idle socket. */
const readyz = (port: number) => httpGet(port, '/readyz', { agent: false });

function accepting(port: number): Promise<boolean> {
  return new Promise((done) => {
    const probe = createServer();
    probe.once('error', () => {
      done(true);
    });
    probe.listen({ host: '127.0.0.1', port, exclusive: true }, () => {
      probe.close(() => {
        done(false);
      });
    });
  });
}

describe('startServer: all-or-nothing start, bounded stop, readiness (no apiserver)', function () {
  this.timeout(20_000);
  let dir: string;
  let env: Record<string, string>;
  let ports: { webhook: number; extender: number; metrics: number };
  let server: RunningServer | undefined;
  let warnings: string[];

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'serve-start-stop-'));
    const nobody = await findFreePort();
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      renderKubeconfig({
        clusterName: 'gone',
        server: `https://127.0.0.1:${nobody}`,
        caPem: '',
        userName: 'u',
        token: 't',
      }),
    );
    const [webhook = 0, extender = 0, metrics = 0] = await findFreePorts(3);
    ports = { webhook, extender, metrics };
    env = {
      KUBECONFIG: kubeconfig,
      CERT_DIR: join(dir, 'certs'),
      CERT_HOSTS: '127.0.0.1',
      POD_NAMESPACE: 'default',
      WEBHOOK_HOST: '127.0.0.1',
      WEBHOOK_PORT: String(ports.webhook),
      EXTENDER_PORT: String(ports.extender),
      METRICS_HOST: '127.0.0.1',
      METRICS_PORT: String(ports.metrics),
    };
    warnings = [];
  });
  afterEach(async () => {
    await server?.stop();
    server = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  const conditions = () =>
    new ConditionLog({
      emit: (level, message) => {
        if (level === 'warn') warnings.push(message);
      },
    });

  for (const taken of ['webhook', 'extender', 'metrics'] as const) {
    it(`a taken ${taken} port rejects with one line naming it, and closes the listeners that had opened`, async () => {
      const holder: Server = createServer();
      await new Promise<void>((resolve) => {
        holder.listen({ host: '127.0.0.1', port: ports[taken], exclusive: true }, resolve);
      });
      try {
        const error = await startServer(loadConfig(env), createLogger('silent'), { conditions: conditions() }).catch(
          (caught: unknown) => caught,
        );
        expect(error).to.be.instanceOf(StartupError);
        const role = taken === 'metrics' ? 'metrics' : `the ${taken}`;
        expect((error as Error).message).to.equal(
          `cannot listen on 127.0.0.1:${ports[taken]} for ${role} (${taken.toUpperCase()}_PORT): address already in use`,
        );
        for (const [name, port] of Object.entries(ports))
          if (name !== taken) expect(await accepting(port), `${name} left listening`).to.equal(false);
      } finally {
        holder.close();
      }
    });
  }

  it('with the apiserver unreachable: serves, every /readyz 503 naming the cause, one warning; stops well within the bound', async () => {
    server = await startServer(loadConfig(env), createLogger('silent'), { conditions: conditions() });
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const answer = await readyz(ports.metrics);
    expect(answer.status).to.equal(503);
    expect(answer.body)
      .to.include('cluster cache: nodes not listed yet')
      .and.include('apiserver unreachable (nodes list)');
    expect(warnings.filter((line) => line.startsWith('apiserver unreachable'))).to.have.length(1);
    const started = Date.now();
    const report = await server.stop();
    expect(report).to.deep.equal({ timedOut: false, unfinished: [] });
    expect(Date.now() - started).to.be.below(5_000);
    for (const port of Object.values(ports)) expect(await accepting(port)).to.equal(false);
    server = undefined;
  });

  it('a stop asked while certificates are still being retried ends start-up at once with StartAborted', async () => {
    const abort = new AbortController();
    const starting = startServer(loadConfig({ ...env, CERT_SECRET_NAME: 'tls' }), createLogger('silent'), {
      signal: abort.signal,
      conditions: conditions(),
    }).catch((caught: unknown) => caught);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const asked = Date.now();
    abort.abort(new Error('SIGTERM received'));
    expect(await starting).to.be.instanceOf(StartAborted);
    expect(Date.now() - asked).to.be.below(1_000);
    // One warning for the unreachable apiserver: the store's first LIST, started before the
    // certificates, is the first to report it; the certificate retries share the condition.
    expect(warnings).to.have.length(1);
    expect(warnings[0]).to.match(/^apiserver unreachable \((nodes|pods|resourcequotas) list\)/);
    for (const port of Object.values(ports)) expect(await accepting(port)).to.equal(false);
  });

  describe('the serve command', () => {
    function run(extraEnv: Record<string, string>, stop: Promise<string>) {
      const stderr: string[] = [];
      const exits: number[] = [];
      const command = serveCommand({
        waitForStopSignal: () => stop,
        forceExit: (code) => {
          exits.push(code);
        },
      });
      const settings = loadConfig({ ...env, LOG_LEVEL: 'silent', ...extraEnv });
      const code = command.run({
        io: {
          env: {},
          stdout: () => undefined,
          stderr: (line) => {
            stderr.push(line);
          },
        },
        flags: {},
        positionals: [],
        config: () => settings,
      });
      return { code, stderr, exits };
    }

    it('a start failure: exit 1, one line on stderr, and the process is ended if anything still holds it', async () => {
      const holder: Server = createServer();
      await new Promise<void>((resolve) => {
        holder.listen({ host: '127.0.0.1', port: ports.metrics, exclusive: true }, resolve);
      });
      try {
        const { code, stderr, exits } = run({}, new Promise<string>(() => undefined));
        expect(await code).to.equal(1);
        expect(stderr).to.deep.equal([
          `vgpu-warden: cannot listen on 127.0.0.1:${ports.metrics} for metrics (METRICS_PORT): address already in use`,
        ]);
        expect(exits).to.deep.equal([]);
        // mocha keeps this process alive, as a leftover handle would keep a real one.
        await new Promise((resolve) => setTimeout(resolve, 2_100));
        expect(exits).to.deep.equal([1]);
      } finally {
        holder.close();
      }
    });

    it('SIGTERM during start-up: exit 0 at once; after start-up: stops and exits 0', async () => {
      let signal: (name: string) => void = () => undefined;
      const early = run(
        { CERT_SECRET_NAME: 'tls' },
        new Promise<string>((resolve) => {
          signal = resolve;
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      signal('SIGTERM');
      expect(await early.code).to.equal(0);
      expect(early.stderr).to.deep.equal([]);

      const late = run(
        {},
        new Promise<string>((resolve) => {
          signal = resolve;
        }),
      );
      // Listening takes a moment, longer on a loaded machine: asked before, /readyz is refused.
      const answer = await eventually(
        'the metrics listener answering /readyz',
        async () => {
          try {
            return await readyz(ports.metrics);
          } catch (error) {
            return notYet((error as Error).message);
          }
        },
        20_000,
        50,
      );
      expect(answer.status).to.equal(503);
      const asked = Date.now();
      signal('SIGINT');
      expect(await late.code).to.equal(0);
      expect(Date.now() - asked).to.be.below(3_000);
      for (const port of Object.values(ports)) expect(await accepting(port)).to.equal(false);
    });
  });
});
