import { podMutationConfig } from '../admission/mutation-config.js';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { AdmissionregistrationV1Api, CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { type Config } from '../config/setting-spec.js';
import { PodAdmissionHandler } from '../admission/pod-admission-handler.js';
import { ClusterCache } from '../cluster/cluster-cache.js';
import { DEFAULT_REQUEST_DEFAULTS } from '../devices/requests.js';
import { Binder } from '../extender/binder.js';
import { BindingLabelFollowUp, kubeLabelPatch } from '../extender/binding-label-follow-up.js';
import { trackPendingBursts } from '../extender/pending-bursts.js';
import { ExtenderService } from '../extender/extender-service.js';
import { podRequeueWriter } from '../extender/pod-requeue-writer.js';
import { RefusalRequeue } from '../extender/refusal-requeue.js';
import { loadKubeConfig, type PooledKubeConfig } from '../kube/client.js';
import { KubeNodeLockApi } from '../lock/kube-node-lock-api.js';
import { KubeKubeletEvidenceApi } from '../lock/kube-kubelet-evidence-api.js';
import { NodeLocks } from '../lock/node-locks.js';
import { KubeletAdmission } from '../lock/kubelet-admission.js';
import { requireClientIdentity } from '../server/client-identity.js';
import { createExtenderApp } from '../server/extender-app.js';
import { HttpsListener } from '../server/https-listener.js';
import { createWebhookApp } from '../server/webhook-app.js';
import { EventRecorder } from '../telemetry/events.js';
import { startMetricsListener } from '../server/metrics-app.js';
import { cachedLockSource } from '../telemetry/lock-samples.js';
import { LockTelemetry } from '../telemetry/lock-telemetry.js';
import { WardenMetrics } from '../telemetry/metrics.js';
import { containerAllocationSamples } from '../telemetry/hami-pod-metrics.js';
import { packageVersion } from '../telemetry/build-info.js';
import { timedAdmissionHandler, timedExtenderHandlers } from '../server/timed-handlers.js';
import { type Logger } from '../telemetry/logger.js';
import { CaBundleWatch } from '../tls/ca-bundle-watch.js';
import type { CertKeeper } from '../tls/cert-keeper.js';
import { SCHEDULER_CLIENT_COMMON_NAME } from '../tls/client-cert-policy.js';
import { webhookConfigurationSource } from '../tls/webhook-configuration-source.js';
import { LeaderElector } from '../sweeper/leader-election.js';
import { startPodWatchRelease } from '../sweeper/pod-watch-release.js';
import { SweepSchedule } from '../sweeper/sweep-schedule.js';
import { GRACEFUL_SHUTDOWN_MS, Lifecycle, StartAborted, type StopReport } from '../lifecycle/lifecycle.js';
import { listenFailure, type ListenerSettings } from '../lifecycle/listen-failure.js';
import { Readiness } from '../lifecycle/readiness.js';
import { APISERVER_UNREACHABLE, failureText } from '../telemetry/api-failure.js';
import { ConditionLog } from '../telemetry/condition-log.js';
import { clip, NAME_CHARS } from '../base/user-text.js';
import { kubeSources } from '../cluster/kube-list-watch.js';
import { gpuSamples } from '../telemetry/gpu-samples.js';
import { startCertificates, type ServingListeners } from './certificates.js';

/** How often the keeper re-checks the certificates (renewal, a rotation by another replica). */
const CERT_CHECK_INTERVAL_MS = 10 * 60_000;

/** Releasing the Lease gets at most this much of the shutdown bound, so listeners still drain when the apiserver hangs. */
const LEASE_RELEASE_BOUND_MS = 5_000;

export interface StartOptions {
  /** Aborting it stops start-up: what started is stopped, and startServer rejects with StartAborted. */
  signal?: AbortSignal;
  /** Where persistent conditions are reported once with backoff; by default one writing to `log`. */
  conditions?: ConditionLog;
  /** Total time stop() may take (default GRACEFUL_SHUTDOWN_MS). */
  shutdownBoundMs?: number;
  /** The version vgpu_warden_build_info names (main reads package.json once); default: read here. */
  version?: string;
  /** --context: the kubeconfig context to use instead of its current-context. */
  kubeContext?: string;
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
  /** What every listener's /readyz answers. */
  readiness: Readiness;
  /** Stops everything within the shutdown bound (readiness turns false first); idempotent. */
  stop(): Promise<StopReport>;
}

/** Where the apiserver in use comes from, appended to "apiserver unreachable" warnings. */
function apiserverContext(kubeConfig: PooledKubeConfig): string {
  const server = kubeConfig.getCurrentCluster()?.server ?? 'unknown';
  const source = kubeConfig.from === undefined ? '' : ` from ${clip(kubeConfig.from, 2 * NAME_CHARS)}`;
  return `(apiserver ${clip(server)}${source}); retrying with backoff, /readyz answers 503 meanwhile`;
}

function listenerSettings(
  role: string,
  prefix: 'WEBHOOK' | 'EXTENDER' | 'METRICS',
  host: string,
  port: number,
): ListenerSettings {
  return { role, host, port, hostSetting: `${prefix}_HOST`, portSetting: `${prefix}_PORT` };
}

/** Binds one listener; a bind error becomes the one-line StartupError naming the address and the setting. */
async function listen<T>(settings: ListenerSettings, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (error) {
    throw listenFailure(settings, error);
  }
}

/**
 * Wires everything from configuration: certificates, the cluster cache, NodeLocks, the webhook on
 * its public listener and the extender (loopback, or anywhere with EXTENDER_CLIENT_AUTH). Both
 * listeners serve the keeper's certificate and reload it together; with client authentication the
 * extender also trusts the keeper's caBundle for kube-scheduler's client certificate, which the
 * keeper's rounds keep issued (ClientCertPublisher).
 *
 * All or nothing: if any part fails to start (a port taken, certificates unavailable), or
 * `options.signal` aborts meanwhile, what already started is stopped before this rejects, with a
 * StartupError whose message is one line naming what failed, or StartAborted. Listeners bind before
 * the Lease is campaigned for and the sweeper runs, so a taken port never leaves a Lease held.
 */
export async function startServer(config: Config, log: Logger, options: StartOptions = {}): Promise<RunningServer> {
  const lifecycle = new Lifecycle({
    ...(options.signal ? { signal: options.signal } : {}),
    boundMs: options.shutdownBoundMs ?? GRACEFUL_SHUTDOWN_MS,
    onStopProblem: (part, problem) => {
      log.warn({ component: 'lifecycle', part }, `stopping ${part}: ${problem}`);
    },
  });
  try {
    return await wire(config, log, lifecycle, options);
  } catch (error) {
    await lifecycle.stopAll();
    if (options.signal?.aborted === true) throw new StartAborted('stop requested during start-up', { cause: error });
    throw error;
  }
}

async function wire(config: Config, log: Logger, lifecycle: Lifecycle, options: StartOptions): Promise<RunningServer> {
  const kubeConfig = loadKubeConfig(config.kubeconfig, undefined, options.kubeContext);
  lifecycle.defer('API connections', () => kubeConfig.close());
  const conditions =
    options.conditions ??
    new ConditionLog({
      emit: (level, message, condition) => {
        log[level]({ component: 'health', condition }, message);
      },
      context: (condition) => (condition === APISERVER_UNREACHABLE ? apiserverContext(kubeConfig) : undefined),
    });
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const admissionApi = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  // The store's first LIST starts before the certificates: at 5000 nodes it waits seconds on the
  // apiserver, and the key generation and certificate API calls fit in that wait.
  const cache = new ClusterCache({
    sources: kubeSources(kubeConfig),
    staleAfterMs: config.stateStaleAfterMs,
    conditions,
    // GPU memory quota limits are in the units requests are counted in (HAMi's memoryFactor).
    quotaMemoryFactor: DEFAULT_REQUEST_DEFAULTS.memoryFactor,
    log: (level, message) => {
      log[level]({ component: 'cache' }, message);
    },
  });
  // Resolves once synced or stopped; until synced, readiness says why not (cache.problems()).
  void cache.start().catch((error: unknown) => {
    log.error({ component: 'cache' }, `cluster cache failed to start: ${failureText(error)}`);
  });
  lifecycle.defer('cluster cache', () => cache.stop());

  // Filled in once listening; the keeper may hand out material before (the first ensure) and after.
  const listening: ServingListeners = {};
  const { keeper, clientCerts, material } = await startCertificates({
    config,
    log,
    lifecycle,
    core,
    admissionApi,
    conditions,
    listening,
  });

  const metrics = new WardenMetrics({
    legacyNames: config.legacyMetrics,
    version: options.version ?? packageVersion(),
    onLockSourceError: (err) => {
      log.warn({ component: 'metrics', err }, 'node-lock gauges unavailable');
    },
  });
  const events = new EventRecorder(
    core,
    config.schedulerName,
    (message) => {
      log.warn({ component: 'events' }, message);
    },
    { failures: conditions.reporter('events') },
  );
  // Deferred steps run last-first: pending aggregated Events are written after the listeners and the sweeper stop.
  lifecycle.defer('events', () => events.close());
  const lockConfig = {
    bindGraceMs: config.bindGraceMs,
    expireMs: config.nodeLockExpireMs,
    forceAfterMs: config.nodeLockForceAfterMs,
  };
  const lockTelemetry = new LockTelemetry({
    metrics,
    events,
    log,
    podUid: (pod) => cache.pod(pod.namespace, pod.name)?.metadata?.uid,
  });
  const locks = new NodeLocks({
    api: new KubeNodeLockApi(core),
    view: cache.lockView,
    config: lockConfig,
    // A lock whose owner vanished before Allocate stays until the node's kubelet is past that pod.
    kubeletAdmission: new KubeletAdmission({
      api: new KubeKubeletEvidenceApi(core, kubeConfig.makeApiClient(CoordinationV1Api)),
    }),
    // Metrics, Kubernetes Events and one JSON log line per lock decision.
    observer: lockTelemetry,
  });
  const lockSamples = cachedLockSource(
    {
      lockedNodes: () => cache.lockedNodes(),
      lockOf: (node) => cache.lockOf(node),
      pod: (namespace, name) => cache.pod(namespace, name),
    },
    lockConfig,
  );
  metrics.setLockSource(() => (cache.synced ? lockSamples() : undefined));
  metrics.setUnreadableAllocationSource(() => (cache.synced ? cache.unreadableAllocations() : undefined));
  metrics.setGpuSource(() => (cache.synced ? gpuSamples(cache) : undefined));
  metrics.setContainerAllocationSource(() => (cache.synced ? containerAllocationSamples(cache) : undefined));
  metrics.setQuotaSource(() => (cache.synced ? cache.quotaUses() : undefined));

  // The lock sweeper runs on the elected leader only; the pod watch runs on every replica (releases
  // are owner-checked and idempotent, so replicas racing on one lock give the same result).
  const elector = config.leaderElection
    ? new LeaderElector({
        api: kubeConfig.makeApiClient(CoordinationV1Api),
        namespace: config.namespace,
        name: config.leaseName,
        identity: `${config.podName ?? hostname()}_${randomBytes(4).toString('hex')}`,
        conditions: conditions.reporter('leader election'),
        namespaceSetting: 'POD_NAMESPACE',
        log: (message) => {
          log.info({ component: 'leader' }, message);
        },
      })
    : undefined;
  // The cluster-wide metric families are the leader's to export (HAMi's scheduler does the same), so
  // dashboards summing over replicas count each GPU once; without election this process is alone.
  metrics.setLeadership(elector ? () => elector.isLeader() : () => true);

  const readiness = new Readiness();
  const notAnswering = (listener: { listening: boolean } | undefined): string[] =>
    listener?.listening === true ? [] : ['listener not answering'];
  readiness.add('certificates', () => (keeper.current() === undefined ? ['no serving certificate loaded'] : []));
  readiness.add('webhook', () => notAnswering(listening.webhook));
  readiness.add('extender', () => notAnswering(listening.extender));
  readiness.add('metrics', () => notAnswering(listening.metrics));
  readiness.add('cluster cache', () => cache.problems());
  readiness.add('leader election', () => {
    const problem = elector?.problem();
    return problem === undefined ? [] : [problem];
  });
  const ready = () => readiness.state();

  const admission = new PodAdmissionHandler({
    mutation: podMutationConfig(config),
    locks,
    storedLocks: cache,
    deleteTimeoutMs: config.webhookDeleteTimeoutMs,
    onOutcome: (request, outcome) => {
      log.debug(
        { component: 'admission', uid: request.uid, namespace: request.namespace, name: request.name, outcome },
        `admission ${outcome.operation}`,
      );
    },
  });
  const webhookApp = createWebhookApp({
    handler: timedAdmissionHandler(admission, metrics),
    readiness: ready,
    onBadRequest: (status, message) => {
      log.warn({ component: 'admission', status }, `bad admission request: ${message}`);
    },
  });
  const defaults = {
    nodePolicy: config.nodeSchedulerPolicy,
    gpuPolicy: config.gpuSchedulerPolicy,
    requestDefaults: DEFAULT_REQUEST_DEFAULTS,
  };
  const labels = new BindingLabelFollowUp({
    pods: cache,
    patchLabel: kubeLabelPatch(core),
    log: (message) => {
      log.warn({ component: 'bind' }, message);
    },
  });
  labels.start();
  lifecycle.defer('binding label follow-up', () => {
    labels.stop();
  });
  const binder = new Binder({
    core,
    cache,
    locks,
    events,
    defaults,
    labels,
    successEvents: config.successEvents,
    lockWaitMs: config.bindLockWaitMs,
    timeoutMs: config.bindTimeoutMs,
    acknowledgementMaxAgeMs: config.nodeLockExpireMs,
    log: (level, message) => {
      log[level]({ component: 'bind' }, message);
    },
  });
  const refusals = new RefusalRequeue({
    nodeGeneration: (node) => cache.nodeGeneration(node),
    onNodeChange: (listener) =>
      cache.onNodeChange((node) => {
        listener(node.metadata?.name ?? '');
      }),
    stillPending: (pod) => {
      const current = cache.pod(pod.namespace, pod.name);
      const phase = current?.status?.phase;
      return (
        current?.metadata?.uid === pod.uid &&
        current.spec?.nodeName === undefined &&
        current.metadata.deletionTimestamp === undefined &&
        phase !== 'Succeeded' &&
        phase !== 'Failed'
      );
    },
    nudge: podRequeueWriter(core),
    log: (message) => {
      log.info({ component: 'extender' }, message);
    },
  });
  refusals.start();
  lifecycle.defer('refusal requeue', () => {
    refusals.stop();
  });
  const pending = trackPendingBursts(cache, defaults);
  lifecycle.defer('pending bursts', () => {
    pending.stop();
  });
  const extenderApp = createExtenderApp({
    handlers: timedExtenderHandlers(
      new ExtenderService({
        cache,
        binder,
        events,
        defaults,
        syncWaitMs: 10_000,
        refusals,
        pending: pending.bursts,
        successEvents: config.successEvents,
      }),
      metrics,
    ),
    readiness: ready,
    onBadRequest: (path, message) => {
      log.warn({ component: 'extender', path }, `bad extender request: ${message}`);
    },
    ...(clientCerts
      ? {
          guard: requireClientIdentity({ commonName: SCHEDULER_CLIENT_COMMON_NAME }, (problem) => {
            log.warn({ component: 'extender' }, `refused a client: ${problem}`);
          }),
        }
      : {}),
  });

  const stopWatch = config.podWatchEnabled
    ? startPodWatchRelease({
        cache,
        locks,
        followForMs: config.nodeLockExpireMs,
        log: (message) => {
          log.warn({ component: 'watch' }, message);
        },
      })
    : () => undefined;
  lifecycle.defer('pod watch', stopWatch);

  // The listeners stop together: each stops accepting at once and drains within the bound.
  const opened: { close(forceAfterMs: number): Promise<void> }[] = [];
  lifecycle.defer('listeners', (remainingMs) => Promise.all(opened.map((listener) => listener.close(remainingMs))));
  lifecycle.checkpoint();
  const webhook = await listen(listenerSettings('the webhook', 'WEBHOOK', config.webhookHost, config.webhookPort), () =>
    HttpsListener.start(webhookApp, {
      host: config.webhookHost,
      port: config.webhookPort,
      certPem: material.certPem,
      keyPem: material.keyPem,
    }),
  );
  opened.push(webhook);
  listening.webhook = webhook;
  const extender = await listen(
    listenerSettings('the extender', 'EXTENDER', config.extenderHost, config.extenderPort),
    () =>
      HttpsListener.start(extenderApp, {
        host: config.extenderHost,
        port: config.extenderPort,
        certPem: material.certPem,
        keyPem: material.keyPem,
        ...(clientCerts ? { clientCaPem: material.caBundlePem } : {}),
      }),
  );
  opened.push(extender);
  listening.extender = extender;
  if (clientCerts) {
    // Refused at TLS (no certificate, or not from our CA): the app never sees these, so say so here.
    extender.server.on('tlsClientError', (error: Error) => {
      log.warn({ component: 'extender' }, `TLS handshake refused: ${error.message.trim()}`);
    });
  }
  const metricsListener = await listen(
    listenerSettings('metrics', 'METRICS', config.metricsHost, config.metricsPort),
    () =>
      startMetricsListener({
        host: config.metricsHost,
        port: config.metricsPort,
        metrics,
        readiness: ready,
        onError: (message) => {
          log.warn({ component: 'metrics' }, `scrape failed: ${message}`);
        },
      }),
  );
  opened.push(metricsListener);
  listening.metrics = metricsListener;
  lifecycle.checkpoint();

  const sweeper = config.sweepEnabled
    ? new SweepSchedule({
        schedule: config.sweepSchedule,
        targets: cache,
        locks,
        // Stalled locks that vanish between sweeps end their warning with one line.
        observer: lockTelemetry,
        concurrency: 16,
        isLeader: () => (elector ? elector.isLeader() : true),
        stillLeading: () => true,
        onReport: (report, durationMs) => {
          metrics.observeSweep(durationMs / 1000, report.errors.length === 0 ? 'ok' : 'error');
          log.info(
            {
              component: 'sweeper',
              released: report.released.length,
              stalled: report.stalled.length,
              kept: report.kept,
              errors: report.errors,
              abandoned: report.abandoned,
              durationMs: Math.round(durationMs),
            },
            'sweep pass',
          );
        },
        onError: (message) => {
          log.error({ component: 'sweeper' }, `sweep failed: ${message}`);
        },
      })
    : undefined;
  if (elector) {
    elector.start();
    // Handing the Lease back lets another replica lead at once instead of after a lease duration.
    lifecycle.defer('leader election', () => elector.stop({ release: true }), { boundMs: LEASE_RELEASE_BOUND_MS });
  }
  if (sweeper) {
    sweeper.start();
    lifecycle.defer('lock sweeper', () => sweeper.stop());
  }
  keeper.start(CERT_CHECK_INTERVAL_MS);
  lifecycle.defer('certificate keeper', () => keeper.stop());
  if (config.webhookConfigName !== undefined) {
    // A reset of the caBundle (a GitOps tool forcing ownership, a replace, a re-create) is repaired
    // within seconds instead of at the keeper's next periodic check.
    const caBundleWatch = new CaBundleWatch({
      configurationName: config.webhookConfigName,
      source: webhookConfigurationSource(kubeConfig, admissionApi, config.webhookConfigName),
      wanted: () => keeper.current()?.caBundlePem,
      heal: () => keeper.ensure(),
      conditions: conditions.reporter('webhook configuration watch'),
      log: (level, message) => {
        log[level]({ component: 'certs' }, message);
      },
    });
    caBundleWatch.start();
    lifecycle.defer('caBundle watch', () => caBundleWatch.stop());
  }
  lifecycle.checkpoint();
  readiness.set('serving');
  log.info({ component: 'metrics', host: config.metricsHost, port: metricsListener.port }, 'metrics listening');
  log.info({ component: 'webhook', host: config.webhookHost, port: webhook.port }, 'admission webhook listening');
  log.info(
    { component: 'extender', host: config.extenderHost, port: extender.port, clientAuth: config.extenderClientAuth },
    'scheduler extender listening',
  );
  return {
    webhook,
    extender,
    keeper,
    cache,
    elector,
    sweeper,
    metrics,
    metricsPort: metricsListener.port,
    readiness,
    stop: () => {
      readiness.set('stopping');
      return lifecycle.stopAll();
    },
  };
}
