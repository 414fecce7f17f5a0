import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  AdmissionregistrationV1Api,
  loadYaml,
  PatchStrategy,
  setHeaderOptions,
  type V1MutatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { expect } from 'chai';
import { findFreePorts } from '../../src/local/free-port.js';
import { finished, spawnTsx, type CapturedProcess } from '../support/captured-process.js';
import { httpGet } from '../support/http-get.js';
import { eventually, notYet, testCluster, wakeOn } from '../support/test-cluster.js';

const main = resolve(import.meta.dirname, '..', '..', 'src', 'main.ts');
const manifest = resolve(import.meta.dirname, '..', '..', 'manifests', 'webhook.yaml');

/** How many lines the process wrote and its last one, clipped: what a wait on it saw last. */
function describeOutput(output: string): string {
  const lines = output.split('\n').filter((line) => line !== '');
  return `${lines.length} output lines, last: ${lines.at(-1)?.slice(0, 300) ?? 'none'}`;
}

describe('vgpu-warden serve (the real process)', function () {
  this.timeout(90_000);

  it('makes its certificates, patches the caBundle, serves the apiserver and stops cleanly on SIGTERM', async () => {
    const { kubeConfig, core, namespace, controlPlane } = testCluster();
    const admission = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    const certDir = mkdtempSync(join(tmpdir(), 'serve-certs-'));
    const [port = 0, extenderPort = 0, metricsPort = 0] = await findFreePorts(3);
    const configName = `serve-test-${namespace}`.slice(0, 60);
    const shipped = loadYaml<V1MutatingWebhookConfiguration>(readFileSync(manifest, 'utf8'));
    // The shipped configuration with an empty caBundle: serve must fill it in.
    await admission.createMutatingWebhookConfiguration({
      body: {
        metadata: { name: configName },
        webhooks: (shipped.webhooks ?? []).map((webhook) => ({
          ...webhook,
          failurePolicy: 'Fail',
          clientConfig: { url: `https://127.0.0.1:${port}/mutate` },
          namespaceSelector: { matchLabels: { 'vgpu-warden.test/serve': namespace } },
        })),
      },
    });
    let serve: CapturedProcess | undefined;
    try {
      serve = spawnTsx(main, ['serve'], {
        env: {
          // The test's namespace for the Lease: /readyz is 503 while leader election cannot work.
          ...process.env,
          KUBECONFIG: controlPlane.kubeconfigPath,
          POD_NAMESPACE: namespace,
          CERT_DIR: certDir,
          WEBHOOK_HOST: '127.0.0.1',
          WEBHOOK_PORT: String(port),
          WEBHOOK_CONFIG_NAME: configName,
          CERT_HOSTS: '127.0.0.1',
          LOG_LEVEL: 'info',
          EXTENDER_PORT: String(extenderPort),
          METRICS_PORT: String(metricsPort),
        },
      });
      const { child, output } = serve;

      // serve logs as it makes its certificates: each line wakes the check, polling stays the fallback.
      const caPem = await eventually(
        'serve to write its CA',
        () =>
          Promise.resolve(
            (() => {
              try {
                return readFileSync(join(certDir, 'ca.crt'), 'utf8');
              } catch (error) {
                return notYet(
                  `no ca.crt (${(error as NodeJS.ErrnoException).code ?? String(error)}); ${describeOutput(output())}`,
                );
              }
            })(),
          ),
        30_000,
        200,
        wakeOn(child.stdout, 'data'),
      );
      await eventually(
        'serve to be ready',
        async () => {
          const answer = await httpGet(port, '/readyz', { caPem }).catch(() => ({ status: 0, body: 'no answer' }));
          return answer.status === 200 ? true : notYet(`/readyz ${answer.status}: ${answer.body.slice(0, 300)}`);
        },
        30_000,
        200,
      );
      const patched = await admission.readMutatingWebhookConfiguration({ name: configName });
      for (const webhook of patched.webhooks ?? [])
        expect(Buffer.from(webhook.clientConfig.caBundle ?? '', 'base64').toString()).to.include(caPem.trim());

      await core.patchNamespace(
        { name: namespace, body: { metadata: { labels: { 'vgpu-warden.test/serve': namespace } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      const body = {
        metadata: { name: 'gpu' },
        spec: { containers: [{ name: 'c', image: 'cuda', resources: { limits: { 'nvidia.com/gpu': '1' } } }] },
      };
      const mutated = await eventually(
        'the apiserver to call serve',
        async () => {
          const created = await core.createNamespacedPod({ namespace, body, dryRun: 'All' });
          return created.spec?.schedulerName === 'hami-scheduler'
            ? created
            : notYet(
                `dry-run pod got schedulerName ${created.spec?.schedulerName ?? 'none'}; serve: ${describeOutput(output())}`,
              );
        },
        20_000,
        200,
      );
      expect(mutated.spec?.containers[0]?.resources?.limits?.['nvidia.com/gpucores']).to.equal('100');

      child.kill('SIGTERM');
      const { code } = await serve.exited;
      expect(code, output()).to.equal(0);
      expect(output()).to.include('admission webhook listening').and.include('"signal":"SIGTERM"');
    } finally {
      serve?.child.kill('SIGKILL');
      await admission.deleteMutatingWebhookConfiguration({ name: configName }).catch(() => undefined);
      rmSync(certDir, { recursive: true, force: true });
    }
  });

  it('refuses to start with the extender off loopback and no client authentication: exit 2, one line, no stack', async () => {
    const { controlPlane } = testCluster();
    const run = async (args: string[], env: Record<string, string>) => {
      const inherited = Object.fromEntries(
        Object.entries(process.env).filter(([name]) => !name.startsWith('EXTENDER_')),
      );
      const { code, stdout, stderr } = await finished(
        spawnTsx(main, ['serve', ...args], { env: { ...inherited, KUBECONFIG: controlPlane.kubeconfigPath, ...env } }),
      );
      return { code, stdout, stderr };
    };
    // The messages are config.ts's (ConfigError): the setting, where its value came from, the value, the rule.
    const why =
      'is not a loopback address, so EXTENDER_CLIENT_AUTH=true is required: without client certificates anyone who reaches the extender could bind pods';
    expect(await run([], { EXTENDER_HOST: '0.0.0.0' })).to.deep.equal({
      code: 2,
      stdout: '',
      stderr: `vgpu-warden: EXTENDER_HOST (env) = 0.0.0.0 ${why}\n`,
    });
    expect(await run(['--extender-host', '10.1.2.3'], {})).to.deep.equal({
      code: 2,
      stdout: '',
      stderr: `vgpu-warden: EXTENDER_HOST (flag --extender-host) = 10.1.2.3 ${why}\n`,
    });
    // Client authentication on, but no Secret to keep the CA in: refused just as plainly.
    expect(await run([], { EXTENDER_HOST: '0.0.0.0', EXTENDER_CLIENT_AUTH: 'true' })).to.deep.equal({
      code: 2,
      stdout: '',
      stderr:
        "vgpu-warden: EXTENDER_CLIENT_AUTH (env) = true needs CERT_SECRET_NAME: kube-scheduler's client certificate is issued from the CA kept in that Secret\n",
    });
  });
});
