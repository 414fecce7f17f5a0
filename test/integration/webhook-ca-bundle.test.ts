import { execFile } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import {
  AdmissionregistrationV1Api,
  dumpYaml,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1MutatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { expect } from 'chai';
import { startServer, type RunningServer } from '../../src/serve/start-server.js';
import { loadConfig } from '../../src/config/load.js';
import { apiStatusOf, httpStatusOf } from '../../src/kube/errors.js';
import { findFreePorts } from '../../src/local/free-port.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { caBundleFieldOf } from '../../src/tls/ca-bundle-drift.js';
import { findObject, loadManifestObjects } from '../support/manifests.js';
import { eventually, notYet, testCluster, uniqueName } from '../support/test-cluster.js';

const run = promisify(execFile);

/** How soon a reset must be repaired: "within seconds" (the periodic check alone took 10 minutes). */
const HEAL_WITHIN_MS = 5_000;

/** kubectl on PATH, if any; VGPU_WARDEN_KUBECTL=none takes the path CI takes (no kubectl). */
function findKubectl(): string | undefined {
  if (process.env.VGPU_WARDEN_KUBECTL === 'none') return undefined;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const path = join(dir, 'kubectl');
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

type ApplyOutcome = { ok: true } | { ok: false; conflict: boolean; message: string };

/**
 * `kubectl apply --server-side [--force-conflicts]` of one object. Where kubectl is installed it is
 * run as is; elsewhere (CI installs none) the test sends kubectl's request itself: a PATCH of type
 * application/apply-patch+yaml with fieldManager=kubectl and force as given.
 */
async function serverSideApply(
  kubeConfig: KubeConfig,
  kubeconfigPath: string,
  object: V1MutatingWebhookConfiguration,
  force: boolean,
): Promise<ApplyOutcome> {
  const kubectl = findKubectl();
  if (kubectl !== undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'ssa-'));
    const file = join(dir, 'webhook.yaml');
    writeFileSync(file, dumpYaml(object));
    try {
      await run(kubectl, [
        'apply',
        '--server-side',
        ...(force ? ['--force-conflicts'] : []),
        '-f',
        file,
        '--kubeconfig',
        kubeconfigPath,
      ]);
      return { ok: true };
    } catch (error) {
      const stderr = (error as { stderr?: string }).stderr ?? String(error);
      return { ok: false, conflict: /conflict/i.test(stderr), message: stderr.trim() };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  try {
    await KubernetesObjectApi.makeApiClient(kubeConfig).patch(
      object,
      undefined,
      undefined,
      'kubectl',
      force,
      PatchStrategy.ServerSideApply,
    );
    return { ok: true };
  } catch (error) {
    return { ok: false, conflict: httpStatusOf(error) === 409, message: apiStatusOf(error)?.message ?? String(error) };
  }
}

/**
 * The shipped MutatingWebhookConfiguration under a name of this test, made to match no namespace
 * (no other test's pods are sent to it). Everything else, the absence of caBundle included, is as
 * shipped.
 */
function shippedConfiguration(name: string, namespace: string): V1MutatingWebhookConfiguration {
  const shipped = structuredClone(findObject(loadManifestObjects(), 'MutatingWebhookConfiguration', 'vgpu-warden'));
  shipped.metadata = { ...shipped.metadata, name };
  for (const webhook of shipped.webhooks ?? []) {
    expect(webhook.clientConfig, 'the manifest must not carry a caBundle').to.not.have.property('caBundle');
    webhook.namespaceSelector = { matchLabels: { 'vgpu-warden.test/never': namespace } };
    if (webhook.clientConfig.service) webhook.clientConfig.service.namespace = namespace;
  }
  return shipped;
}

/** The manifest as it was before: `caBundle: ""` in every webhook. */
function withEmptyCaBundle(configuration: V1MutatingWebhookConfiguration): V1MutatingWebhookConfiguration {
  const copy = structuredClone(configuration);
  for (const webhook of copy.webhooks ?? []) webhook.clientConfig.caBundle = '';
  return copy;
}

/** Each webhook's caBundle as empty, the wanted one or another (by length): what a wait for the bundle saw. */
function describeBundles(bundles: string[], wanted: string): string {
  const each = bundles.map(
    (bundle, index) =>
      `webhook ${index}: ${bundle === '' ? 'empty' : bundle === wanted ? 'ours' : `another (${bundle.length} chars)`}`,
  );
  return each.length === 0 ? 'no webhooks' : each.join(', ');
}

function logSink(lines: string[]): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(
        ...chunk
          .toString()
          .split('\n')
          .filter((line) => line !== ''),
      );
      done();
    },
  });
}

async function serve(
  namespace: string,
  kubeconfigPath: string,
  configName: string,
  certSecret: string,
  lines: string[],
): Promise<RunningServer> {
  const [webhookPort = 0, extenderPort = 0, metricsPort = 0] = await findFreePorts(3);
  return startServer(
    loadConfig({
      KUBECONFIG: kubeconfigPath,
      POD_NAMESPACE: namespace,
      CERT_SECRET_NAME: certSecret,
      WEBHOOK_CONFIG_NAME: configName,
      WEBHOOK_HOST: '127.0.0.1',
      WEBHOOK_PORT: String(webhookPort),
      EXTENDER_PORT: String(extenderPort),
      METRICS_HOST: '127.0.0.1',
      METRICS_PORT: String(metricsPort),
      SWEEP_ENABLED: 'false',
      LEADER_ELECTION: 'false',
    }),
    createLogger('info', logSink(lines)),
  );
}

describe('GitOps-safe webhook configuration: server-side apply of the manifest, caBundle injected and repaired by serve (real apiserver)', function () {
  this.timeout(120_000);

  it('applies without conflict, keeps the injected caBundle across re-applies, and repairs a forced reset, a JSON patch and a re-create within seconds', async () => {
    const { kubeConfig, namespace, controlPlane } = testCluster();
    const admission = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    const name = uniqueName('ca-bundle');
    const manifest = shippedConfiguration(name, namespace);
    const lines: string[] = [];
    let server: RunningServer | undefined;
    const read = () => admission.readMutatingWebhookConfiguration({ name });
    const bundles = async () => ((await read()).webhooks ?? []).map((webhook) => webhook.clientConfig.caBundle ?? '');
    const ours = () => caBundleFieldOf(server?.keeper.current()?.caBundlePem ?? 'none');
    const healed = async (what: string, since: number) => {
      await eventually(
        `serve to repair the caBundle after ${what}`,
        async () => {
          const current = await bundles();
          return current.every((bundle) => bundle === ours()) ? true : notYet(describeBundles(current, ours()));
        },
        HEAL_WITHIN_MS,
        50,
      ).catch((error: unknown) => {
        throw new Error(`${(error as Error).message}; serve said:\n${lines.slice(-20).join('\n')}`);
      });
      return Date.now() - since;
    };
    try {
      expect(await serverSideApply(kubeConfig, controlPlane.kubeconfigPath, manifest, false)).to.deep.equal({
        ok: true,
      });
      expect(await bundles()).to.deep.equal(['', '']);

      server = await serve(namespace, controlPlane.kubeconfigPath, name, uniqueName('ca-bundle-tls'), lines);
      await eventually(
        'serve to inject its caBundle',
        async () => {
          const current = await bundles();
          return current.every((bundle) => bundle !== '' && bundle === ours())
            ? true
            : notYet(
                `${describeBundles(current, ours())}; serve has ${server?.keeper.current() === undefined ? 'no' : 'a'} CA`,
              );
        },
        20_000,
        100,
      );

      // A GitOps re-sync of the same manifest: no conflict (the manifest does not name the field),
      // and the bundle stays.
      expect(await serverSideApply(kubeConfig, controlPlane.kubeconfigPath, manifest, false)).to.deep.equal({
        ok: true,
      });
      expect(await bundles()).to.deep.equal([ours(), ours()]);

      // The old manifest (caBundle: "") conflicts with serve's ownership of the field...
      const old = withEmptyCaBundle(manifest);
      const refused = await serverSideApply(kubeConfig, controlPlane.kubeconfigPath, old, false);
      expect(refused.ok, 'an apply that names caBundle conflicts').to.equal(false);
      expect(!refused.ok && refused.conflict, refused.ok ? '' : refused.message).to.equal(true);
      // ...and forcing ownership blanks it: repaired within seconds.
      let since = Date.now();
      expect(await serverSideApply(kubeConfig, controlPlane.kubeconfigPath, old, true)).to.deep.equal({ ok: true });
      expect(await healed('a forced server-side apply with caBundle ""', since)).to.be.below(HEAL_WITHIN_MS);
      // The repair's log line follows its write: the test may read the repaired bundle first.
      await eventually(
        'serve to log the repair',
        () =>
          Promise.resolve(
            lines.some((line) => line.includes('re-injected'))
              ? true
              : notYet(`${lines.length} log lines, none re-injected; last: ${lines.at(-1)?.slice(0, 300) ?? 'none'}`),
          ),
        5_000,
        20,
      );

      // The current manifest applied again after that: serve owns caBundle again, so nothing is removed.
      expect(await serverSideApply(kubeConfig, controlPlane.kubeconfigPath, manifest, true)).to.deep.equal({
        ok: true,
      });
      expect(await bundles()).to.deep.equal([ours(), ours()]);

      since = Date.now();
      await admission.patchMutatingWebhookConfiguration(
        { name, body: [{ op: 'remove', path: '/webhooks/1/clientConfig/caBundle' }] },
        setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
      );
      expect(await healed('a JSON patch removing it', since)).to.be.below(HEAL_WITHIN_MS);

      since = Date.now();
      await admission.deleteMutatingWebhookConfiguration({ name });
      expect(await serverSideApply(kubeConfig, controlPlane.kubeconfigPath, manifest, false)).to.deep.equal({
        ok: true,
      });
      expect(await healed('a delete and re-create', since)).to.be.below(HEAL_WITHIN_MS);
    } finally {
      await server?.stop();
      await admission.deleteMutatingWebhookConfiguration({ name }).catch(() => undefined);
    }
  });

  it('two replicas sharing the certificate Secret repair a reset and then leave the configuration alone', async () => {
    const { kubeConfig, namespace, controlPlane } = testCluster();
    const admission = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    const name = uniqueName('ca-bundle-2');
    const secret = uniqueName('ca-bundle-tls');
    const lines: string[] = [];
    const servers: RunningServer[] = [];
    try {
      expect(
        await serverSideApply(kubeConfig, controlPlane.kubeconfigPath, shippedConfiguration(name, namespace), false),
      ).to.deep.equal({ ok: true });
      servers.push(await serve(namespace, controlPlane.kubeconfigPath, name, secret, lines));
      servers.push(await serve(namespace, controlPlane.kubeconfigPath, name, secret, lines));
      const wanted = caBundleFieldOf(servers[0]!.keeper.current()!.caBundlePem);
      expect(caBundleFieldOf(servers[1]!.keeper.current()!.caBundlePem), 'one CA, shared through the Secret').to.equal(
        wanted,
      );
      const bundles = async () =>
        ((await admission.readMutatingWebhookConfiguration({ name })).webhooks ?? []).map(
          (webhook) => webhook.clientConfig.caBundle ?? '',
        );
      await eventually(
        'the caBundle to be injected',
        async () => {
          const current = await bundles();
          return current.every((bundle) => bundle === wanted) ? true : notYet(describeBundles(current, wanted));
        },
        20_000,
        100,
      );

      await admission.patchMutatingWebhookConfiguration(
        {
          name,
          body: [
            { op: 'replace', path: '/webhooks/0/clientConfig/caBundle', value: '' },
            { op: 'replace', path: '/webhooks/1/clientConfig/caBundle', value: '' },
          ],
        },
        setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
      );
      await eventually(
        'the reset to be repaired',
        async () => {
          const current = await bundles();
          return current.every((bundle) => bundle === wanted) ? true : notYet(describeBundles(current, wanted));
        },
        HEAL_WITHIN_MS,
        50,
      );
      // Settled: no replica keeps rewriting it (its resourceVersion stays put).
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const settled = (await admission.readMutatingWebhookConfiguration({ name })).metadata?.resourceVersion;
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      expect((await admission.readMutatingWebhookConfiguration({ name })).metadata?.resourceVersion).to.equal(settled);
      expect(
        lines.filter((line) => line.includes('another writer keeps changing it')),
        'the replicas fought',
      ).to.deep.equal([]);
    } finally {
      for (const server of servers) await server.stop();
      await admission.deleteMutatingWebhookConfiguration({ name }).catch(() => undefined);
    }
  });
});
