import { createPrivateKey, X509Certificate } from 'node:crypto';
import { expect } from 'chai';
import { startServer, type RunningServer } from '../../src/serve/start-server.js';
import { loadConfig } from '../../src/config/load.js';
import { findFreePorts } from '../../src/local/free-port.js';
import { simulatedGpuNode } from '../../src/local/simulated-gpu-node.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { issueCertificate } from '../../src/tls/certificates.js';
import {
  CLIENT_AUTH_OID,
  commonNameOf,
  extendedKeyUsageOf,
  SCHEDULER_CLIENT_COMMON_NAME,
} from '../../src/tls/client-cert-policy.js';
import { mtlsRequest, nonLoopbackAddress, type ClientCredentials, type MtlsAnswer } from '../support/mtls-request.js';
import { certificatesIn } from '../support/tls-helpers.js';
import { eventually, notYet, testCluster, uniqueName } from '../support/test-cluster.js';

const CA_SECRET = 'warden-tls';
const CLIENT_SECRET = 'scheduler-client';

const text = (data: Record<string, string> | undefined, key: string): string =>
  Buffer.from(data?.[key] ?? '', 'base64').toString('utf8');

describe("the extender off loopback, serving only kube-scheduler's client certificate (vgpu-warden serve in process)", function () {
  this.timeout(90_000);

  it('publishes the client certificate in its own Secret, refuses everyone else before bind, binds for kube-scheduler, and follows a CA rotation', async () => {
    const { core, namespace, controlPlane } = testCluster();
    const address = nonLoopbackAddress();
    const node = uniqueName('mtls-node');
    let server: RunningServer | undefined;
    const [extenderPort = 0, webhookPort = 0, metricsPort = 0] = await findFreePorts(3);
    try {
      server = await startServer(
        loadConfig({
          KUBECONFIG: controlPlane.kubeconfigPath,
          POD_NAMESPACE: namespace,
          CERT_SECRET_NAME: CA_SECRET,
          EXTENDER_CLIENT_SECRET_NAME: CLIENT_SECRET,
          EXTENDER_HOST: '0.0.0.0',
          EXTENDER_PORT: String(extenderPort),
          EXTENDER_CLIENT_AUTH: 'true',
          CERT_HOSTS: address,
          WEBHOOK_HOST: '127.0.0.1',
          WEBHOOK_PORT: String(webhookPort),
          METRICS_HOST: '127.0.0.1',
          METRICS_PORT: String(metricsPort),
          SWEEP_ENABLED: 'false',
          LEADER_ELECTION: 'false',
        }),
        createLogger('silent'),
      );
      const port = server.extender.port;

      // The Secret kube-scheduler mounts: its certificate and key and the caBundle, never the CA key.
      const published = await core.readNamespacedSecret({ name: CLIENT_SECRET, namespace });
      expect(published.type).to.equal('kubernetes.io/tls');
      expect(Object.keys(published.data ?? {}).sort()).to.deep.equal(['ca.crt', 'tls.crt', 'tls.key']);
      const caSecret = await core.readNamespacedSecret({ name: CA_SECRET, namespace });
      const caPem = text(caSecret.data, 'ca.crt');
      const scheduler: ClientCredentials = {
        certPem: text(published.data, 'tls.crt'),
        keyPem: text(published.data, 'tls.key'),
      };
      const clientCert = new X509Certificate(scheduler.certPem);
      expect(commonNameOf(clientCert)).to.equal(SCHEDULER_CLIENT_COMMON_NAME);
      expect(extendedKeyUsageOf(clientCert)).to.deep.equal([CLIENT_AUTH_OID]);
      expect(clientCert.verify(new X509Certificate(caPem).publicKey)).to.equal(true);
      expect(text(published.data, 'ca.crt')).to.equal(caPem);

      // A GPU pod waiting for a bind, and a GPU node to bind it to.
      await core.createNode({ body: simulatedGpuNode({ name: node, gpus: 2 }) });
      const pod = await core.createNamespacedPod({
        namespace,
        body: {
          metadata: { name: 'train-0' },
          spec: {
            schedulerName: 'nobody',
            containers: [
              {
                name: 'main',
                image: 'registry.invalid/none:1',
                resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1000' } },
              },
            ],
          },
        },
      });
      const { cache } = server;
      await eventually(
        'the state store to see the pod and the node',
        () =>
          Promise.resolve(
            cache.pod(namespace, 'train-0') !== undefined && cache.node(node) !== undefined
              ? true
              : notYet(
                  `pod train-0 ${cache.pod(namespace, 'train-0') === undefined ? 'absent' : 'present'}, node ${cache.node(node) === undefined ? 'absent' : 'present'} in the store`,
                ),
          ),
        20_000,
        100,
        (recheck) => {
          const unsubscribe = [cache.onNodeChange(recheck), cache.onPodChange(recheck)];
          return () => {
            for (const off of unsubscribe) off();
          };
        },
      );
      const body = JSON.stringify({
        PodName: 'train-0',
        PodNamespace: namespace,
        PodUID: pod.metadata?.uid,
        Node: node,
      });
      const bind = (client: ClientCredentials | undefined): Promise<MtlsAnswer> =>
        mtlsRequest({ host: address, port, path: '/bind', caPem, body, ...(client ? { client } : {}) });
      const nodeNameOf = async () => (await core.readNamespacedPod({ name: 'train-0', namespace })).spec?.nodeName;

      // Nobody else gets as far as the bind: no certificate, our serving certificate replayed as a
      // client's, a client certificate of our CA under another name.
      expect(await bind(undefined), 'no certificate').to.have.property('refused');
      const serving = { certPem: text(caSecret.data, 'tls.crt'), keyPem: text(caSecret.data, 'tls.key') };
      const replayed = await bind(serving);
      if ('status' in replayed) expect(replayed.status, 'the serving certificate').to.equal(403);
      const ca = { certPem: caPem, keyPem: text(caSecret.data, 'ca.key') };
      const impostor = issueCertificate(ca, { commonName: 'not-the-scheduler', usage: 'client', validityDays: 1 });
      expect(await bind(impostor), 'another name').to.deep.include({ status: 403 });
      expect(await nodeNameOf(), 'bound by a refused caller').to.equal(undefined);

      expect(await bind(scheduler)).to.deep.equal({ status: 200, body: '{"Error":""}' });
      expect(await nodeNameOf()).to.equal(node);

      // A CA rotation issues a new client certificate from the new CA; the old one keeps working
      // while the previous CA is still trusted, so kube-scheduler has time to pick the new one up.
      await server.keeper.rotateNow('all');
      const rotated = await core.readNamespacedSecret({ name: CLIENT_SECRET, namespace });
      const newCaPem = text((await core.readNamespacedSecret({ name: CA_SECRET, namespace })).data, 'ca.crt');
      expect(newCaPem).to.not.equal(caPem);
      const renewed: ClientCredentials = {
        certPem: text(rotated.data, 'tls.crt'),
        keyPem: text(rotated.data, 'tls.key'),
      };
      expect(new X509Certificate(renewed.certPem).verify(new X509Certificate(newCaPem).publicKey)).to.equal(true);
      expect(new X509Certificate(renewed.certPem).checkPrivateKey(createPrivateKey(renewed.keyPem))).to.equal(true);
      expect(certificatesIn(text(rotated.data, 'ca.crt')).map((cert) => cert.fingerprint256)).to.deep.equal(
        [newCaPem, caPem].map((pem) => new X509Certificate(pem).fingerprint256),
      );
      const both = `${newCaPem}\n${caPem}`;
      for (const [what, client] of [
        ['renewed', renewed],
        ['previous', scheduler],
      ] as const) {
        const answer = await mtlsRequest({ host: address, port, path: '/readyz', caPem: both, client });
        expect(answer, `the ${what} client certificate`).to.deep.include({ status: 200 });
      }
    } finally {
      await server?.stop();
      await core.deleteNode({ name: node }).catch(() => undefined);
    }
  });
});
