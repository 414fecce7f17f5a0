import type express from 'express';
import { podMutationConfig } from '../admission/mutation-config.js';
import { PodAdmissionHandler } from '../admission/pod-admission-handler.js';
import type { ClusterCache } from '../cluster/cluster-cache.js';
import type { Config } from '../config/setting-spec.js';
import type { ReadinessState } from '../lifecycle/readiness.js';
import type { NodeLocks } from '../lock/node-locks.js';
import { timedAdmissionHandler } from '../server/timed-handlers.js';
import { createWebhookApp } from '../server/webhook-app.js';
import type { Logger } from '../telemetry/logger.js';
import type { WardenMetrics } from '../telemetry/metrics.js';

/** The admission webhook's app: the pod handler, timed, behind the webhook's HTTP adapter. */
export function webhookApp(
  config: Config,
  log: Logger,
  parts: { locks: NodeLocks; cache: ClusterCache; metrics: WardenMetrics; ready: () => ReadinessState },
): express.Express {
  const admission = new PodAdmissionHandler({
    mutation: podMutationConfig(config),
    locks: parts.locks,
    storedLocks: parts.cache,
    deleteTimeoutMs: config.webhookDeleteTimeoutMs,
    onOutcome: (request, outcome) => {
      log.debug(
        { component: 'admission', uid: request.uid, namespace: request.namespace, name: request.name, outcome },
        `admission ${outcome.operation}`,
      );
    },
  });
  return createWebhookApp({
    handler: timedAdmissionHandler(admission, parts.metrics),
    readiness: parts.ready,
    onBadRequest: (status, message) => {
      log.warn({ component: 'admission', status }, `bad admission request: ${message}`);
    },
  });
}
