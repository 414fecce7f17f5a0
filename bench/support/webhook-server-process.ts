// Runs the real webhook (handler, express app, TLS listener, NodeLocks) in its own process for
// bench/webhook-bench.ts, so the load generator does not share its event loop. Prints one JSON
// line {"port","caPem"} when listening. Input: env KUBECONFIG_PATH.
import { CoreV1Api } from '@kubernetes/client-node';
import { PodAdmissionHandler } from '../../src/admission/pod-admission-handler.js';
import { loadKubeConfig } from '../../src/kube/client.js';
import { KubeNodeLockApi } from '../../src/lock/kube-node-lock-api.js';
import { NodeLocks } from '../../src/lock/node-locks.js';
import { HttpsListener } from '../../src/server/https-listener.js';
import { createWebhookApp } from '../../src/server/webhook-app.js';
import { createCertificateAuthority, issueCertificate } from '../../src/tls/certificates.js';

const core = loadKubeConfig(process.env.KUBECONFIG_PATH).makeApiClient(CoreV1Api);
const ca = createCertificateAuthority({ commonName: 'bench-ca', validityDays: 1 });
const leaf = issueCertificate(ca, { commonName: 'bench', subjectAltNames: ['127.0.0.1'], usage: 'server', validityDays: 1 });
const handler = new PodAdmissionHandler({
  mutation: { schedulerName: 'hami-scheduler', overwriteDefaultScheduler: true, defaultGpuCount: 1 },
  locks: new NodeLocks({ api: new KubeNodeLockApi(core), config: { bindGraceMs: 60_000, expireMs: 300_000 } }),
  deleteTimeoutMs: 3000,
});
const app = createWebhookApp({ handler, readiness: () => ({ ready: true, reasons: [] }) });
const listener = await HttpsListener.start(app, { host: '127.0.0.1', port: 0, certPem: leaf.certPem, keyPem: leaf.keyPem });
process.stdout.write(`${JSON.stringify({ port: listener.port, caPem: ca.certPem })}\n`);
process.on('SIGTERM', () => { void listener.close().then(() => process.exit(0)); });
