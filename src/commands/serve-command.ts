import { AdmissionregistrationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { configFlags, EXIT_OK, type Command } from '../cli.js';
import type { Config } from '../config.js';
import { PodAdmissionHandler } from '../admission/pod-admission-handler.js';
import { loadKubeConfig } from '../kube/client.js';
import { KubeNodeLockApi } from '../kube/node-lock-api.js';
import { NodeLocks } from '../lock/node-locks.js';
import { HttpsListener } from '../server/https-listener.js';
import { createWebhookApp } from '../server/webhook-app.js';
import { createLogger } from '../telemetry/logger.js';
import { CaBundlePatcher } from '../tls/ca-bundle-patcher.js';
import { CertKeeper } from '../tls/cert-keeper.js';
import type { CertStore } from '../tls/cert-store.js';
import { FileCertStore } from '../tls/file-cert-store.js';
import { SecretCertStore } from '../tls/secret-cert-store.js';
import { servingNames } from '../tls/serving-names.js';

const DAY_MS = 86_400_000;
/** How often the keeper re-checks the certificates (renewal, a rotation by another replica). */
const CERT_CHECK_INTERVAL_MS = 10 * 60_000;

export interface ServeDeps {
  /** Resolves when the process is asked to stop (SIGTERM/SIGINT in main); listening starts on call. */
  waitForStopSignal: () => Promise<string>;
}

/** Wires the webhook from configuration: certificates, NodeLocks, handler, TLS listener. */
export async function startWebhook(config: Config, log: ReturnType<typeof createLogger>): Promise<{ listener: HttpsListener; keeper: CertKeeper }> {
  const kubeConfig = loadKubeConfig(config.kubeconfig);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const store: CertStore = config.certSecretName === undefined
    ? new FileCertStore({ dir: config.certDir })
    : new SecretCertStore({ core, namespace: config.namespace, name: config.certSecretName, labels: { 'app.kubernetes.io/name': 'vgpu-warden' } });
  const caBundleTarget = config.webhookConfigName === undefined
    ? undefined
    : new CaBundlePatcher({ api: kubeConfig.makeApiClient(AdmissionregistrationV1Api), configurationName: config.webhookConfigName });
  // The keeper's onChange and the readiness check need the listener, which starts after them.
  const serving: { listener?: HttpsListener } = {};
  const keeper = new CertKeeper({
    store,
    names: servingNames({ serviceName: config.serviceName, namespace: config.namespace, extraHosts: config.certHosts }),
    validityDays: config.certValidityMs / DAY_MS,
    caValidityDays: (config.certValidityMs * 10) / DAY_MS,
    renewBeforeMs: config.certRenewBeforeMs,
    ...(caBundleTarget ? { caBundleTarget } : {}),
    onChange: (material) => {
      serving.listener?.updateCertificate(material.certPem, material.keyPem);
      log.info({ component: 'certs' }, 'serving certificate reloaded');
    },
    log: (line) => { log.info({ component: 'certs' }, line); },
  });
  const material = await keeper.ensure();

  const locks = new NodeLocks({
    api: new KubeNodeLockApi(core),
    config: { bindGraceMs: config.bindGraceMs, expireMs: config.nodeLockExpireMs, forceAfterMs: config.nodeLockForceAfterMs },
    observer: { onLockEvent: (event) => { log.info({ component: 'lock', ...event }, `lock ${event.type} on ${event.node}`); } },
  });
  const handler = new PodAdmissionHandler({
    mutation: { schedulerName: config.schedulerName, overwriteDefaultScheduler: config.overwriteDefaultScheduler, defaultGpuCount: config.defaultGpuCount },
    locks,
    deleteTimeoutMs: config.webhookDeleteTimeoutMs,
    onOutcome: (request, outcome) => {
      log.debug({ component: 'admission', uid: request.uid, namespace: request.namespace, name: request.name, outcome }, `admission ${outcome.operation}`);
    },
  });
  const app = createWebhookApp({
    handler,
    readiness: () => {
      const reasons = [
        ...(keeper.current() === undefined ? ['no serving certificate loaded'] : []),
        ...(serving.listener?.listening === true ? [] : ['listener not answering']),
      ];
      return { ready: reasons.length === 0, reasons };
    },
    onBadRequest: (status, message) => { log.warn({ component: 'admission', status }, `bad admission request: ${message}`); },
  });
  const listener = await HttpsListener.start(app, { host: config.webhookHost, port: config.webhookPort, certPem: material.certPem, keyPem: material.keyPem });
  serving.listener = listener;
  keeper.start(CERT_CHECK_INTERVAL_MS);
  log.info({ component: 'webhook', host: config.webhookHost, port: listener.port }, 'admission webhook listening');
  return { listener, keeper };
}

/**
 * `vgpu-warden serve`: the admission webhook over TLS with self-managed certificates. The scheduler
 * extender (#5) and the lock sweeper (#6) join this process as they land.
 */
export function serveCommand(deps: ServeDeps): Command {
  return {
    name: 'serve',
    summary: 'run the admission webhook (the scheduler extender and lock sweeper join with issues #5 and #6)',
    usesConfig: true,
    flags: configFlags(),
    run: async ({ config }) => {
      const settings = config();
      const log = createLogger(settings.logLevel);
      const stop = deps.waitForStopSignal();
      const { listener, keeper } = await startWebhook(settings, log);
      const signal = await stop;
      log.info({ signal }, 'stopping');
      await keeper.stop();
      await listener.close();
      return EXIT_OK;
    },
  };
}
