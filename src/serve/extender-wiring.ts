import type { CoreV1Api } from '@kubernetes/client-node';
import type express from 'express';
import type { ClusterCache } from '../cluster/cluster-cache.js';
import type { Config } from '../config/setting-spec.js';
import { DEFAULT_REQUEST_DEFAULTS } from '../devices/requests.js';
import { Binder } from '../extender/binder.js';
import { BindingLabelFollowUp, kubeLabelPatch } from '../extender/binding-label-follow-up.js';
import { ExtenderService } from '../extender/extender-service.js';
import type { PlacementDefaults } from '../extender/gpu-placement.js';
import { trackPendingBursts } from '../extender/pending-bursts.js';
import { podRequeueWriter } from '../extender/pod-requeue-writer.js';
import { RefusalRequeue } from '../extender/refusal-requeue.js';
import type { Lifecycle } from '../lifecycle/lifecycle.js';
import type { ReadinessState } from '../lifecycle/readiness.js';
import { runnableOf, stoppedOnAbort } from '../lifecycle/runnable.js';
import type { NodeLocks } from '../lock/node-locks.js';
import { requireClientIdentity } from '../server/client-identity.js';
import { createExtenderApp } from '../server/extender-app.js';
import { timedExtenderHandlers } from '../server/timed-handlers.js';
import type { EventRecorder } from '../telemetry/events.js';
import type { Logger } from '../telemetry/logger.js';
import type { WardenMetrics } from '../telemetry/metrics.js';
import { SCHEDULER_CLIENT_COMMON_NAME } from '../tls/client-cert-policy.js';

export interface ExtenderParts {
  core: CoreV1Api;
  cache: ClusterCache;
  locks: NodeLocks;
  events: EventRecorder;
  metrics: WardenMetrics;
  ready: () => ReadinessState;
  /** kube-scheduler must present our client certificate (EXTENDER_CLIENT_AUTH). */
  clientAuth: boolean;
}

/** Whether a pod refused on every node still waits for one (same incarnation, unbound, not ending). */
function stillPending(cache: ClusterCache) {
  return (pod: { namespace: string; name: string; uid: string }): boolean => {
    const current = cache.pod(pod.namespace, pod.name);
    const phase = current?.status?.phase;
    return (
      current?.metadata?.uid === pod.uid &&
      current.spec?.nodeName === undefined &&
      current.metadata.deletionTimestamp === undefined &&
      phase !== 'Succeeded' &&
      phase !== 'Failed'
    );
  };
}

/** The binder, with the label follow-up it hands Bindings to (run by the lifecycle). */
function binder(config: Config, log: Logger, lifecycle: Lifecycle, parts: ExtenderParts, defaults: PlacementDefaults) {
  const { core, cache, locks, events } = parts;
  const labels = new BindingLabelFollowUp({
    pods: cache,
    patchLabel: kubeLabelPatch(core),
    log: (message) => {
      log.warn({ component: 'bind' }, message);
    },
  });
  lifecycle.run(runnableOf('binding label follow-up', labels));
  return new Binder({
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
}

/** filter, prioritize and bind over the store, with the refusal requeue and the pending bursts they keep. */
function extenderService(config: Config, log: Logger, lifecycle: Lifecycle, parts: ExtenderParts): ExtenderService {
  const { core, cache, events } = parts;
  const defaults = {
    nodePolicy: config.nodeSchedulerPolicy,
    gpuPolicy: config.gpuSchedulerPolicy,
    requestDefaults: DEFAULT_REQUEST_DEFAULTS,
  };
  const bindWith = binder(config, log, lifecycle, parts, defaults);
  const refusals = new RefusalRequeue({
    nodeGeneration: (node) => cache.nodeGeneration(node),
    onNodeChange: (listener) =>
      cache.onNodeChange((node) => {
        listener(node.metadata?.name ?? '');
      }),
    stillPending: stillPending(cache),
    nudge: podRequeueWriter(core),
    log: (message) => {
      log.info({ component: 'extender' }, message);
    },
  });
  lifecycle.run(runnableOf('refusal requeue', refusals));
  const pending = trackPendingBursts(cache, defaults);
  lifecycle.run(
    stoppedOnAbort('pending bursts', () => {
      pending.stop();
    }),
  );
  return new ExtenderService({
    cache,
    binder: bindWith,
    events,
    defaults,
    syncWaitMs: 10_000,
    refusals,
    pending: pending.bursts,
    successEvents: config.successEvents,
  });
}

/** The scheduler extender's app: the service, timed, behind the extender's HTTP adapter and client check. */
export function extenderApp(config: Config, log: Logger, lifecycle: Lifecycle, parts: ExtenderParts): express.Express {
  return createExtenderApp({
    handlers: timedExtenderHandlers(extenderService(config, log, lifecycle, parts), parts.metrics),
    readiness: parts.ready,
    bindTimeoutMs: config.bindTimeoutMs,
    onServed: (verb, phases) => {
      parts.metrics.observeExtenderCall(verb, phases);
    },
    onBadRequest: (path, message) => {
      log.warn({ component: 'extender', path }, `bad extender request: ${message}`);
    },
    ...(parts.clientAuth
      ? {
          guard: requireClientIdentity({ commonName: SCHEDULER_CLIENT_COMMON_NAME }, (problem) => {
            log.warn({ component: 'extender' }, `refused a client: ${problem}`);
          }),
        }
      : {}),
  });
}
