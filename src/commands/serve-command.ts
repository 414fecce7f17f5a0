import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { AdmissionregistrationV1Api, CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { configFlags, EXIT_OK, type Command } from '../cli.js';
import type { Config } from '../config.js';
import { PodAdmissionHandler } from '../admission/pod-admission-handler.js';
import { ClusterCache, kubeSources } from '../cluster/cluster-cache.js';
import { DEFAULT_REQUEST_DEFAULTS } from '../devices/requests.js';
import { Binder } from '../extender/binder.js';
import { ExtenderService } from '../extender/extender-service.js';
import { loadKubeConfig } from '../kube/client.js';
import { untilNotTransient } from '../kube/retry-transient.js';
import { KubeNodeLockApi } from '../kube/node-lock-api.js';
import { NodeLocks } from '../lock/node-locks.js';
import { requireClientIdentity } from '../server/client-identity.js';
import { createExtenderApp } from '../server/extender-app.js';
import { HttpsListener } from '../server/https-listener.js';
import { createWebhookApp } from '../server/webhook-app.js';
import { EventRecorder } from '../telemetry/events.js';
import { startMetricsListener } from '../server/metrics-app.js';
import { cachedLockSource } from '../telemetry/lock-samples.js';
import { LockTelemetry } from '../telemetry/lock-telemetry.js';
import { WardenMetrics } from '../telemetry/metrics.js';
import { timedAdmissionHandler, timedExtenderHandlers } from '../telemetry/timed-handlers.js';
import { createLogger, type Logger } from '../telemetry/logger.js';
import { CaBundlePatcher } from '../tls/ca-bundle-patcher.js';
import { CertKeeper } from '../tls/cert-keeper.js';
import type { CertStore } from '../tls/cert-store.js';
import { CLIENT_CERT_LAYOUT, ClientCertPublisher } from '../tls/client-cert-publisher.js';
import { SCHEDULER_CLIENT_COMMON_NAME } from '../tls/client-cert-policy.js';
import { FileCertStore } from '../tls/file-cert-store.js';
import { SecretCertStore, SecretStore } from '../tls/secret-cert-store.js';
import { servingNames } from '../tls/serving-names.js';
import { LeaderElector } from '../sweeper/leader-election.js';
import { startPodWatchRelease } from '../sweeper/pod-watch-release.js';
import { SweepSchedule } from '../sweeper/sweep-schedule.js';

const DAY_MS = 86_400_000;
/**
 * How long start-up keeps retrying a transient failure (the apiserver restarting, a reset
 * connection) before giving up: within the Deployment's startup probe window (2 s x 30).
 */
const STARTUP_RETRY_MS = 45_000;

/** How often the keeper re-checks the certificates (renewal, a rotation by another replica). */
const CERT_CHECK_INTERVAL_MS = 10 * 60_000;

export interface ServeDeps {
  /** Resolves when the process is asked to stop (SIGTERM/SIGINT in main); listening starts on call. */
  waitForStopSignal: () => Promise<string>;
}

export interface RunningServer {
  webhook: HttpsListener;
  extender: HttpsListener;
  keeper: CertKeeper;
  cache: ClusterCache;
  elector: LeaderElector | undefined;
  metrics: WardenMetrics;
  metricsPort: number;
  sweeper: SweepSchedule | undefined;
  stop(): Promise<void>;
}

/**
 * Wires everything from configuration: certificates, the cluster cache, NodeLocks, the webhook on
 * its public listener and the extender (loopback, or anywhere with EXTENDER_CLIENT_AUTH). Both
 * listeners serve the keeper's certificate and reload it together; with client authentication the
 * extender also trusts the keeper's caBundle for kube-scheduler's client certificate, which the
 * keeper's rounds keep issued (ClientCertPublisher).
 */
export async function startServer(config: Config, log: Logger): Promise<RunningServer> {
  const kubeConfig = loadKubeConfig(config.kubeconfig);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const labels = { 'app.kubernetes.io/name': 'vgpu-warden' };
  const store: CertStore = config.certSecretName === undefined
    ? new FileCertStore({ dir: config.certDir })
    : new SecretCertStore({ core, namespace: config.namespace, name: config.certSecretName, labels });
  const caBundleTarget = config.webhookConfigName === undefined
    ? undefined
    : new CaBundlePatcher({ api: kubeConfig.makeApiClient(AdmissionregistrationV1Api), configurationName: config.webhookConfigName });
  const certLog = (line: string) => { log.info({ component: 'certs' }, line); };
  // loadConfig guarantees CERT_SECRET_NAME with client authentication: the client certificate is
  // issued from the CA shared in that Secret and published for kube-scheduler in another one.
  const clientCerts = config.extenderClientAuth
    ? new ClientCertPublisher({
      store: new SecretStore({ core, namespace: config.namespace, name: config.extenderClientSecretName, labels, layout: CLIENT_CERT_LAYOUT }),
      commonName: SCHEDULER_CLIENT_COMMON_NAME,
      validityDays: config.certValidityMs / DAY_MS,
      renewBeforeMs: config.certRenewBeforeMs,
      log: certLog,
    })
    : undefined;
  // Filled in once listening; the keeper may hand out material before (the first ensure) and after.
  const listening: { webhook?: HttpsListener; extender?: HttpsListener } = {};
  const keeper = new CertKeeper({
    store,
    names: servingNames({ serviceName: config.serviceName, namespace: config.namespace, extraHosts: config.certHosts }),
    validityDays: config.certValidityMs / DAY_MS,
    caValidityDays: (config.certValidityMs * 10) / DAY_MS,
    renewBeforeMs: config.certRenewBeforeMs,
    ...(caBundleTarget ? { caBundleTarget } : {}),
    onChange: (material) => {
      listening.webhook?.updateCertificate(material.certPem, material.keyPem);
      listening.extender?.updateCertificate(material.certPem, material.keyPem, clientCerts ? material.caBundlePem : undefined);
      log.info({ component: 'certs' }, 'serving certificate reloaded');
    },
    ...(clientCerts ? { onSettled: (bundle) => clientCerts.publish(bundle) } : {}),
    log: certLog,
  });
  const material = await untilNotTransient(() => keeper.ensure(), {
    deadlineMs: STARTUP_RETRY_MS,
    onRetry: (error, pauseMs) => { log.warn({ component: 'certs', err: error }, `certificates not available yet, retrying in ${pauseMs} ms`); },
  });

  const cache = new ClusterCache({ sources: kubeSources(kubeConfig, core), staleAfterMs: config.stateStaleAfterMs, log: (level, message) => { log[level]({ component: 'cache' }, message); } });
  const cacheStarted = cache.start().catch((error: unknown) => { log.error({ component: 'cache', err: error }, 'cluster cache failed to start'); });
  const metrics = new WardenMetrics({ onLockSourceError: (err) => { log.warn({ component: 'metrics', err }, 'node-lock gauges unavailable'); } });
  const events = new EventRecorder(core, config.schedulerName, (message) => { log.warn({ component: 'events' }, message); });
  const lockConfig = { bindGraceMs: config.bindGraceMs, expireMs: config.nodeLockExpireMs, forceAfterMs: config.nodeLockForceAfterMs };
  const locks = new NodeLocks({
    api: new KubeNodeLockApi(core),
    view: cache.lockView,
    config: lockConfig,
    // Metrics, Kubernetes Events and one JSON log line per lock decision.
    observer: new LockTelemetry({ metrics, events, log, podUid: (pod) => cache.pod(pod.namespace, pod.name)?.metadata?.uid }),
  });
  const lockSamples = cachedLockSource(cache, lockConfig);
  metrics.setLockSource(() => (cache.synced ? lockSamples() : undefined));
  metrics.setUnreadableAllocationSource(() => (cache.synced ? cache.usage.unreadable() : undefined));

  const admission = new PodAdmissionHandler({
    mutation: { schedulerName: config.schedulerName, overwriteDefaultScheduler: config.overwriteDefaultScheduler, defaultGpuCount: config.defaultGpuCount },
    locks,
    fenceView: cache,
    deleteTimeoutMs: config.webhookDeleteTimeoutMs,
    onOutcome: (request, outcome) => {
      log.debug({ component: 'admission', uid: request.uid, namespace: request.namespace, name: request.name, outcome }, `admission ${outcome.operation}`);
    },
  });
  const certLoaded = () => (keeper.current() === undefined ? ['no serving certificate loaded'] : []);
  const webhookApp = createWebhookApp({
    handler: timedAdmissionHandler(admission, metrics),
    readiness: () => {
      const reasons = [...certLoaded(), ...(listening.webhook?.listening === true ? [] : ['listener not answering'])];
      return { ready: reasons.length === 0, reasons };
    },
    onBadRequest: (status, message) => { log.warn({ component: 'admission', status }, `bad admission request: ${message}`); },
  });
  const defaults = { nodePolicy: config.nodeSchedulerPolicy, gpuPolicy: config.gpuSchedulerPolicy, requestDefaults: DEFAULT_REQUEST_DEFAULTS };
  const binder = new Binder({ core, cache, locks, events, defaults, lockWaitMs: config.bindLockWaitMs, timeoutMs: config.bindTimeoutMs, log: (level, message) => { log[level]({ component: 'bind' }, message); } });
  const extenderApp = createExtenderApp({
    handlers: timedExtenderHandlers(new ExtenderService({ cache, binder, events, defaults, syncWaitMs: 10_000 }), metrics),
    readiness: () => {
      const reasons = [...certLoaded(), ...cache.problems()];
      return { ready: reasons.length === 0, reasons };
    },
    onBadRequest: (path, message) => { log.warn({ component: 'extender', path }, `bad extender request: ${message}`); },
    ...(clientCerts
      ? { guard: requireClientIdentity({ commonName: SCHEDULER_CLIENT_COMMON_NAME }, (problem) => { log.warn({ component: 'extender' }, `refused a client: ${problem}`); }) }
      : {}),
  });

  // The lock sweeper runs on the elected leader only; the pod watch runs on every replica (releases
  // are owner-checked and idempotent, so replicas racing on one lock give the same result).
  const elector = config.leaderElection
    ? new LeaderElector({
      api: kubeConfig.makeApiClient(CoordinationV1Api),
      namespace: config.namespace,
      name: config.leaseName,
      identity: `${config.podName ?? hostname()}_${randomBytes(4).toString('hex')}`,
      log: (message) => { log.info({ component: 'leader' }, message); },
    })
    : undefined;
  const sweeper = config.sweepEnabled
    ? new SweepSchedule({
      schedule: config.sweepSchedule,
      targets: cache,
      locks,
      concurrency: 16,
      isLeader: () => (elector ? elector.isLeader() : true),
      stillLeading: () => true,
      onReport: (report, durationMs) => {
        metrics.observeSweep(durationMs / 1000, report.errors.length === 0 ? 'ok' : 'error');
        log.info({ component: 'sweeper', released: report.released.length, stalled: report.stalled.length, kept: report.kept, errors: report.errors, abandoned: report.abandoned, durationMs: Math.round(durationMs) }, 'sweep pass');
      },
      onError: (message) => { log.error({ component: 'sweeper' }, `sweep failed: ${message}`); },
    })
    : undefined;
  const stopWatch = config.podWatchEnabled
    ? startPodWatchRelease({ cache, locks, log: (message) => { log.warn({ component: 'watch' }, message); } })
    : () => undefined;
  elector?.start();
  sweeper?.start();

  const webhook = await HttpsListener.start(webhookApp, { host: config.webhookHost, port: config.webhookPort, certPem: material.certPem, keyPem: material.keyPem });
  listening.webhook = webhook;
  const extender = await HttpsListener.start(extenderApp, {
    host: config.extenderHost, port: config.extenderPort, certPem: material.certPem, keyPem: material.keyPem,
    ...(clientCerts ? { clientCaPem: material.caBundlePem } : {}),
  });
  listening.extender = extender;
  if (clientCerts) {
    // Refused at TLS (no certificate, or not from our CA): the app never sees these, so say so here.
    extender.server.on('tlsClientError', (error: Error) => { log.warn({ component: 'extender' }, `TLS handshake refused: ${error.message.trim()}`); });
  }
  const metricsListener = await startMetricsListener({
    host: config.metricsHost, port: config.metricsPort, metrics,
    onError: (message) => { log.warn({ component: 'metrics' }, `scrape failed: ${message}`); },
  });
  keeper.start(CERT_CHECK_INTERVAL_MS);
  log.info({ component: 'metrics', host: config.metricsHost, port: metricsListener.port }, 'metrics listening');
  log.info({ component: 'webhook', host: config.webhookHost, port: webhook.port }, 'admission webhook listening');
  log.info({ component: 'extender', host: config.extenderHost, port: extender.port, clientAuth: config.extenderClientAuth }, 'scheduler extender listening');
  return {
    webhook,
    extender,
    keeper,
    cache,
    elector,
    sweeper,
    metrics,
    metricsPort: metricsListener.port,
    stop: async () => {
      stopWatch();
      await sweeper?.stop();
      await elector?.stop({ release: true });
      await keeper.stop();
      await Promise.all([webhook.close(), extender.close(), metricsListener.close()]);
      await cacheStarted;
      await cache.stop();
      await kubeConfig.close();
    },
  };
}

/** `vgpu-warden serve`: the admission webhook and the scheduler extender (the sweeper joins with #6). */
export function serveCommand(deps: ServeDeps): Command {
  return {
    name: 'serve',
    summary: 'run the admission webhook, the scheduler extender, the pod watch and the leader-elected lock sweeper',
    usesConfig: true,
    flags: configFlags(),
    run: async ({ config }) => {
      const settings = config();
      const log = createLogger(settings.logLevel);
      const stop = deps.waitForStopSignal();
      const server = await startServer(settings, log);
      const signal = await stop;
      log.info({ signal }, 'stopping');
      await server.stop();
      return EXIT_OK;
    },
  };
}
