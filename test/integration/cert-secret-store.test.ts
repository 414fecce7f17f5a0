import { X509Certificate } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { setTimeout as delay } from 'node:timers/promises';
import {
  AdmissionregistrationV1Api,
  type CoreV1Api,
  type V1MutatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { expect } from 'chai';
import { CaBundlePatcher } from '../../src/tls/ca-bundle-patcher.js';
import type { ServingMaterial } from '../../src/tls/cert-bundle.js';
import { CertKeeper, type CaBundleTarget } from '../../src/tls/cert-keeper.js';
import { SecretCertStore } from '../../src/tls/secret-cert-store.js';
import { servingNames } from '../../src/tls/serving-names.js';
import { barrier, certificatesIn, fingerprintsOf, HookedStore } from '../support/tls-helpers.js';
import { eventually, notYet, testCluster, uniqueName } from '../support/test-cluster.js';

const DAY = 86_400_000;
const SECRET = 'vgpu-warden-certs';
const NAMES = servingNames({ serviceName: 'vgpu-warden', namespace: 'kube-system', extraHosts: [] });

const decode = (value: string | undefined): string => Buffer.from(value ?? '', 'base64').toString('utf8');
const fingerprint = (pem: string): string => new X509Certificate(pem).fingerprint256;

interface Replica {
  keeper: CertKeeper;
  store: HookedStore;
  served: ServingMaterial[];
}

/**
 * One replica: a CertKeeper over the shared Secret. Every load passes `gate()` first when set, so a
 * test can hold both replicas until both have read, making them race for real on the next write.
 */
function replica(
  core: CoreV1Api,
  namespace: string,
  options: { gate?: () => Promise<void> | undefined; caBundleTarget?: CaBundleTarget } = {},
): Replica {
  const served: ServingMaterial[] = [];
  const store = new HookedStore(new SecretCertStore({ core, namespace, name: SECRET }), {
    afterLoad: () => options.gate?.() ?? Promise.resolve(),
  });
  const keeper = new CertKeeper({
    store,
    names: NAMES,
    validityDays: 30,
    caValidityDays: 365,
    renewBeforeMs: 7 * DAY,
    caBundleTarget: options.caBundleTarget,
    propagationDelayMs: 0,
    previousCaRetentionMs: 60_000,
    onChange: (material) => served.push(material),
  });
  return { keeper, store, served };
}

function webhookConfiguration(name: string): V1MutatingWebhookConfiguration {
  // Reachable by nobody: a closed loopback port, a resource and selector no test object matches,
  // and Ignore on failure, so this configuration cannot disturb other tests of the run.
  const webhook = (suffix: string) => ({
    name: `${suffix}.cert-test.vgpu-warden.io`,
    admissionReviewVersions: ['v1'],
    sideEffects: 'None',
    failurePolicy: 'Ignore',
    timeoutSeconds: 1,
    clientConfig: { url: 'https://127.0.0.1:1/x' },
    rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] }],
    objectSelector: { matchLabels: { 'vgpu-warden.test/never': 'matches' } },
  });
  return { metadata: { name }, webhooks: [webhook('first'), webhook('second')] };
}

describe('certificates on a real apiserver', () => {
  it('two replicas starting at once on one Secret end with the same CA and leaf', async () => {
    const { core, namespace } = testCluster();
    const bothRead = barrier(2);
    const gate = () => bothRead();
    const [a, b] = [replica(core, namespace, { gate }), replica(core, namespace, { gate })];

    const [fromA, fromB] = await Promise.all([a.keeper.ensure(), b.keeper.ensure()]);

    // Both read "no Secret", both made a CA, one create won and the other got a real 409 and adopted.
    expect(a.store.conflicts + b.store.conflicts).to.equal(1);
    expect(fromA).to.deep.equal(fromB);
    const secret = await core.readNamespacedSecret({ name: SECRET, namespace });
    expect(secret.type).to.equal('kubernetes.io/tls');
    expect(decode(secret.data?.['tls.crt'])).to.equal(fromA.certPem);
    expect(decode(secret.data?.['tls.key'])).to.equal(fromA.keyPem);
    expect(decode(secret.data?.['ca.crt'])).to.equal(fromA.caBundlePem);
    expect(secret.data).to.not.have.property('ca-previous.crt');
    expect(certificatesIn(fromA.caBundlePem)).to.have.length(1);
    expect(a.served).to.deep.equal([fromA]);
    expect(b.served).to.deep.equal([fromB]);
  });

  it('concurrent forced CA rotations leave one new CA with the original as previous, and a third replica serves it as it is', async () => {
    const { core, namespace } = testCluster();
    const held: { gate?: () => Promise<void> } = {};
    const gate = () => held.gate?.();
    const [a, b] = [replica(core, namespace, { gate }), replica(core, namespace, { gate })];
    const original = await a.keeper.ensure();
    await b.keeper.ensure();
    held.gate = barrier(2);

    const [fromA, fromB] = await Promise.all([a.keeper.rotateNow('all'), b.keeper.rotateNow('all')]);

    // The loser's replace carried a stale resourceVersion (409); it re-read and found the rotation done.
    expect(a.store.conflicts + b.store.conflicts).to.equal(1);
    expect(fromA).to.deep.equal(fromB);
    const [current, previous] = fingerprintsOf(fromA.caBundlePem);
    expect(current).to.not.equal(fingerprint(original.caBundlePem));
    expect(previous).to.equal(fingerprint(original.caBundlePem));
    const secret = await core.readNamespacedSecret({ name: SECRET, namespace });
    expect(decode(secret.data?.['ca-previous.crt'])).to.equal(original.caBundlePem);

    // A third replica that only ensures sees the rotated set as it is.
    expect(await replica(core, namespace).keeper.ensure()).to.deep.equal(fromA);
  });

  it('fills an existing placeholder Secret, keeping its type, labels and other keys', async () => {
    const { core, namespace } = testCluster();
    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: SECRET, labels: { 'app.kubernetes.io/managed-by': 'Helm' } },
        type: 'kubernetes.io/tls',
        data: { 'tls.crt': '', 'tls.key': '', extra: Buffer.from('keep me').toString('base64') },
      },
    });

    const material = await replica(core, namespace).keeper.ensure();

    const secret = await core.readNamespacedSecret({ name: SECRET, namespace });
    expect(secret.type).to.equal('kubernetes.io/tls');
    expect(secret.metadata?.labels).to.deep.equal({ 'app.kubernetes.io/managed-by': 'Helm' });
    expect(decode(secret.data?.extra)).to.equal('keep me');
    expect(decode(secret.data?.['tls.crt'])).to.equal(material.certPem);
    expect(decode(secret.data?.['ca.key'])).to.include('PRIVATE KEY');
  });

  describe('caBundle of a MutatingWebhookConfiguration', () => {
    let name: string;
    let admission: AdmissionregistrationV1Api;

    beforeEach(async () => {
      name = uniqueName('vgpu-warden-cert-test');
      admission = testCluster().kubeConfig.makeApiClient(AdmissionregistrationV1Api);
      await admission.createMutatingWebhookConfiguration({ body: webhookConfiguration(name) });
    });

    afterEach(async () => {
      await admission.deleteMutatingWebhookConfiguration({ name });
    });

    const caBundles = async (): Promise<{ bundles: string[]; resourceVersion: string | undefined }> => {
      const configuration = await admission.readMutatingWebhookConfiguration({ name });
      return {
        bundles: (configuration.webhooks ?? []).map((webhook) => decode(webhook.clientConfig.caBundle)),
        resourceVersion: configuration.metadata?.resourceVersion,
      };
    };

    it('patches every webhook when the caBundle differs and leaves the configuration untouched when equal', async () => {
      const { core, namespace } = testCluster();
      const material = await replica(core, namespace).keeper.ensure();
      const patcher = new CaBundlePatcher({ api: admission, configurationName: name });

      const first = await patcher.apply(material.caBundlePem);
      expect(first).to.deep.include({
        outcome: 'updated',
        webhooks: ['first.cert-test.vgpu-warden.io', 'second.cert-test.vgpu-warden.io'],
      });
      const after = await caBundles();
      expect(after.bundles).to.deep.equal([material.caBundlePem, material.caBundlePem]);

      const second = await patcher.apply(material.caBundlePem);
      expect(second).to.deep.equal({
        outcome: 'unchanged',
        configurationName: name,
        resourceVersion: after.resourceVersion,
      });
      expect((await caBundles()).resourceVersion).to.equal(after.resourceVersion);

      expect(
        await new CaBundlePatcher({ api: admission, configurationName: `${name}-missing` }).apply(material.caBundlePem),
      ).to.deep.equal({ outcome: 'not-found', configurationName: `${name}-missing` });
    });

    it('after a concurrent edit (a real 409) reads again and patches, keeping the other edit', async () => {
      const { core, namespace } = testCluster();
      const material = await replica(core, namespace).keeper.ensure();
      let reads = 0;
      // The real API, except that right after the patcher's first read someone else (Helm, say)
      // really writes the configuration, so the patcher's replace carries a stale resourceVersion.
      const racing = new Proxy(admission, {
        get(target, property, receiver) {
          if (property !== 'readMutatingWebhookConfiguration')
            return Reflect.get(target, property, receiver) as unknown;
          return async (param: { name: string }) => {
            const read = await target.readMutatingWebhookConfiguration(param);
            if (++reads === 1) {
              const theirs = await target.readMutatingWebhookConfiguration(param);
              theirs.metadata = { ...theirs.metadata, labels: { edited: 'by-someone-else' } };
              await target.replaceMutatingWebhookConfiguration({ name: param.name, body: theirs });
            }
            return read;
          };
        },
      });

      const result = await new CaBundlePatcher({ api: racing, configurationName: name }).apply(material.caBundlePem);

      expect(result.outcome).to.equal('updated');
      expect(reads).to.equal(2);
      const configuration = await admission.readMutatingWebhookConfiguration({ name });
      expect(configuration.metadata?.labels).to.deep.equal({ edited: 'by-someone-else' });
      expect((configuration.webhooks ?? []).map((webhook) => decode(webhook.clientConfig.caBundle))).to.deep.equal([
        material.caBundlePem,
        material.caBundlePem,
      ]);
    });

    it('a CA rotation puts [new, old] into the real configuration before the new leaf is handed out', async () => {
      const { core, namespace } = testCluster();
      const patcher = new CaBundlePatcher({ api: admission, configurationName: name });
      const events: string[] = [];
      let seenWhileWaiting: string[] = [];
      const keeper = new CertKeeper({
        store: new SecretCertStore({ core, namespace, name: SECRET }),
        names: NAMES,
        validityDays: 30,
        caValidityDays: 365,
        renewBeforeMs: 7 * DAY,
        caBundleTarget: patcher,
        propagationDelayMs: 2000,
        previousCaRetentionMs: 60_000,
        sleep: async (ms) => {
          events.push(`sleep ${ms}`);
          seenWhileWaiting = (await caBundles()).bundles;
        },
        onChange: () => events.push('onChange'),
      });
      const original = await keeper.ensure();
      events.length = 0;

      const rotated = await keeper.rotateNow('all');

      expect(events).to.deep.equal(['sleep 2000', 'onChange']);
      const expected = [fingerprintsOf(rotated.caBundlePem)[0], fingerprint(original.caBundlePem)];
      expect(seenWhileWaiting.map(fingerprintsOf)).to.deep.equal([expected, expected]);
      expect((await caBundles()).bundles).to.deep.equal([rotated.caBundlePem, rotated.caBundlePem]);
    });
  });

  describe('the apiserver calling a webhook through a CA rotation', () => {
    const PROBE_LABEL = 'vgpu-warden.test/cert-probe';

    /** A minimal webhook that allows everything and records which of its certificates each call met. */
    function allowingWebhook(material: ServingMaterial): { server: Server; presented: string[] } {
      const presented: string[] = [];
      const server = createServer({ cert: material.certPem, key: material.keyPem }, (request, response) => {
        const local = (request.socket as TLSSocket).getCertificate();
        presented.push(local !== null && 'fingerprint256' in local ? local.fingerprint256 : 'unknown');
        let body = '';
        request.on('data', (chunk: Buffer) => {
          body += chunk.toString();
        });
        request.on('end', () => {
          const review = JSON.parse(body) as { request?: { uid?: string } };
          response.setHeader('Content-Type', 'application/json');
          response.end(
            JSON.stringify({
              apiVersion: 'admission.k8s.io/v1',
              kind: 'AdmissionReview',
              response: { uid: review.request?.uid, allowed: true },
            }),
          );
        });
      });
      return { server, presented };
    }

    it('every call succeeds before, during and after the rotation, and the served certificate changes only after the caBundle', async function () {
      this.timeout(120_000);
      const { core, namespace, kubeConfig } = testCluster();
      const admission = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
      const configurationName = uniqueName('vgpu-warden-rotation-test');
      // onChange swaps the certificate of the running server, which starts once the first material exists.
      const serving: { server?: Server } = {};
      const keeper = new CertKeeper({
        store: new SecretCertStore({ core, namespace, name: SECRET }),
        names: NAMES,
        validityDays: 30,
        caValidityDays: 365,
        renewBeforeMs: 7 * DAY,
        caBundleTarget: new CaBundlePatcher({ api: admission, configurationName }),
        // The defaults' propagation delay; a short retention so the test sees the old CA go.
        previousCaRetentionMs: 4000,
        onChange: (material) => {
          serving.server?.setSecureContext({ cert: material.certPem, key: material.keyPem });
        },
      });
      const first = await keeper.ensure();
      const { server, presented } = allowingWebhook(first);
      serving.server = server;
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as AddressInfo;
      // failurePolicy Fail: a call the apiserver cannot make (an untrusted certificate) fails the create.
      await admission.createMutatingWebhookConfiguration({
        body: {
          metadata: { name: configurationName },
          webhooks: [
            {
              name: 'probe.cert-test.vgpu-warden.io',
              admissionReviewVersions: ['v1'],
              sideEffects: 'None',
              failurePolicy: 'Fail',
              timeoutSeconds: 5,
              clientConfig: { url: `https://127.0.0.1:${port}/mutate` },
              rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] }],
              objectSelector: { matchLabels: { [PROBE_LABEL]: namespace } },
            },
          ],
        },
      });
      const probe = () =>
        core.createNamespacedConfigMap({
          namespace,
          body: { metadata: { generateName: 'probe-', labels: { [PROBE_LABEL]: namespace } } },
        });
      try {
        await keeper.ensure();
        await eventually('the apiserver to call the webhook', async () => {
          await probe();
          return presented.length > 0 ? true : notYet('a probe ConfigMap created without a call to the webhook');
        });

        const failures: string[] = [];
        const probing = { on: true };
        const traffic = (async () => {
          while (probing.on) {
            await probe().catch((error: unknown) => {
              failures.push(apiStatusMessage(error));
            });
            await delay(20);
          }
        })();
        await delay(500);
        const rotated = await keeper.rotateNow('all');
        await delay(1000);
        const [newCa] = fingerprintsOf(rotated.caBundlePem);
        // Past the retention the old CA leaves the caBundle; the apiserver must go on trusting us.
        await delay(4000);
        const settled = await keeper.ensure();
        expect(fingerprintsOf(settled.caBundlePem)).to.deep.equal([newCa]);
        await delay(2000);
        probing.on = false;
        await traffic;

        expect(failures).to.deep.equal([]);
        const [oldLeaf, newLeaf] = [fingerprint(first.certPem), fingerprint(rotated.certPem)];
        expect(presented).to.include(oldLeaf);
        expect(presented.at(-1)).to.equal(newLeaf);
        // Once the new leaf was served, the old one never was again.
        expect(presented.slice(presented.indexOf(newLeaf))).to.not.include(oldLeaf);
      } finally {
        await admission.deleteMutatingWebhookConfiguration({ name: configurationName });
        server.close();
      }
    });
  });
});

function apiStatusMessage(error: unknown): string {
  const body = (error as { body?: unknown } | null)?.body;
  return typeof body === 'string' ? body : error instanceof Error ? error.message : String(error);
}
