import { delimiter } from 'node:path';
import { validateCronExpression } from 'cron';
import { GPU_CORE_POLICIES, type GpuCorePolicy } from './hami/wire.js';
import { parseDuration } from './base/duration.js';
import { WardenError } from './base/errors.js';
import type { KubeconfigSetting } from './kube/kubeconfig-resolution.js';
import { isLoopbackHost } from './base/net-hosts.js';
import { servingNames } from './tls/serving-names.js';
import { clip } from './base/user-text.js';

/**
 * Typed runtime configuration, read once at start from environment variables and command-line
 * flags (a flag wins over its variable). Every setting is declared once in SETTINGS below; that
 * table drives parsing, validation messages, `--help` and the README's configuration table.
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
class InvalidValue extends Error {}

/** Where a setting's value came from. */
export type Origin = { kind: 'flag'; name: string } | { kind: 'env'; name: string } | { kind: 'default' };

type Parser<T> = (raw: string, origin?: Origin) => T;

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

const port: Parser<number> = (raw) => {
  if (!/^\d+$/.test(raw)) throw new InvalidValue();
  const value = Number(raw);
  if (value < 1 || value > 65535) throw new InvalidValue();
  return value;
};

const duration: Parser<number> = (raw) => {
  try {
    return parseDuration(raw);
  } catch (error) {
    throw new InvalidValue('', { cause: error });
  }
};

const positiveDuration: Parser<number> = (raw) => {
  const value = duration(raw);
  if (value <= 0) throw new InvalidValue();
  return value;
};

const optionalPositiveDuration: Parser<number | undefined> = (raw) => (raw === '' ? undefined : positiveDuration(raw));

const boolean: Parser<boolean> = (raw) => {
  const lowered = raw.toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(lowered)) return true;
  if (['false', '0', 'no', 'off'].includes(lowered)) return false;
  throw new InvalidValue();
};

const host: Parser<string> = (raw) => {
  if (!/^[A-Za-z0-9.:[\]-]+$/.test(raw)) throw new InvalidValue();
  return raw;
};

const nonEmpty: Parser<string> = (raw) => {
  if (raw.trim() === '') throw new InvalidValue();
  return raw;
};

// A DNS-1123 subdomain, which is what the apiserver accepts for spec.schedulerName.
const dnsSubdomain: Parser<string> = (raw) => {
  if (raw.length > 253 || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(raw)) {
    throw new InvalidValue();
  }
  return raw;
};

const wholeNumber: Parser<number> = (raw) => {
  if (!/^\d+$/.test(raw) || Number(raw) > 64) throw new InvalidValue();
  return Number(raw);
};

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dnsLabel: Parser<string> = (raw) => {
  if (raw.length > 63 || !DNS_LABEL.test(raw)) throw new InvalidValue();
  return raw;
};

const optionalDnsSubdomain: Parser<string | undefined> = (raw) => (raw === '' ? undefined : dnsSubdomain(raw));

// Checked with the same rules the certificate code applies, so a bad host fails here at start
// and not later inside the certificate keeper.
const hostList: Parser<string[]> = (raw) => {
  const hosts = raw.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
  try {
    servingNames({ serviceName: 'probe', namespace: 'probe', extraHosts: hosts });
  } catch (error) {
    throw new InvalidValue('', { cause: error });
  }
  return hosts;
};

const placementPolicy: Parser<'binpack' | 'spread'> = (raw) => {
  if (raw !== 'binpack' && raw !== 'spread') throw new InvalidValue();
  return raw;
};

const gpuCorePolicy: Parser<GpuCorePolicy> = (raw) => {
  const found = GPU_CORE_POLICIES.find((policy) => policy === raw);
  if (found === undefined) throw new InvalidValue();
  return found;
};

const cron: Parser<string> = (raw) => {
  const fields = raw.trim().split(/\s+/);
  if (fields.length < 5 || fields.length > 6 || !validateCronExpression(raw).valid) throw new InvalidValue();
  return raw.trim();
};

const logLevel: Parser<LogLevel> = (raw) => {
  const found = LOG_LEVELS.find((level) => level === raw);
  if (found === undefined) throw new InvalidValue();
  return found;
};

// kubectl's rules: KUBECONFIG is a list (path.delimiter, ':' on Linux) whose empty entries are
// skipped, and an empty KUBECONFIG counts as unset; --kubeconfig is one file, taken as written.
const kubeconfigSetting: Parser<KubeconfigSetting | undefined> = (raw, origin) => {
  if (origin?.kind === 'flag') return raw === '' ? undefined : { paths: [raw], origin: `KUBECONFIG (flag --${origin.name})`, explicit: true };
  const paths = raw.split(delimiter).filter((path) => path !== '');
  return paths.length === 0 ? undefined : { paths, origin: 'KUBECONFIG (env)', explicit: false };
};

function setting<K extends keyof Config>(spec: SettingSpec<K>): SettingSpec<K> {
  return spec;
}

export const SETTINGS = [
  setting({
    key: 'kubeconfig', env: 'KUBECONFIG', flag: 'kubeconfig', defaultValue: undefined,
    description: 'kubeconfig as kubectl reads it: KUBECONFIG may list files separated by ":" (merged, first wins), --kubeconfig names one file; unset or empty: ~/.kube/config, then the in-cluster service account',
    allowed: 'expected a file path, or for KUBECONFIG a ":"-separated list', parse: kubeconfigSetting,
  }),
  setting({
    key: 'schedulerName', env: 'SCHEDULER_NAME', flag: 'scheduler-name', defaultValue: 'hami-scheduler',
    description: 'scheduler profile name the webhook writes into spec.schedulerName of GPU pods',
    allowed: 'expected a DNS-1123 subdomain such as hami-scheduler', parse: dnsSubdomain,
  }),
  setting({
    key: 'logLevel', env: 'LOG_LEVEL', flag: 'log-level', defaultValue: 'info',
    description: 'log level of the JSON logs', allowed: `expected one of ${LOG_LEVELS.join(', ')}`, parse: logLevel,
  }),
  setting({
    key: 'webhookHost', env: 'WEBHOOK_HOST', flag: 'webhook-host', defaultValue: '0.0.0.0',
    description: 'address the admission webhook listener binds', allowed: 'expected a host name or IP address', parse: host,
  }),
  setting({
    key: 'webhookPort', env: 'WEBHOOK_PORT', flag: 'webhook-port', defaultValue: '9443',
    description: 'TLS port of the admission webhook', allowed: 'expected a port number from 1 to 65535', parse: port,
  }),
  setting({
    key: 'extenderHost', env: 'EXTENDER_HOST', flag: 'extender-host', defaultValue: '127.0.0.1',
    description: 'address the scheduler extender listener binds; anything but loopback (127.0.0.0/8, ::1, localhost) needs EXTENDER_CLIENT_AUTH=true',
    allowed: 'expected a host name or IP address', parse: host,
  }),
  setting({
    key: 'extenderPort', env: 'EXTENDER_PORT', flag: 'extender-port', defaultValue: '9444',
    description: 'TLS port of the scheduler extender', allowed: 'expected a port number from 1 to 65535', parse: port,
  }),
  setting({
    key: 'extenderClientAuth', env: 'EXTENDER_CLIENT_AUTH', flag: 'extender-client-auth', defaultValue: 'false',
    description: 'serve the extender only to kube-scheduler\'s client certificate (CN vgpu-warden-scheduler, clientAuth, issued by vgpu-warden\'s CA into EXTENDER_CLIENT_SECRET_NAME); needs CERT_SECRET_NAME',
    allowed: 'expected true or false', parse: boolean,
  }),
  setting({
    key: 'extenderClientSecretName', env: 'EXTENDER_CLIENT_SECRET_NAME', flag: 'extender-client-secret-name', defaultValue: 'vgpu-warden-scheduler-client',
    description: 'Secret in POD_NAMESPACE that vgpu-warden keeps kube-scheduler\'s client certificate in (tls.crt, tls.key, ca.crt; no CA key), when EXTENDER_CLIENT_AUTH is on',
    allowed: 'expected a Secret name (DNS subdomain)', parse: dnsSubdomain,
  }),
  setting({
    key: 'metricsHost', env: 'METRICS_HOST', flag: 'metrics-host', defaultValue: '0.0.0.0',
    description: 'address the metrics listener binds', allowed: 'expected a host name or IP address', parse: host,
  }),
  setting({
    key: 'metricsPort', env: 'METRICS_PORT', flag: 'metrics-port', defaultValue: '9395',
    description: 'port of the Prometheus /metrics listener', allowed: 'expected a port number from 1 to 65535', parse: port,
  }),
  setting({
    key: 'certDir', env: 'CERT_DIR', flag: 'cert-dir', defaultValue: 'webhook-certs',
    description: 'directory holding the CA and serving certificate', allowed: 'expected a directory path', parse: nonEmpty,
  }),
  setting({
    key: 'bindGraceMs', env: 'BIND_GRACE', flag: 'bind-grace', defaultValue: '60s',
    description: 'how long a fresh lock counts as a bind in progress (keep it above the extender httpTimeout)',
    allowed: 'expected a positive duration such as 60s', parse: positiveDuration,
  }),
  setting({
    key: 'nodeLockExpireMs', env: 'NODELOCK_EXPIRE', aliases: ['HAMI_NODELOCK_EXPIRE'], flag: 'nodelock-expire',
    defaultValue: '5m',
    description: 'age after which a lock counts as expired (legacy locks are released, held ones reported stalled)',
    allowed: 'expected a positive duration such as 5m', parse: positiveDuration,
  }),
  setting({
    key: 'nodeLockForceAfterMs', env: 'NODELOCK_FORCE_AFTER', flag: 'nodelock-force-after', defaultValue: undefined,
    description: 'opt-in: release even a stalled lock once it is this old, if the node\'s kubelet cannot still admit its owner from its queue; unset never forces',
    allowed: 'expected a positive duration such as 15m, or empty for never', parse: optionalPositiveDuration,
  }),
  setting({
    key: 'sweepEnabled', env: 'SWEEP_ENABLED', flag: 'sweep-enabled', defaultValue: 'true',
    description: 'run the lock sweeper (on the elected leader only)', allowed: 'expected true or false', parse: boolean,
  }),
  setting({
    key: 'sweepSchedule', env: 'SWEEP_SCHEDULE', flag: 'sweep-schedule', defaultValue: '*/30 * * * * *',
    description: 'cron schedule of the lock sweeper, 5 fields or 6 with leading seconds',
    allowed: 'expected a cron expression with 5 or 6 fields such as "*/30 * * * * *"', parse: cron,
  }),
  setting({
    key: 'overwriteDefaultScheduler', env: 'OVERWRITE_DEFAULT_SCHEDULER', flag: 'overwrite-default-scheduler', defaultValue: 'true',
    description: 'also take over GPU pods that name default-scheduler (the apiserver default); pods naming any other scheduler are left alone',
    allowed: 'expected true or false', parse: boolean,
  }),
  setting({
    key: 'defaultGpuCount', env: 'DEFAULT_GPU_NUM', flag: 'default-gpu-num', defaultValue: '1',
    description: 'nvidia.com/gpu the webhook sets when a container asks for GPU memory or cores without a count; 0 turns that off',
    allowed: 'expected a whole number from 0 to 64', parse: wholeNumber,
  }),
  setting({
    key: 'overwriteEnv', env: 'OVERWRITE_ENV', flag: 'overwrite-env', defaultValue: 'false',
    description: 'HAMi chart value scheduler.overwriteEnv: the webhook sets NVIDIA_VISIBLE_DEVICES=none on containers that request no GPU (GPU pods\' other containers; non-GPU pods only if the webhook is sent them)',
    allowed: 'expected true or false', parse: boolean,
  }),
  setting({
    key: 'runtimeClassName', env: 'RUNTIME_CLASS_NAME', flag: 'runtime-class-name', defaultValue: undefined,
    description: 'HAMi chart value devicePlugin.runtimeClassName: the webhook sets spec.runtimeClassName of GPU pods that name none; unset or empty sets nothing',
    allowed: 'expected a RuntimeClass name (DNS subdomain) such as nvidia, or empty', parse: optionalDnsSubdomain,
  }),
  setting({
    key: 'gpuCorePolicy', env: 'GPU_CORE_POLICY', flag: 'gpu-core-policy', defaultValue: 'default',
    description: 'HAMi chart value devices.nvidia.gpuCorePolicy: force or disable is written as GPU_CORE_UTILIZATION_POLICY into GPU containers for HAMi-core; default writes nothing',
    allowed: `expected one of ${GPU_CORE_POLICIES.join(', ')}`, parse: gpuCorePolicy,
  }),
  setting({
    key: 'webhookDeleteTimeoutMs', env: 'WEBHOOK_DELETE_TIMEOUT', flag: 'webhook-delete-timeout', defaultValue: '3s',
    description: 'upper bound for releasing a lock on pod DELETE; the delete is allowed either way (keep it under timeoutSeconds)',
    allowed: 'expected a positive duration such as 3s', parse: positiveDuration,
  }),
  setting({
    key: 'serviceName', env: 'SERVICE_NAME', flag: 'service-name', defaultValue: 'vgpu-warden',
    description: 'Service in front of the webhook; its DNS names go into the serving certificate',
    allowed: 'expected a DNS label such as vgpu-warden', parse: dnsLabel,
  }),
  setting({
    key: 'namespace', env: 'POD_NAMESPACE', flag: 'namespace', defaultValue: 'vgpu-warden',
    description: 'namespace vgpu-warden runs in (Service DNS names, the certificate Secret, the leader Lease)',
    allowed: 'expected a namespace name (DNS label)', parse: dnsLabel,
  }),
  setting({
    key: 'certHosts', env: 'CERT_HOSTS', flag: 'cert-hosts', defaultValue: '',
    description: 'extra DNS names and IPs for the serving certificate, comma-separated',
    allowed: 'expected comma-separated host names or IP addresses', parse: hostList,
  }),
  setting({
    key: 'certSecretName', env: 'CERT_SECRET_NAME', flag: 'cert-secret-name', defaultValue: undefined,
    description: 'keep the CA and serving certificate in this Secret (shared by all replicas) instead of CERT_DIR',
    allowed: 'expected a Secret name (DNS subdomain), or empty for the cert directory', parse: optionalDnsSubdomain,
  }),
  setting({
    key: 'webhookConfigName', env: 'WEBHOOK_CONFIG_NAME', flag: 'webhook-config-name', defaultValue: undefined,
    description: 'MutatingWebhookConfiguration whose caBundle vgpu-warden keeps current; unset leaves caBundle alone',
    allowed: 'expected an object name (DNS subdomain), or empty', parse: optionalDnsSubdomain,
  }),
  setting({
    key: 'certValidityMs', env: 'CERT_VALIDITY', flag: 'cert-validity', defaultValue: '8760h',
    description: 'lifetime of a newly issued serving certificate (the CA gets ten times as long)',
    allowed: 'expected a positive duration such as 8760h', parse: positiveDuration,
  }),
  setting({
    key: 'certRenewBeforeMs', env: 'CERT_RENEW_BEFORE', flag: 'cert-renew-before', defaultValue: '720h',
    description: 'renew a certificate this long before it expires',
    allowed: 'expected a positive duration such as 720h', parse: positiveDuration,
  }),
  setting({
    key: 'nodeSchedulerPolicy', env: 'NODE_SCHEDULER_POLICY', flag: 'node-scheduler-policy', defaultValue: 'binpack',
    description: 'node policy of the extender\'s prioritize: binpack fills busy nodes first, spread empty ones (pod annotation hami.io/node-scheduler-policy overrides)',
    allowed: 'expected binpack or spread', parse: placementPolicy,
  }),
  setting({
    key: 'gpuSchedulerPolicy', env: 'GPU_SCHEDULER_POLICY', flag: 'gpu-scheduler-policy', defaultValue: 'spread',
    description: 'GPU policy inside a node: binpack shares busy GPUs first, spread uses idle ones (pod annotation hami.io/gpu-scheduler-policy overrides)',
    allowed: 'expected binpack or spread', parse: placementPolicy,
  }),
  setting({
    key: 'bindLockWaitMs', env: 'BIND_LOCK_WAIT', flag: 'bind-lock-wait', defaultValue: '15s',
    description: 'how long a bind waits for a busy node\'s lock before failing (kube-scheduler then retries); must be below BIND_TIMEOUT',
    allowed: 'expected a positive duration below 30s such as 15s', parse: (raw) => {
      const value = positiveDuration(raw);
      if (value >= 30_000) throw new InvalidValue();
      return value;
    },
  }),
  setting({
    key: 'bindTimeoutMs', env: 'BIND_TIMEOUT', flag: 'bind-timeout', defaultValue: '25s',
    description: 'one deadline for a whole bind, lock wait, API calls and clean-up included; below the extender httpTimeout (30s) and BIND_GRACE',
    allowed: 'expected a duration from 100ms to below 30s such as 25s', parse: (raw) => {
      const value = positiveDuration(raw);
      if (value < 100 || value >= 30_000) throw new InvalidValue();
      return value;
    },
  }),
  setting({
    key: 'stateStaleAfterMs', env: 'STATE_STALE_AFTER', flag: 'state-stale-after', defaultValue: '30s',
    description: 'a node or pod watch down this long makes the state store stale: filter answers with an error and /readyz fails until it recovers',
    allowed: 'expected a positive duration such as 30s', parse: positiveDuration,
  }),
  setting({
    key: 'leaderElection', env: 'LEADER_ELECTION', flag: 'leader-election', defaultValue: 'true',
    description: 'elect one replica through a Lease to run the sweeper (lease 15s, renew 10s, retry 2s); false makes this replica sweep alone',
    allowed: 'expected true or false', parse: boolean,
  }),
  setting({
    key: 'leaseName', env: 'LEASE_NAME', flag: 'lease-name', defaultValue: 'vgpu-warden',
    description: 'coordination.k8s.io Lease used for leader election, in POD_NAMESPACE',
    allowed: 'expected a Lease name (DNS subdomain)', parse: dnsSubdomain,
  }),
  setting({
    key: 'podName', env: 'POD_NAME', flag: 'pod-name', defaultValue: undefined,
    description: 'this replica\'s name (downward API; unset: the host name); the leader identity is it plus a random suffix',
    allowed: 'expected a non-empty name', parse: nonEmpty,
  }),
  setting({
    key: 'podWatchEnabled', env: 'POD_WATCH_ENABLED', flag: 'pod-watch-enabled', defaultValue: 'true',
    description: 'release a pod\'s node lock when the pod watch shows it deleted or being deleted (works while the webhook is down)',
    allowed: 'expected true or false', parse: boolean,
  }),
] as const satisfies readonly SettingSpec[];

export type Environment = Readonly<Record<string, string | undefined>>;
export type FlagValues = Readonly<Record<string, string | undefined>>;

/**
 * Settings by the part of vgpu-warden that reads them. A command names the groups it uses and only
 * those are read and checked, so a bad value it never reads (SWEEP_SCHEDULE for `locks`,
 * WEBHOOK_PORT for `certs`) does not stop it; `serve` uses them all. A setting may sit in several.
 */
export const SETTING_GROUPS = {
  cluster: ['kubeconfig'],
  logging: ['logLevel'],
  lockRules: ['bindGraceMs', 'nodeLockExpireMs', 'nodeLockForceAfterMs'],
  servingCertificate: ['certDir', 'serviceName', 'namespace', 'certHosts', 'certValidityMs', 'certRenewBeforeMs'],
  certificateStorage: ['certSecretName', 'webhookConfigName', 'namespace'],
  webhook: ['webhookHost', 'webhookPort', 'schedulerName', 'overwriteDefaultScheduler', 'defaultGpuCount', 'overwriteEnv', 'runtimeClassName', 'gpuCorePolicy', 'webhookDeleteTimeoutMs'],
  extender: [
    'extenderHost', 'extenderPort', 'extenderClientAuth', 'extenderClientSecretName', 'schedulerName',
    'nodeSchedulerPolicy', 'gpuSchedulerPolicy', 'bindLockWaitMs', 'bindTimeoutMs', 'stateStaleAfterMs',
  ],
  metrics: ['metricsHost', 'metricsPort'],
  sweeper: ['sweepEnabled', 'sweepSchedule', 'leaderElection', 'leaseName', 'podName', 'podWatchEnabled', 'namespace'],
} as const satisfies Record<string, readonly SettingKey[]>;

export type SettingGroup = keyof typeof SETTING_GROUPS;

/** The settings of some groups, each once. */
export function settingsOf(groups: readonly SettingGroup[]): SettingKey[] {
  return [...new Set(groups.flatMap((group) => SETTING_GROUPS[group]))];
}

/** Longest value a message repeats: values are user input and may be any length. */
const VALUE_CHARS = 100;

interface Given {
  origin: Origin;
  raw: string;
}

/** What the checks see: the parsed values and, for settings the user set, where they came from. */
interface Loaded {
  values: Partial<Record<SettingKey, unknown>>;
  given: Partial<Record<SettingKey, Given>>;
  selected: ReadonlySet<SettingKey>;
}

function specOf(key: SettingKey): SettingSpec {
  const spec = (SETTINGS as readonly SettingSpec[]).find((candidate) => candidate.key === key);
  if (spec === undefined) throw new Error(`unreachable: no setting ${key}`);
  return spec;
}

function givenValue(spec: SettingSpec, env: Environment, flags: FlagValues): Given | undefined {
  const flagValue = flags[spec.flag];
  if (flagValue !== undefined) return { origin: { kind: 'flag', name: spec.flag }, raw: flagValue };
  for (const name of [spec.env, ...(spec.aliases ?? [])]) {
    const value = env[name];
    if (value !== undefined) return { origin: { kind: 'env', name }, raw: value };
  }
  return undefined;
}

/** `flag --x`, `env` (the setting's own variable), `env HAMI_X` (an alias) or `default`. */
export function originText(spec: SettingSpec, origin: Origin): string {
  if (origin.kind === 'flag') return `flag --${origin.name}`;
  if (origin.kind === 'env') return origin.name === spec.env ? 'env' : `env ${origin.name}`;
  return 'default';
}

/** `NODELOCK_EXPIRE (env HAMI_NODELOCK_EXPIRE) = 30s`, or `BIND_GRACE (default 60s)`. */
function describe(key: SettingKey, loaded: Loaded): string {
  const spec = specOf(key);
  const given = loaded.given[key];
  if (given === undefined) return `${spec.env} (default ${spec.defaultValue === undefined || spec.defaultValue === '' ? 'unset' : spec.defaultValue})`;
  return `${spec.env} (${originText(spec, given.origin)}) = ${clip(given.raw, VALUE_CHARS)}`;
}

/**
 * Builds the configuration from env and flags. Throws ConfigError for the first problem; nothing is
 * half-applied because the caller gets either a whole Config or the error. With `only`, just those
 * settings are read and checked (and relations among them); reading any other from the result is a
 * programming error and throws, so a command cannot silently get a default it did not ask for.
 */
export function loadConfig(env: Environment, flags: FlagValues = {}, only?: readonly SettingKey[]): Config {
  const selected = new Set<SettingKey>(only ?? SETTINGS.map((spec) => spec.key));
  const loaded: Loaded = { values: {}, given: {}, selected };
  for (const spec of SETTINGS as readonly SettingSpec[]) {
    if (!selected.has(spec.key)) continue;
    const given = givenValue(spec, env, flags);
    const raw = given?.raw ?? spec.defaultValue;
    if (raw === undefined) {
      loaded.values[spec.key] = undefined;
      continue;
    }
    const origin: Origin = given?.origin ?? { kind: 'default' };
    try {
      loaded.values[spec.key] = spec.parse(raw, origin);
    } catch (error) {
      throw new ConfigError(`invalid ${spec.env} (${originText(spec, origin)}) = ${JSON.stringify(clip(raw, VALUE_CHARS))}: ${spec.allowed}`, { cause: error });
    }
    if (given) loaded.given[spec.key] = given;
  }
  checkRelations(loaded);
  return guarded(loaded);
}

function guarded(loaded: Loaded): Config {
  const config: Record<string, unknown> = { ...loaded.values };
  for (const spec of SETTINGS) {
    if (loaded.selected.has(spec.key)) continue;
    Object.defineProperty(config, spec.key, {
      enumerable: false,
      get: () => { throw new WardenError(`internal error: setting ${spec.env} read by a command that does not declare it`); },
    });
  }
  return config as unknown as Config;
}

function uses(loaded: Loaded, ...keys: SettingKey[]): boolean {
  return keys.every((key) => loaded.selected.has(key));
}

/** Two durations that must keep an order; `why` reads on from "must be shorter than ...". */
interface Ordering {
  shorter: SettingKey;
  longer: SettingKey;
  why: string;
}

const ORDERINGS: readonly Ordering[] = [
  { shorter: 'bindGraceMs', longer: 'nodeLockExpireMs', why: ', or a bind in progress would count as expired' },
  { shorter: 'bindLockWaitMs', longer: 'bindTimeoutMs', why: ': the lock wait is part of the bind' },
  { shorter: 'bindTimeoutMs', longer: 'bindGraceMs', why: ', or the sweeper could free a lock while its bind still runs' },
  { shorter: 'certRenewBeforeMs', longer: 'certValidityMs', why: ', or every certificate would be renewed at once' },
  { shorter: 'nodeLockExpireMs', longer: 'nodeLockForceAfterMs', why: ': forcing applies to locks already past expiry' },
];

/**
 * Blames the side the user set: `HAMI_NODELOCK_EXPIRE=30s` alone is a too-short expiry, not a
 * too-long default grace. With both set, the shorter one is named and either may change.
 */
function orderingError(ordering: Ordering, loaded: Loaded): ConfigError {
  const blameLonger = loaded.given[ordering.longer] !== undefined && loaded.given[ordering.shorter] === undefined;
  const [subject, other, relation, fix] = blameLonger
    ? [ordering.longer, ordering.shorter, 'longer than', 'raise it']
    : [ordering.shorter, ordering.longer, 'shorter than', 'lower it'];
  const remedy = loaded.given[other] === undefined ? `${fix} or set ${specOf(other).env}` : 'change one of them';
  return new ConfigError(`${describe(subject, loaded)} must be ${relation} ${describe(other, loaded)}${ordering.why}; ${remedy}`);
}

function checkRelations(loaded: Loaded): void {
  checkExtenderExposure(loaded);
  checkListeners(loaded);
  for (const ordering of ORDERINGS) {
    if (!uses(loaded, ordering.shorter, ordering.longer)) continue;
    const shorter = loaded.values[ordering.shorter];
    const longer = loaded.values[ordering.longer];
    if (typeof shorter === 'number' && typeof longer === 'number' && shorter >= longer) throw orderingError(ordering, loaded);
  }
}

/**
 * The extender binds pods, so it is served unauthenticated only on loopback (kube-scheduler on the
 * same machine). Anywhere else it must demand kube-scheduler's client certificate, which is issued
 * from the CA in CERT_SECRET_NAME into a Secret of its own that never holds the CA key.
 */
function checkExtenderExposure(loaded: Loaded): void {
  if (!uses(loaded, 'extenderHost', 'extenderClientAuth', 'extenderClientSecretName', 'certSecretName')) return;
  const config = loaded.values as Partial<Config>;
  if (config.extenderClientAuth !== true && !isLoopbackHost(config.extenderHost ?? '')) {
    throw new ConfigError(`${describe('extenderHost', loaded)} is not a loopback address, so EXTENDER_CLIENT_AUTH=true is required: without client certificates anyone who reaches the extender could bind pods`);
  }
  if (config.extenderClientAuth !== true) return;
  if (config.certSecretName === undefined) {
    throw new ConfigError(`${describe('extenderClientAuth', loaded)} needs CERT_SECRET_NAME: kube-scheduler's client certificate is issued from the CA kept in that Secret`);
  }
  if (config.extenderClientSecretName === config.certSecretName) {
    const blameCa = loaded.given.extenderClientSecretName === undefined;
    const [subject, other] = blameCa ? ['certSecretName', 'extenderClientSecretName'] as const : ['extenderClientSecretName', 'certSecretName'] as const;
    throw new ConfigError(`${describe(subject, loaded)} must differ from ${describe(other, loaded)}: kube-scheduler mounts the client Secret and must never see the CA key`);
  }
}

const LISTENERS = [
  { name: 'webhook', host: 'webhookHost', port: 'webhookPort' },
  { name: 'extender', host: 'extenderHost', port: 'extenderPort' },
  { name: 'metrics', host: 'metricsHost', port: 'metricsPort' },
] as const satisfies readonly { name: string; host: SettingKey; port: SettingKey }[];

const WILDCARD_HOSTS = new Set(['', '0.0.0.0', '::', '::0']);
const LOCALHOST_ADDRESSES = new Set(['localhost', '127.0.0.1', '::1']);

/**
 * Whether two listen addresses can collide on one port. Conservative: a wildcard collides with
 * everything (on Linux `::` is dual-stack), `localhost` with what it resolves to.
 */
export function listenAddressesOverlap(a: string, b: string): boolean {
  const bare = (host: string) => (host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host).toLowerCase();
  const [x, y] = [bare(a), bare(b)];
  if (x === y || WILDCARD_HOSTS.has(x) || WILDCARD_HOSTS.has(y)) return true;
  return (x === 'localhost' && LOCALHOST_ADDRESSES.has(y)) || (y === 'localhost' && LOCALHOST_ADDRESSES.has(x));
}

/** Two listeners on one port would fail at bind time, after part of `serve` has started: refuse now. */
function checkListeners(loaded: Loaded): void {
  const config = loaded.values;
  const active = LISTENERS.filter((listener) => uses(loaded, listener.host, listener.port));
  for (const [index, first] of active.entries()) {
    for (const second of active.slice(index + 1)) {
      const [firstHost, secondHost] = [String(config[first.host]), String(config[second.host])];
      if (config[first.port] !== config[second.port] || !listenAddressesOverlap(firstHost, secondHost)) continue;
      const [subject, other] = loaded.given[second.port] === undefined && loaded.given[first.port] !== undefined ? [first, second] : [second, first];
      throw new ConfigError(
        `${describe(subject.port, loaded)} is also ${describe(other.port, loaded)}: the ${subject.name} and ${other.name} listeners cannot share a port `
        + `on overlapping addresses (${clip(String(config[subject.host]), VALUE_CHARS)} and ${clip(String(config[other.host]), VALUE_CHARS)}); choose another port`,
      );
    }
  }
}
