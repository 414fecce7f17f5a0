import type { Config } from '../config/setting-spec.js';
import type { PodMutationConfig } from './pod-mutation.js';

type MutationSettings = Pick<
  Config,
  | 'schedulerName'
  | 'overwriteDefaultScheduler'
  | 'defaultGpuCount'
  | 'overwriteEnv'
  | 'runtimeClassName'
  | 'gpuCorePolicy'
>;

/**
 * The webhook's CREATE rules from the `webhook` setting group, in one place so that `serve` and
 * `explain` cannot drift apart (explain re-runs the same decision to judge a pod).
 */
export function podMutationConfig(config: MutationSettings): PodMutationConfig {
  return {
    schedulerName: config.schedulerName,
    overwriteDefaultScheduler: config.overwriteDefaultScheduler,
    defaultGpuCount: config.defaultGpuCount,
    overwriteEnv: config.overwriteEnv,
    runtimeClassName: config.runtimeClassName,
    gpuCorePolicy: config.gpuCorePolicy,
  };
}
