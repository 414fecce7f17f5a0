import { CoordinationV1Api } from '@kubernetes/client-node';
import { ClusterCache } from '../cluster/cluster-cache.js';
import { kubeSources } from '../cluster/kube-list-watch.js';
import type { Config } from '../config/setting-spec.js';
import { DEFAULT_REQUEST_DEFAULTS } from '../devices/requests.js';
import { untilAborted } from '../base/abort.js';
import type { Runnable } from '../lifecycle/runnable.js';
import { KubeKubeletEvidenceApi } from '../lock/kube-kubelet-evidence-api.js';
import { KubeNodeLockApi } from '../lock/kube-node-lock-api.js';
import { KubeletAdmission } from '../lock/kubelet-admission.js';
import { NodeLocks } from '../lock/node-locks.js';
import { failureText } from '../telemetry/api-failure.js';
import type { EventRecorder } from '../telemetry/events.js';
import { containerAllocationSamples } from '../telemetry/hami-pod-metrics.js';
import { gpuSamples } from '../telemetry/gpu-samples.js';
import { cachedLockSource } from '../telemetry/lock-samples.js';
import { LockTelemetry } from '../telemetry/lock-telemetry.js';
import type { Logger } from '../telemetry/logger.js';
import type { WardenMetrics } from '../telemetry/metrics.js';
import type { ApiConnection } from './api-connection.js';

/** The state store of `serve`, fed by list-watches of the apiserver. */
export function clusterCache(config: Config, log: Logger, api: ApiConnection): ClusterCache {
  return new ClusterCache({
    sources: kubeSources(api.kubeConfig),
    staleAfterMs: config.stateStaleAfterMs,
    conditions: api.conditions,
    // GPU memory quota limits are in the units requests are counted in (HAMi's memoryFactor).
    quotaMemoryFactor: DEFAULT_REQUEST_DEFAULTS.memoryFactor,
    log: (level, message) => {
      log[level]({ component: 'cache' }, message);
    },
  });
}

/** The store's list-watches; until synced, readiness says why not (cache.problems()). */
export function cacheRunnable(cache: ClusterCache, log: Logger): Runnable {
  return {
    name: 'cluster cache',
    start: async (signal) => {
      // Resolves once synced or stopped.
      void cache.start().catch((error: unknown) => {
        log.error({ component: 'cache' }, `cluster cache failed to start: ${failureText(error)}`);
      });
      await untilAborted(signal);
      await cache.stop();
    },
  };
}

function lockConfigOf(config: Config) {
  return {
    bindGraceMs: config.bindGraceMs,
    expireMs: config.nodeLockExpireMs,
    forceAfterMs: config.nodeLockForceAfterMs,
  };
}

export interface LockParts {
  locks: NodeLocks;
  /** Metrics, Kubernetes Events and one JSON log line per lock decision. */
  lockTelemetry: LockTelemetry;
}

/** NodeLocks over the store's view, observed by the lock telemetry. */
export function nodeLocks(
  config: Config,
  log: Logger,
  api: ApiConnection,
  parts: { cache: ClusterCache; metrics: WardenMetrics; events: EventRecorder },
): LockParts {
  const { cache, metrics, events } = parts;
  const lockTelemetry = new LockTelemetry({
    metrics,
    events,
    log,
    podUid: (pod) => cache.pod(pod.namespace, pod.name)?.metadata?.uid,
  });
  const locks = new NodeLocks({
    api: new KubeNodeLockApi(api.core),
    view: cache.lockView,
    config: lockConfigOf(config),
    // A lock whose owner vanished before Allocate stays until the node's kubelet is past that pod.
    kubeletAdmission: new KubeletAdmission({
      api: new KubeKubeletEvidenceApi(api.core, api.kubeConfig.makeApiClient(CoordinationV1Api)),
    }),
    observer: lockTelemetry,
  });
  return { locks, lockTelemetry };
}

/** The gauges read from the store, each unavailable until it has synced. */
export function exportClusterMetrics(config: Config, metrics: WardenMetrics, cache: ClusterCache): void {
  const lockSamples = cachedLockSource(
    {
      lockedNodes: () => cache.lockedNodes(),
      lockOf: (node) => cache.lockOf(node),
      pod: (namespace, name) => cache.pod(namespace, name),
    },
    lockConfigOf(config),
  );
  metrics.setLockSource(() => (cache.synced ? lockSamples() : undefined));
  metrics.setUnreadableAllocationSource(() => (cache.synced ? cache.unreadableAllocations() : undefined));
  metrics.setGpuSource(() => (cache.synced ? gpuSamples(cache) : undefined));
  metrics.setContainerAllocationSource(() => (cache.synced ? containerAllocationSamples(cache) : undefined));
  metrics.setQuotaSource(() => (cache.synced ? cache.quotaUses() : undefined));
}
