// Runs the real webhook (handler, express app, TLS listener, NodeLocks, the state store) in its own
// process for bench/webhook-bench.ts, so the load generator does not share its event loop. Three
// listeners: the webhook as serve wires it (with the state store), the same webhook without the
// store (every DELETE of a bound pod reads its node from the apiserver), and a bare node:https
// server that echoes the request body (the floor of TLS + HTTP on this machine). Prints one JSON
// line {"port","withoutStorePort","echoPort","caPem"} once the store has synced. Input: env KUBECONFIG_PATH.
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { CoreV1Api } from '@kubernetes/client-node';
import { PodAdmissionHandler } from '../../src/admission/pod-admission-handler.js';
import { ClusterCache } from '../../src/cluster/cluster-cache.js';
import { kubeSources } from '../../src/cluster/kube-list-watch.js';
import { loadKubeConfig } from '../../src/kube/client.js';
import { KubeNodeLockApi } from '../../src/lock/kube-node-lock-api.js';
import { NodeLocks } from '../../src/lock/node-locks.js';
import { HttpsListener } from '../../src/server/https-listener.js';
import { createWebhookApp } from '../../src/server/webhook-app.js';
import { createCertificateAuthority, issueCertificate } from '../../src/tls/certificates.js';

const kubeConfig = loadKubeConfig(process.env.KUBECONFIG_PATH);
const core = kubeConfig.makeApiClient(CoreV1Api);
const ca = createCertificateAuthority({ commonName: 'bench-ca', validityDays: 1 });
const leaf = issueCertificate(ca, {
  commonName: 'bench',
  subjectAltNames: ['127.0.0.1'],
  usage: 'server',
  validityDays: 1,
});
const cache = new ClusterCache({ sources: kubeSources(kubeConfig) });
await cache.start();
const webhook = async (withStore: boolean) => {
  const locks = new NodeLocks({
    api: new KubeNodeLockApi(core),
    ...(withStore ? { view: cache.lockView } : {}),
    config: { bindGraceMs: 60_000, expireMs: 300_000 },
  });
  const handler = new PodAdmissionHandler({
    mutation: { schedulerName: 'hami-scheduler', overwriteDefaultScheduler: true, defaultGpuCount: 1 },
    locks,
    ...(withStore ? { fenceView: cache, storedLocks: cache } : {}),
    deleteTimeoutMs: 3000,
  });
  const app = createWebhookApp({ handler, readiness: () => ({ ready: true, reasons: [] }) });
  return HttpsListener.start(app, { host: '127.0.0.1', port: 0, certPem: leaf.certPem, keyPem: leaf.keyPem });
};
const listener = await webhook(true);
const withoutStore = await webhook(false);
const echo = createServer({ cert: leaf.certPem, key: leaf.keyPem }, (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  });
});
await new Promise<void>((done) => {
  echo.listen(0, '127.0.0.1', done);
});
process.stdout.write(
  `${JSON.stringify({ port: listener.port, withoutStorePort: withoutStore.port, echoPort: (echo.address() as AddressInfo).port, caPem: ca.certPem })}\n`,
);
process.on('SIGTERM', () => {
  echo.close();
  void Promise.all([listener.close(), withoutStore.close(), cache.stop()]).then(() => process.exit(0));
});
