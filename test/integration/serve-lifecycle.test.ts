import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { expect } from 'chai';
import { findFreePort, findFreePorts } from '../../src/local/free-port.js';
import { spawnTsx, type CapturedProcess } from '../support/captured-process.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { httpGet } from '../support/http-get.js';
import { eventually, notYet, testCluster, uniqueName, wakeOn } from '../support/test-cluster.js';

const main = resolve(import.meta.dirname, '..', '..', 'src', 'main.ts');

/** `vgpu-warden serve` as a real process, with its output kept line by line. */
interface Serve {
  child: CapturedProcess['child'];
  stdout: () => string[];
  stderr: () => string;
  exited: CapturedProcess['exited'];
  ports: { webhook: number; extender: number; metrics: number };
  certDir: string;
}

const running: Serve[] = [];

async function startServe(env: Record<string, string>, ports?: Partial<Serve['ports']>): Promise<Serve> {
  const certDir = mkdtempSync(join(tmpdir(), 'serve-lifecycle-'));
  const [webhook = 0, extender = 0, metrics = 0] = await findFreePorts(3);
  const chosen = {
    webhook: ports?.webhook ?? webhook,
    extender: ports?.extender ?? extender,
    metrics: ports?.metrics ?? metrics,
  };
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^(EXTENDER_|WEBHOOK_|METRICS_|CERT_|POD_|LEASE_)/.test(name)),
  );
  const started = spawnTsx(main, ['serve'], {
    env: {
      ...inherited,
      CERT_DIR: certDir,
      CERT_HOSTS: '127.0.0.1',
      LOG_LEVEL: 'info',
      WEBHOOK_HOST: '127.0.0.1',
      WEBHOOK_PORT: String(chosen.webhook),
      EXTENDER_PORT: String(chosen.extender),
      METRICS_HOST: '127.0.0.1',
      METRICS_PORT: String(chosen.metrics),
      LEASE_NAME: uniqueName('lease'),
      ...env,
    },
  });
  const serve: Serve = {
    child: started.child,
    stdout: () =>
      started
        .stdout()
        .split('\n')
        .filter((line) => line !== ''),
    stderr: started.stderr,
    exited: started.exited,
    ports: chosen,
    certDir,
  };
  running.push(serve);
  return serve;
}

/** GET on a TLS listener, trusting the CA serve wrote; a fresh connection each (serve is stopped next). */
const httpsGet = (serve: Serve, port: number, path: string) =>
  httpGet(port, path, { caPem: readFileSync(join(serve.certDir, 'ca.crt'), 'utf8'), agent: false });

/** GET on the plain-HTTP metrics listener; status 0 while nothing answers. */
const readyz = (serve: Serve) =>
  httpGet(serve.ports.metrics, '/readyz', { agent: false }).catch(() => ({ status: 0, body: '' }));

/** Whether something accepts TCP connections on the port (a listener left behind). */
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

function holdPort(port: number): Promise<Server> {
  return new Promise((done, fail) => {
    const holder = createServer();
    holder.once('error', fail);
    holder.listen({ host: '127.0.0.1', port, exclusive: true }, () => {
      done(holder);
    });
  });
}

/** JSON log lines whose message matches. */
function logLines(serve: Serve, pattern: RegExp): { level: number; msg: string; condition?: string }[] {
  return serve.stdout().flatMap((line) => {
    try {
      const parsed = JSON.parse(line) as { level: number; msg: string; condition?: string };
      return pattern.test(parsed.msg) ? [parsed] : [];
    } catch {
      return [];
    }
  });
}

async function leaseHolder(name: string, namespace: string): Promise<string | undefined> {
  const { kubeConfig } = testCluster();
  try {
    const lease = await kubeConfig.makeApiClient(CoordinationV1Api).readNamespacedLease({ name, namespace });
    return lease.spec?.holderIdentity ?? '';
  } catch {
    return undefined;
  }
}

const WARN = 40;
const INFO = 30;

describe('vgpu-warden serve: start all-or-nothing, stop on every signal, readiness and one warning per condition (real process)', function () {
  this.timeout(120_000);

  afterEach(() => {
    for (const serve of running.splice(0)) {
      serve.child.kill('SIGKILL');
      rmSync(serve.certDir, { recursive: true, force: true });
    }
  });

  for (const taken of ['webhook', 'extender', 'metrics'] as const) {
    it(`a taken ${taken} port: exit 1 with one line naming it, nothing left listening, no Lease held`, async () => {
      const { controlPlane, namespace } = testCluster();
      const port = await findFreePort();
      const holder = await holdPort(port);
      try {
        const leaseName = uniqueName('lease');
        const serve = await startServe(
          { KUBECONFIG: controlPlane.kubeconfigPath, POD_NAMESPACE: namespace, LEASE_NAME: leaseName },
          { [taken]: port },
        );
        const { code } = await serve.exited;
        const setting = `${taken.toUpperCase()}_PORT`;
        const role = taken === 'metrics' ? 'metrics' : `the ${taken}`;
        expect({ code, stderr: serve.stderr() }).to.deep.equal({
          code: 1,
          stderr: `vgpu-warden: cannot listen on 127.0.0.1:${port} for ${role} (${setting}): address already in use\n`,
        });
        // The listeners that did open were closed, and the Lease was never taken (listeners bind first).
        for (const [other, otherPort] of Object.entries(serve.ports)) {
          if (other !== taken)
            expect(await accepting(otherPort), `${other} port ${otherPort} left open`).to.equal(false);
        }
        expect((await leaseHolder(leaseName, namespace)) ?? '').to.equal('');
        expect(serve.stdout().join('\n')).not.to.include('listening');
      } finally {
        holder.close();
      }
    });
  }

  it('SIGTERM while start-up waits for an unreachable apiserver: stops within a second or two, exit 0, one warning', async () => {
    const { controlPlane } = testCluster();
    const proxy = await FaultProxy.start({ upstream: controlPlane });
    try {
      proxy.addRule({ action: { kind: 'reset' } });
      // Certificates from a Secret: start-up retries the unreachable apiserver for up to 45 s.
      const serve = await startServe({
        KUBECONFIG: proxy.kubeconfigPath,
        POD_NAMESPACE: 'default',
        CERT_SECRET_NAME: uniqueName('tls'),
      });
      await eventually(
        'serve to be retrying',
        () =>
          Promise.resolve(
            proxy.countRequests() >= 3 ? true : notYet(`${proxy.countRequests()} requests through the proxy`),
          ),
        30_000,
        100,
      );
      const signalledAt = Date.now();
      serve.child.kill('SIGTERM');
      const { code, at } = await serve.exited;
      expect(code, serve.stdout().join('\n')).to.equal(0);
      expect(at - signalledAt).to.be.below(3_000);
      expect(logLines(serve, /stopped during start-up/)).to.have.length(1);
      const unreachable = logLines(serve, /apiserver unreachable/);
      expect(
        unreachable.map((line) => line.level),
        'one warning for every retry',
      ).to.deep.equal([WARN]);
      expect(unreachable[0]?.msg)
        .to.include(`apiserver ${proxy.url} from KUBECONFIG`)
        .and.include(proxy.kubeconfigPath);
      expect(serve.stderr()).to.equal('');
    } finally {
      await proxy.stop();
    }
  });

  it('an unreachable apiserver: every /readyz answers 503 saying so until it answers, then 200; one warning, one recovery line', async () => {
    const { controlPlane, namespace } = testCluster();
    const proxy = await FaultProxy.start({ upstream: controlPlane });
    try {
      const outage = proxy.addRule({ action: { kind: 'reset' } });
      const serve = await startServe({ KUBECONFIG: proxy.kubeconfigPath, POD_NAMESPACE: namespace });
      // Until its first LIST has failed serve cannot know why the nodes are not listed, so the
      // first answers may say only that; from the first failed LIST on, they name the apiserver.
      // Every answer, from the first, is a 503.
      const answers: { status: number; body: string }[] = [];
      // First the process has to come up (tsx compiles serve at start: slow on a loaded machine).
      await eventually(
        'the metrics listener to answer',
        async () => {
          const answer = await readyz(serve);
          if (answer.status !== 0) answers.push(answer);
          return answer.status !== 0
            ? true
            : notYet(`no answer yet; last line: ${serve.stdout().at(-1)?.slice(0, 200) ?? 'none'}`);
        },
        90_000,
        200,
        wakeOn(serve.child.stdout, 'data'),
      );
      const notReady = await eventually(
        '/readyz to name the unreachable apiserver',
        async () => {
          const answer = await readyz(serve);
          if (answer.status !== 0) answers.push(answer);
          return answer.body.includes('apiserver unreachable (nodes list)')
            ? answer
            : notYet(answer.status === 0 ? 'no metrics listener yet' : `${answer.status} ${answer.body}`);
        },
        30_000,
        200,
        wakeOn(serve.child.stdout, 'data'),
      );
      expect(
        answers.filter((answer) => answer.status !== 503),
        'answers other than 503',
      ).to.deep.equal([]);
      expect(notReady.body).to.include('cluster cache: nodes not listed yet');
      // The TLS listeners answer the same.
      for (const port of [serve.ports.webhook, serve.ports.extender])
        expect((await httpsGet(serve, port, '/readyz')).status).to.equal(503);
      await new Promise((resolve) => setTimeout(resolve, 5_000));
      const later = await readyz(serve);
      expect(later.status).to.equal(503);
      expect(later.body).to.include('apiserver unreachable (nodes list)');
      expect(outage.hits, 'the reflectors and the Lease loop kept retrying').to.be.above(5);
      expect(logLines(serve, /apiserver unreachable/).map((line) => line.level)).to.deep.equal([WARN]);
      expect(serve.stdout().join('\n')).not.to.match(/HTTP-Code|Headers:/);

      outage.remove();
      await eventually(
        '/readyz 200 once the apiserver answers',
        async () => {
          const answer = await readyz(serve);
          return answer.status === 200 ? true : notYet(`${answer.status} ${answer.body}`);
        },
        60_000,
        250,
      );
      for (const port of [serve.ports.webhook, serve.ports.extender])
        expect(await httpsGet(serve, port, '/readyz')).to.deep.include({ status: 200, body: 'ok' });
      await eventually(
        'the recovery line',
        () => {
          const lines = logLines(serve, /recovered after|unreachable/);
          return Promise.resolve(
            logLines(serve, /^recovered after .*: apiserver unreachable$/).length === 1
              ? true
              : notYet(`${lines.length} lines about it, the last: ${lines.at(-1)?.msg ?? 'none'}`),
          );
        },
        10_000,
        100,
        wakeOn(serve.child.stdout, 'data'),
      );
      expect(logLines(serve, /recovered after/).map((line) => line.level)).to.deep.equal([INFO]);

      const signalledAt = Date.now();
      serve.child.kill('SIGINT');
      const { code, at } = await serve.exited;
      expect(code).to.equal(0);
      expect(at - signalledAt).to.be.below(5_000);
    } finally {
      await proxy.stop();
    }
  });

  it('a POD_NAMESPACE that does not exist: one warning naming it (no raw API dump), /readyz says why; leads once it exists, releases on SIGTERM', async () => {
    const { controlPlane, core } = testCluster();
    const missing = uniqueName('missing-ns');
    const leaseName = uniqueName('lease');
    const serve = await startServe({
      KUBECONFIG: controlPlane.kubeconfigPath,
      POD_NAMESPACE: missing,
      LEASE_NAME: leaseName,
    });
    const why = `namespace "${missing}" (POD_NAMESPACE) does not exist`;
    const notReady = await eventually(
      '/readyz to say why',
      async () => {
        const answer = await readyz(serve);
        return answer.body.includes(why)
          ? answer
          : notYet(answer.status === 0 ? 'no metrics listener yet' : `${answer.status} ${answer.body}`);
      },
      30_000,
      200,
      wakeOn(serve.child.stdout, 'data'),
    );
    expect(notReady.status).to.equal(503);
    expect(notReady.body).to.include(`leader election: leader election cannot work: ${why}`);
    // Several Lease rounds later (2 s apart, backing off): still the one line.
    await new Promise((resolve) => setTimeout(resolve, 8_000));
    const warnings = logLines(serve, /does not exist/);
    expect(warnings.map((line) => [line.level, line.condition])).to.deep.equal([[WARN, 'lease namespace missing']]);
    expect(serve.stdout().join('\n')).not.to.match(/HTTP-Code|Headers:/);

    await core.createNamespace({ body: { metadata: { name: missing, labels: { 'vgpu-warden.test/run': 'true' } } } });
    try {
      await eventually(
        '/readyz 200 once the namespace exists',
        async () => {
          const answer = await readyz(serve);
          return answer.status === 200 ? true : notYet(`${answer.status} ${answer.body}`);
        },
        40_000,
        250,
      );
      await eventually(
        'the Lease to be held',
        async () => {
          const holder = await leaseHolder(leaseName, missing);
          return holder ? true : notYet(holder === undefined ? 'no Lease' : 'a Lease without holder');
        },
        20_000,
        250,
      );
      // The recovery line is written after the Lease write returns, so it may follow our read of the Lease.
      const recovered = await eventually(
        'the recovery line',
        () => {
          const lines = logLines(serve, /^recovered after .*: lease namespace missing$/);
          return Promise.resolve(
            lines.length > 0 ? lines : notYet(`last line: ${serve.stdout().at(-1)?.slice(0, 300) ?? 'none'}`),
          );
        },
        10_000,
        100,
        wakeOn(serve.child.stdout, 'data'),
      );
      expect(recovered.map((line) => line.level)).to.deep.equal([INFO]);
      serve.child.kill('SIGTERM');
      expect((await serve.exited).code).to.equal(0);
      expect(await leaseHolder(leaseName, missing), 'released on SIGTERM').to.equal('');
    } finally {
      await core.deleteNamespace({ name: missing }).catch(() => undefined);
    }
  });
});
