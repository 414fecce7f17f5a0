import { AdmissionregistrationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { clip, NAME_CHARS } from '../base/user-text.js';
import type { Config } from '../config/setting-spec.js';
import { loadKubeConfig, type PooledKubeConfig } from '../kube/client.js';
import { APISERVER_UNREACHABLE } from '../telemetry/api-failure.js';
import { ConditionLog } from '../telemetry/condition-log.js';
import type { Logger } from '../telemetry/logger.js';

/** The apiserver as `serve` reaches it: one pooled kubeconfig, its API clients, and where failures are reported. */
export interface ApiConnection {
  kubeConfig: PooledKubeConfig;
  /** Persistent conditions, reported once with backoff. */
  conditions: ConditionLog;
  core: CoreV1Api;
  admissionApi: AdmissionregistrationV1Api;
}

/** Where the apiserver in use comes from, appended to "apiserver unreachable" warnings. */
function apiserverContext(kubeConfig: PooledKubeConfig): string {
  const server = kubeConfig.getCurrentCluster()?.server ?? 'unknown';
  const source = kubeConfig.from === undefined ? '' : ` from ${clip(kubeConfig.from, 2 * NAME_CHARS)}`;
  return `(apiserver ${clip(server)}${source}); retrying with backoff, /readyz answers 503 meanwhile`;
}

/** Loads the kubeconfig (KUBECONFIG, --context) and makes the clients every part shares. */
export function connectToApiserver(
  config: Config,
  log: Logger,
  options: { conditions?: ConditionLog; kubeContext?: string },
): ApiConnection {
  const kubeConfig = loadKubeConfig(config.kubeconfig, undefined, options.kubeContext);
  const conditions =
    options.conditions ??
    new ConditionLog({
      emit: (level, message, condition) => {
        log[level]({ component: 'health', condition }, message);
      },
      context: (condition) => (condition === APISERVER_UNREACHABLE ? apiserverContext(kubeConfig) : undefined),
    });
  return {
    kubeConfig,
    conditions,
    core: kubeConfig.makeApiClient(CoreV1Api),
    admissionApi: kubeConfig.makeApiClient(AdmissionregistrationV1Api),
  };
}
