import type { AdmissionregistrationV1Api, CoreV1Api } from '@kubernetes/client-node';
import type { Config } from '../config/setting-spec.js';
import { untilNotTransient } from '../kube/retry-transient.js';
import type { HttpsListener } from '../server/https-listener.js';
import type { Logger } from '../telemetry/logger.js';
import { CaBundlePatcher } from '../tls/ca-bundle-patcher.js';
import { CertKeeper } from '../tls/cert-keeper.js';
import type { CertStore } from '../tls/cert-store.js';
import { CLIENT_CERT_LAYOUT, ClientCertPublisher } from '../tls/client-cert-publisher.js';
import { SCHEDULER_CLIENT_COMMON_NAME } from '../tls/client-cert-policy.js';
import { FileCertStore } from '../tls/file-cert-store.js';
import { SecretCertStore, SecretStore } from '../tls/secret-cert-store.js';
import { servingNames } from '../tls/serving-names.js';
import { StartupError, type Lifecycle } from '../lifecycle/lifecycle.js';
import { apiCondition, failureText } from '../telemetry/api-failure.js';
import type { ConditionLog } from '../telemetry/condition-log.js';
import { untilAborted } from '../base/abort.js';
import { runnableOf, type Runnable } from '../lifecycle/runnable.js';
import { CaBundleWatch } from '../tls/ca-bundle-watch.js';
import { webhookConfigurationSource } from '../tls/webhook-configuration-source.js';
import type { ApiConnection } from './api-connection.js';

/**
 * The serving certificate of `serve`: where it is kept (CERT_DIR or CERT_SECRET_NAME), the keeper
 * that issues, renews and publishes it (caBundle patch), kube-scheduler's client certificate when
 * the extender demands one, and the first certificate, fetched before anything listens (retried
 * while the apiserver is unreachable, up to the start-up deadline).
 */

const DAY_MS = 86_400_000;
/**
 * How long start-up keeps retrying a transient failure (the apiserver restarting, a reset
 * connection) before giving up: within the Deployment's startup probe window (2 s x 30).
 */
const STARTUP_RETRY_MS = 45_000;

/** The listeners the keeper hands new material to; filled in as they start. */
export interface ServingListeners {
  webhook?: HttpsListener;
  extender?: HttpsListener;
  metrics?: { listening: boolean };
}

export interface CertificateDeps {
  config: Config;
  log: Logger;
  lifecycle: Lifecycle;
  core: CoreV1Api;
  admissionApi: AdmissionregistrationV1Api;
  conditions: ConditionLog;
  listening: ServingListeners;
}

export interface Certificates {
  keeper: CertKeeper;
  clientCerts: ClientCertPublisher | undefined;
  /** The first material, for the listeners to start with. */
  material: Awaited<ReturnType<CertKeeper['ensure']>>;
}

export async function startCertificates({
  config,
  log,
  lifecycle,
  core,
  admissionApi,
  conditions,
  listening,
}: CertificateDeps): Promise<Certificates> {
  const labels = { 'app.kubernetes.io/name': 'vgpu-warden' };
  const store: CertStore =
    config.certSecretName === undefined
      ? new FileCertStore({ dir: config.certDir })
      : new SecretCertStore({ core, namespace: config.namespace, name: config.certSecretName, labels });
  const caBundleTarget =
    config.webhookConfigName === undefined
      ? undefined
      : new CaBundlePatcher({ api: admissionApi, configurationName: config.webhookConfigName });
  const certLog = (line: string) => {
    log.info({ component: 'certs' }, line);
  };
  // loadConfig guarantees CERT_SECRET_NAME with client authentication: the client certificate is
  // issued from the CA shared in that Secret and published for kube-scheduler in another one.
  const clientCerts = config.extenderClientAuth
    ? new ClientCertPublisher({
        store: new SecretStore({
          core,
          namespace: config.namespace,
          name: config.extenderClientSecretName,
          labels,
          layout: CLIENT_CERT_LAYOUT,
        }),
        commonName: SCHEDULER_CLIENT_COMMON_NAME,
        validityDays: config.certValidityMs / DAY_MS,
        renewBeforeMs: config.certRenewBeforeMs,
        log: certLog,
      })
    : undefined;
  const keeper = new CertKeeper({
    store,
    names: servingNames({ serviceName: config.serviceName, namespace: config.namespace, extraHosts: config.certHosts }),
    validityDays: config.certValidityMs / DAY_MS,
    caValidityDays: (config.certValidityMs * 10) / DAY_MS,
    renewBeforeMs: config.certRenewBeforeMs,
    ...(caBundleTarget ? { caBundleTarget } : {}),
    onChange: (material) => {
      listening.webhook?.updateCertificate(material.certPem, material.keyPem);
      listening.extender?.updateCertificate(
        material.certPem,
        material.keyPem,
        clientCerts ? material.caBundlePem : undefined,
      );
      log.info({ component: 'certs' }, 'serving certificate reloaded');
    },
    ...(clientCerts ? { onSettled: (bundle) => clientCerts.publish(bundle) } : {}),
    log: certLog,
  });
  const certCondition = conditions.reporter('certificates');
  const certSetting = config.certSecretName === undefined ? 'CERT_DIR' : 'CERT_SECRET_NAME';
  const material = await lifecycle.step('certificates', (signal) =>
    untilNotTransient(() => keeper.ensure(), {
      deadlineMs: STARTUP_RETRY_MS,
      signal,
      onRetry: (error) => {
        const { condition, message } = apiCondition(`certificates (${store.description})`, error);
        certCondition.fail(condition, message);
      },
    }).catch((error: unknown) => {
      if (signal.aborted) throw error;
      throw new StartupError(
        `cannot get the serving certificate from ${store.description} (${certSetting}): ${failureText(error)}`,
        { cause: error },
      );
    }),
  );
  certCondition.ok();
  return { keeper, clientCerts, material };
}

/** How often the keeper re-checks the certificates (renewal, a rotation by another replica). */
const CERT_CHECK_INTERVAL_MS = 10 * 60_000;

/**
 * The keeper's periodic rounds and, with WEBHOOK_CONFIG_NAME, the caBundle watch: a reset of the
 * caBundle (a GitOps tool forcing ownership, a replace, a re-create) is repaired within seconds
 * instead of at the keeper's next periodic check.
 */
export function certificateRunnables(config: Config, log: Logger, api: ApiConnection, keeper: CertKeeper): Runnable[] {
  const keeperRounds: Runnable = {
    name: 'certificate keeper',
    start: async (signal) => {
      keeper.start(CERT_CHECK_INTERVAL_MS);
      await untilAborted(signal);
      await keeper.stop();
    },
  };
  if (config.webhookConfigName === undefined) return [keeperRounds];
  const caBundleWatch = new CaBundleWatch({
    configurationName: config.webhookConfigName,
    source: webhookConfigurationSource(api.kubeConfig, api.admissionApi, config.webhookConfigName),
    wanted: () => keeper.current()?.caBundlePem,
    heal: () => keeper.ensure(),
    conditions: api.conditions.reporter('webhook configuration watch'),
    log: (level, message) => {
      log[level]({ component: 'certs' }, message);
    },
  });
  return [keeperRounds, runnableOf('caBundle watch', caBundleWatch)];
}
