import { type Config } from '../config/setting-spec.js';
import type { ClusterCache } from '../cluster/cluster-cache.js';
import type { HttpsListener } from '../server/https-listener.js';
import type { WardenMetrics } from '../telemetry/metrics.js';
import type { Logger } from '../telemetry/logger.js';
import type { CertKeeper } from '../tls/cert-keeper.js';
import type { LeaderElector } from '../sweeper/leader-election.js';
import { startPodWatchRelease } from '../sweeper/pod-watch-release.js';
import type { SweepSchedule } from '../sweeper/sweep-schedule.js';
import { GRACEFUL_SHUTDOWN_MS, Lifecycle, StartAborted, type StopReport } from '../lifecycle/lifecycle.js';
import type { Readiness } from '../lifecycle/readiness.js';
import { stoppedOnAbort } from '../lifecycle/runnable.js';
import type { ConditionLog } from '../telemetry/condition-log.js';
import type { NodeLocks } from '../lock/node-locks.js';
import { webhookApp } from './admission-wiring.js';
import { connectToApiserver, type ApiConnection } from './api-connection.js';
import { certificateRunnables, startCertificates, type ServingListeners } from './certificates.js';
import { cacheRunnable, clusterCache, exportClusterMetrics, nodeLocks } from './cluster-state.js';
import { extenderApp } from './extender-wiring.js';
import { electionRunnable, leaderElector, lockSweeper } from './leadership.js';
import { openListeners, type OpenListeners } from './listeners.js';
import { serveReadiness } from './readiness-checks.js';
import { eventRecorder, wardenMetrics } from './telemetry-parts.js';

/**
 * Releasing the Lease gets at most this much of the shutdown bound, so listeners still drain when
 * the apiserver hangs.
 */
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

/**
 * Wires everything from configuration: certificates, the cluster cache, NodeLocks, the webhook on
 * its public listener and the extender (loopback, or anywhere with EXTENDER_CLIENT_AUTH). Both
 * listeners serve the keeper's certificate and reload it together; with client authentication the
 * extender also trusts the keeper's caBundle for kube-scheduler's client certificate, which the
 * keeper's rounds keep issued (ClientCertPublisher).
 *
 * The background parts are runnables started by the lifecycle; the lock sweeper needs a leader
 * and runs only during the elector's terms, stopped by each term's end.
 *
 * All or nothing: if any part fails to start (a port taken, certificates unavailable), or
 * `options.signal` aborts meanwhile, what already started is stopped before this rejects, with a
 * StartupError whose message is one line naming what failed, or StartAborted. Listeners bind before
 * the Lease is campaigned for and the sweeper runs, so a taken port never leaves a Lease held.
 */
export async function startServer(config: Config, log: Logger, options: StartOptions = {}): Promise<RunningServer> {
  const api = connectToApiserver(config, log, options);
  // The lock sweeper runs on the elected leader only; the pod watch runs on every replica (releases
  // are owner-checked and idempotent, so replicas racing on one lock give the same result).
  const elector = leaderElector(config, log, api);
  const lifecycle = new Lifecycle({
    ...(options.signal ? { signal: options.signal } : {}),
    ...(elector ? { leadership: elector } : {}),
    boundMs: options.shutdownBoundMs ?? GRACEFUL_SHUTDOWN_MS,
    onStopProblem: (part, problem) => {
      log.warn({ component: 'lifecycle', part }, `stopping ${part}: ${problem}`);
    },
    onRunProblem: (part, problem) => {
      log.error({ component: 'lifecycle', part }, `${part} failed: ${problem}`);
    },
  });
  lifecycle.defer('API connections', () => api.kubeConfig.close());
  try {
    return await wire({ config, log, lifecycle, options, api, elector });
  } catch (error) {
    await lifecycle.stopAll();
    if (options.signal?.aborted === true) throw new StartAborted('stop requested during start-up', { cause: error });
    throw error;
  }
}

interface Wiring {
  config: Config;
  log: Logger;
  lifecycle: Lifecycle;
  options: StartOptions;
  api: ApiConnection;
  elector: LeaderElector | undefined;
}

/** In start-up order; the lifecycle stops the parts last started first. */
async function wire(wiring: Wiring): Promise<RunningServer> {
  const { config, log, lifecycle, api, elector } = wiring;
  // The store's first LIST starts before the certificates: at 5000 nodes it waits seconds on the
  // apiserver, and the key generation and certificate API calls fit in that wait.
  const cache = clusterCache(config, log, api);
  lifecycle.run(cacheRunnable(cache, log));
  // Filled in once listening; the keeper may hand out material before (the first ensure) and after.
  const listening: ServingListeners = {};
  const certificates = await startCertificates({ config, log, lifecycle, ...api, listening });
  const metrics = wardenMetrics(config, log, wiring.options.version);
  const events = eventRecorder(config, log, api);
  // Stopped late: pending aggregated Events are written after the listeners and the sweeper stop.
  lifecycle.run(stoppedOnAbort('events', () => events.close()));
  const { locks, lockTelemetry } = nodeLocks(config, log, api, { cache, metrics, events });
  exportClusterMetrics(config, metrics, cache);
  // The cluster-wide metric families are the leader's to export (HAMi's scheduler does the same), so
  // dashboards summing over replicas count each GPU once; without election this process is alone.
  metrics.setLeadership(elector ? () => elector.isLeader() : () => true);
  const readiness = serveReadiness({ keeper: certificates.keeper, listening, cache, elector });
  const ready = () => readiness.state();
  const apps = {
    webhook: webhookApp(config, log, { locks, cache, metrics, ready }),
    extender: extenderApp(config, log, lifecycle, {
      ...api,
      cache,
      locks,
      events,
      metrics,
      ready,
      clientAuth: certificates.clientCerts !== undefined,
    }),
  };
  startPodWatch(config, log, lifecycle, { cache, locks });
  const listeners = await openListeners(config, log, lifecycle, { apps, certificates, metrics, ready, listening });
  if (elector) lifecycle.run(electionRunnable(elector), { stopBoundMs: LEASE_RELEASE_BOUND_MS });
  const sweeper = lockSweeper(config, log, { cache, locks, lockTelemetry, metrics });
  if (sweeper) lifecycle.run(sweeper);
  for (const runnable of certificateRunnables(config, log, api, certificates.keeper)) lifecycle.run(runnable);
  lifecycle.checkpoint();
  readiness.set('serving');
  logListening(config, log, listeners);
  return {
    webhook: listeners.webhook,
    extender: listeners.extender,
    keeper: certificates.keeper,
    cache,
    elector,
    sweeper,
    metrics,
    metricsPort: listeners.metrics.port,
    readiness,
    stop: () => {
      readiness.set('stopping');
      return lifecycle.stopAll();
    },
  };
}

/** The pod watch's release of a deleted pod's lock (POD_WATCH_ENABLED), for when the webhook was down. */
function startPodWatch(
  config: Config,
  log: Logger,
  lifecycle: Lifecycle,
  parts: { cache: ClusterCache; locks: NodeLocks },
): void {
  const { cache, locks } = parts;
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
  lifecycle.run(stoppedOnAbort('pod watch', stopWatch));
}

function logListening(config: Config, log: Logger, listeners: OpenListeners): void {
  log.info({ component: 'metrics', host: config.metricsHost, port: listeners.metrics.port }, 'metrics listening');
  log.info(
    { component: 'webhook', host: config.webhookHost, port: listeners.webhook.port },
    'admission webhook listening',
  );
  log.info(
    {
      component: 'extender',
      host: config.extenderHost,
      port: listeners.extender.port,
      clientAuth: config.extenderClientAuth,
    },
    'scheduler extender listening',
  );
}
