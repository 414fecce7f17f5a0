import { WardenError } from '../base/errors.js';
import type { GpuCorePolicy } from '../hami/wire.js';
import type { KubeconfigSetting } from './kubeconfig-setting.js';

/**
 * Typed runtime configuration, read once at start from environment variables and command-line
 * flags (a flag wins over its variable). Every setting is declared once in SETTINGS (settings.ts); that
 * table drives parsing, validation messages, `--help` and docs/configuration.md (generated from it).
 */
export interface Config {
  /** Unset (or empty) means the defaults: ~/.kube/config, then the in-cluster service account. */
  kubeconfig: KubeconfigSetting | undefined;
  schedulerName: string;
  logLevel: LogLevel;
  webhookHost: string;
  webhookPort: number;
  extenderHost: string;
  extenderPort: number;
  extenderClientAuth: boolean;
  extenderClientSecretName: string;
  metricsHost: string;
  metricsPort: number;
  legacyMetrics: boolean;
  certDir: string;
  bindGraceMs: number;
  nodeLockExpireMs: number;
  nodeLockForceAfterMs: number | undefined;
  sweepEnabled: boolean;
  sweepSchedule: string;
  overwriteDefaultScheduler: boolean;
  defaultGpuCount: number;
  overwriteEnv: boolean;
  runtimeClassName: string | undefined;
  gpuCorePolicy: GpuCorePolicy;
  webhookDeleteTimeoutMs: number;
  serviceName: string;
  namespace: string;
  certHosts: string[];
  certSecretName: string | undefined;
  webhookConfigName: string | undefined;
  certValidityMs: number;
  certRenewBeforeMs: number;
  nodeSchedulerPolicy: 'binpack' | 'spread';
  gpuSchedulerPolicy: 'binpack' | 'spread';
  bindLockWaitMs: number;
  bindTimeoutMs: number;
  successEvents: boolean;
  stateStaleAfterMs: number;
  leaderElection: boolean;
  leaseName: string;
  podName: string | undefined;
  podWatchEnabled: boolean;
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export type SettingKey = keyof Config;

/**
 * A setting the process cannot run with: one line that names the setting, where its value came
 * from (flag, env var or default) and what would be accepted. The CLI prints it as is, exit 2.
 */
export class ConfigError extends WardenError {}

/** Thrown by a value parser; loadConfig turns it into a ConfigError naming where the value came from. */
export class InvalidValue extends Error {}

/** Where a setting's value came from. */
export type Origin = { kind: 'flag'; name: string } | { kind: 'env'; name: string } | { kind: 'default' };

export type Parser<T> = (raw: string, origin?: Origin) => T;

export interface SettingSpec<K extends keyof Config = keyof Config> {
  key: K;
  env: string;
  /** Older or HAMi-compatible variable names, read when `env` is unset. */
  aliases?: readonly string[];
  flag: string;
  description: string;
  /** The default as a user would type it; undefined means "unset". */
  defaultValue: string | undefined;
  allowed: string;
  parse: Parser<Config[K]>;
}

export type Environment = Readonly<Record<string, string | undefined>>;
export type FlagValues = Readonly<Record<string, string | undefined>>;
