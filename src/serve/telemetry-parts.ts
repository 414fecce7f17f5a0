import type { Config } from '../config/setting-spec.js';
import { packageVersion } from '../telemetry/build-info.js';
import { EventRecorder } from '../telemetry/events.js';
import type { Logger } from '../telemetry/logger.js';
import { WardenMetrics } from '../telemetry/metrics.js';
import type { ApiConnection } from './api-connection.js';

/** The metric families of `serve`; `version` is what vgpu_warden_build_info names (default: read here). */
export function wardenMetrics(config: Config, log: Logger, version: string | undefined): WardenMetrics {
  return new WardenMetrics({
    legacyNames: config.legacyMetrics,
    version: version ?? packageVersion(),
    onLockSourceError: (err) => {
      log.warn({ component: 'metrics', err }, 'node-lock gauges unavailable');
    },
  });
}

/** Kubernetes Events as our scheduler name, aggregated; failures share the apiserver's conditions. */
export function eventRecorder(config: Config, log: Logger, api: ApiConnection): EventRecorder {
  return new EventRecorder(
    api.core,
    config.schedulerName,
    (message) => {
      log.warn({ component: 'events' }, message);
    },
    { failures: api.conditions.reporter('events') },
  );
}
