import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { CoordinationV1Api } from '@kubernetes/client-node';
import type { ClusterCache } from '../cluster/cluster-cache.js';
import type { Config } from '../config/setting-spec.js';
import { untilAborted } from '../base/abort.js';
import type { Runnable } from '../lifecycle/runnable.js';
import type { NodeLocks } from '../lock/node-locks.js';
import { LeaderElector } from '../sweeper/leader-election.js';
import { SweepSchedule } from '../sweeper/sweep-schedule.js';
import type { LockTelemetry } from '../telemetry/lock-telemetry.js';
import type { Logger } from '../telemetry/logger.js';
import type { WardenMetrics } from '../telemetry/metrics.js';
import type { ApiConnection } from './api-connection.js';

/** The Lease campaign with LEADER_ELECTION on; undefined when this process is alone. */
export function leaderElector(config: Config, log: Logger, api: ApiConnection): LeaderElector | undefined {
  if (!config.leaderElection) return undefined;
  return new LeaderElector({
    api: api.kubeConfig.makeApiClient(CoordinationV1Api),
    namespace: config.namespace,
    name: config.leaseName,
    identity: `${config.podName ?? hostname()}_${randomBytes(4).toString('hex')}`,
    conditions: api.conditions.reporter('leader election'),
    namespaceSetting: 'POD_NAMESPACE',
    log: (message) => {
      log.info({ component: 'leader' }, message);
    },
  });
}

/**
 * Campaigns until stopped; stopping hands the Lease back, so another replica leads at once instead
 * of after a lease duration.
 */
export function electionRunnable(elector: LeaderElector): Runnable {
  return {
    name: 'leader election',
    start: async (signal) => {
      elector.start();
      await untilAborted(signal);
      await elector.stop({ release: true });
    },
  };
}

/** The lock sweeper (SWEEP_ENABLED): a runnable that needs a leader, each pass timed and logged. */
export function lockSweeper(
  config: Config,
  log: Logger,
  parts: { cache: ClusterCache; locks: NodeLocks; lockTelemetry: LockTelemetry; metrics: WardenMetrics },
): SweepSchedule | undefined {
  if (!config.sweepEnabled) return undefined;
  const { cache, locks, lockTelemetry, metrics } = parts;
  return new SweepSchedule({
    schedule: config.sweepSchedule,
    targets: cache,
    locks,
    // Stalled locks that vanish between sweeps end their warning with one line.
    observer: lockTelemetry,
    concurrency: 16,
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
  });
}
