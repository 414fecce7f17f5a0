import {
  boolean,
  cron,
  dnsLabel,
  dnsSubdomain,
  gpuCorePolicy,
  host,
  hostList,
  kubeconfigSetting,
  logLevel,
  nonEmpty,
  optionalDnsSubdomain,
  optionalPositiveDuration,
  placementPolicy,
  port,
  positiveDuration,
  wholeNumber,
} from './parsers.js';
import { GPU_CORE_POLICIES } from '../hami/wire.js';
import { InvalidValue, LOG_LEVELS, type Config, type SettingKey, type SettingSpec } from './setting-spec.js';

function setting<K extends keyof Config>(spec: SettingSpec<K>): SettingSpec<K> {
  return spec;
}

export const SETTINGS = [
  setting({
    key: 'kubeconfig',
    env: 'KUBECONFIG',
    flag: 'kubeconfig',
    defaultValue: undefined,
    description:
      'kubeconfig as kubectl reads it: KUBECONFIG may list files separated by ":" (merged, first wins), ' +
      '--kubeconfig names one file; unset or empty: ~/.kube/config, then the in-cluster service account',
    allowed: 'expected a file path, or for KUBECONFIG a ":"-separated list',
    parse: kubeconfigSetting,
  }),
  setting({
    key: 'schedulerName',
    env: 'SCHEDULER_NAME',
    flag: 'scheduler-name',
    defaultValue: 'hami-scheduler',
    description: 'scheduler profile name the webhook writes into spec.schedulerName of GPU pods',
    allowed: 'expected a DNS-1123 subdomain such as hami-scheduler',
    parse: dnsSubdomain,
  }),
  setting({
    key: 'logLevel',
    env: 'LOG_LEVEL',
    flag: 'log-level',
    defaultValue: 'info',
    description: 'log level of the JSON logs',
    allowed: `expected one of ${LOG_LEVELS.join(', ')}`,
    parse: logLevel,
  }),
  setting({
    key: 'webhookHost',
    env: 'WEBHOOK_HOST',
    flag: 'webhook-host',
    defaultValue: '0.0.0.0',
    description: 'address the admission webhook listener binds',
    allowed: 'expected a host name or IP address',
    parse: host,
  }),
  setting({
    key: 'webhookPort',
    env: 'WEBHOOK_PORT',
    flag: 'webhook-port',
    defaultValue: '9443',
    description: 'TLS port of the admission webhook',
    allowed: 'expected a port number from 1 to 65535',
    parse: port,
  }),
  setting({
    key: 'extenderHost',
    env: 'EXTENDER_HOST',
    flag: 'extender-host',
    defaultValue: '127.0.0.1',
    description:
      'address the scheduler extender listener binds; anything but loopback (127.0.0.0/8, ::1, localhost) needs ' +
      'EXTENDER_CLIENT_AUTH=true',
    allowed: 'expected a host name or IP address',
    parse: host,
  }),
  setting({
    key: 'extenderPort',
    env: 'EXTENDER_PORT',
    flag: 'extender-port',
    defaultValue: '9444',
    description: 'TLS port of the scheduler extender',
    allowed: 'expected a port number from 1 to 65535',
    parse: port,
  }),
  setting({
    key: 'extenderClientAuth',
    env: 'EXTENDER_CLIENT_AUTH',
    flag: 'extender-client-auth',
    defaultValue: 'false',
    description:
      "serve the extender only to kube-scheduler's client certificate (CN vgpu-warden-scheduler, clientAuth, issued " +
      "by vgpu-warden's CA into EXTENDER_CLIENT_SECRET_NAME); needs CERT_SECRET_NAME",
    allowed: 'expected true or false',
    parse: boolean,
  }),
  setting({
    key: 'extenderClientSecretName',
    env: 'EXTENDER_CLIENT_SECRET_NAME',
    flag: 'extender-client-secret-name',
    defaultValue: 'vgpu-warden-scheduler-client',
    description:
      "Secret in POD_NAMESPACE that vgpu-warden keeps kube-scheduler's client certificate in (tls.crt, tls.key, " +
      'ca.crt; no CA key), when EXTENDER_CLIENT_AUTH is on',
    allowed: 'expected a Secret name (DNS subdomain)',
    parse: dnsSubdomain,
  }),
  setting({
    key: 'metricsHost',
    env: 'METRICS_HOST',
    flag: 'metrics-host',
    defaultValue: '0.0.0.0',
    description: 'address the metrics listener binds',
    allowed: 'expected a host name or IP address',
    parse: host,
  }),
  setting({
    key: 'metricsPort',
    env: 'METRICS_PORT',
    flag: 'metrics-port',
    defaultValue: '9395',
    description: 'port of the Prometheus /metrics listener',
    allowed: 'expected a port number from 1 to 65535',
    parse: port,
  }),
  setting({
    key: 'legacyMetrics',
    env: 'LEGACY_METRICS',
    flag: 'legacy-metrics',
    defaultValue: 'true',
    description:
      "also export HAMi's legacy metric names (GPUDeviceMemoryLimit, vGPUMemoryAllocated, QuotaUsed and the rest; " +
      'HAMi: --legacy-metrics); false halves a scrape of the per-GPU and per-container families',
    allowed: 'expected true or false',
    parse: boolean,
  }),
  setting({
    key: 'certDir',
    env: 'CERT_DIR',
    flag: 'cert-dir',
    defaultValue: 'webhook-certs',
    description: 'directory holding the CA and serving certificate',
    allowed: 'expected a directory path',
    parse: nonEmpty,
  }),
  setting({
    key: 'bindGraceMs',
    env: 'BIND_GRACE',
    flag: 'bind-grace',
    defaultValue: '60s',
    description: 'how long a fresh lock counts as a bind in progress (keep it above the extender httpTimeout)',
    allowed: 'expected a positive duration such as 60s',
    parse: positiveDuration,
  }),
  setting({
    key: 'nodeLockExpireMs',
    env: 'NODELOCK_EXPIRE',
    aliases: ['HAMI_NODELOCK_EXPIRE'],
    flag: 'nodelock-expire',
    defaultValue: '5m',
    description: 'age after which a lock counts as expired (legacy locks are released, held ones reported stalled)',
    allowed: 'expected a positive duration such as 5m',
    parse: positiveDuration,
  }),
  setting({
    key: 'nodeLockForceAfterMs',
    env: 'NODELOCK_FORCE_AFTER',
    flag: 'nodelock-force-after',
    defaultValue: undefined,
    description:
      "opt-in: release even a stalled lock once it is this old, if the node's kubelet cannot still admit its owner " +
      'from its queue; unset never forces',
    allowed: 'expected a positive duration such as 15m, or empty for never',
    parse: optionalPositiveDuration,
  }),
  setting({
    key: 'sweepEnabled',
    env: 'SWEEP_ENABLED',
    flag: 'sweep-enabled',
    defaultValue: 'true',
    description: 'run the lock sweeper (on the elected leader only)',
    allowed: 'expected true or false',
    parse: boolean,
  }),
  setting({
    key: 'sweepSchedule',
    env: 'SWEEP_SCHEDULE',
    flag: 'sweep-schedule',
    defaultValue: '*/30 * * * * *',
    description: 'cron schedule of the lock sweeper, 5 fields or 6 with leading seconds',
    allowed: 'expected a cron expression with 5 or 6 fields such as "*/30 * * * * *"',
    parse: cron,
  }),
  setting({
    key: 'overwriteDefaultScheduler',
    env: 'OVERWRITE_DEFAULT_SCHEDULER',
    flag: 'overwrite-default-scheduler',
    defaultValue: 'true',
    description:
      'also take over GPU pods that name default-scheduler (the apiserver default); pods naming any other scheduler ' +
      'are left alone',
    allowed: 'expected true or false',
    parse: boolean,
  }),
  setting({
    key: 'defaultGpuCount',
    env: 'DEFAULT_GPU_NUM',
    flag: 'default-gpu-num',
    defaultValue: '1',
    description:
      'nvidia.com/gpu the webhook sets when a container asks for GPU memory or cores without a count; 0 turns that off',
    allowed: 'expected a whole number from 0 to 64',
    parse: wholeNumber,
  }),
  setting({
    key: 'overwriteEnv',
    env: 'OVERWRITE_ENV',
    flag: 'overwrite-env',
    defaultValue: 'false',
    description:
      'HAMi chart value scheduler.overwriteEnv: the webhook sets NVIDIA_VISIBLE_DEVICES=none on containers that ' +
      "request no GPU (GPU pods' other containers; non-GPU pods only if the webhook is sent them)",
    allowed: 'expected true or false',
    parse: boolean,
  }),
  setting({
    key: 'runtimeClassName',
    env: 'RUNTIME_CLASS_NAME',
    flag: 'runtime-class-name',
    defaultValue: undefined,
    description:
      'HAMi chart value devicePlugin.runtimeClassName: the webhook sets spec.runtimeClassName of GPU pods that name ' +
      'none; unset or empty sets nothing',
    allowed: 'expected a RuntimeClass name (DNS subdomain) such as nvidia, or empty',
    parse: optionalDnsSubdomain,
  }),
  setting({
    key: 'gpuCorePolicy',
    env: 'GPU_CORE_POLICY',
    flag: 'gpu-core-policy',
    defaultValue: 'default',
    description:
      'HAMi chart value devices.nvidia.gpuCorePolicy: force or disable is written as GPU_CORE_UTILIZATION_POLICY ' +
      'into GPU containers for HAMi-core; default writes nothing',
    allowed: `expected one of ${GPU_CORE_POLICIES.join(', ')}`,
    parse: gpuCorePolicy,
  }),
  setting({
    key: 'webhookDeleteTimeoutMs',
    env: 'WEBHOOK_DELETE_TIMEOUT',
    flag: 'webhook-delete-timeout',
    defaultValue: '3s',
    description:
      'upper bound for releasing a lock on pod DELETE; the delete is allowed either way (keep it under timeoutSeconds)',
    allowed: 'expected a positive duration such as 3s',
    parse: positiveDuration,
  }),
  setting({
    key: 'serviceName',
    env: 'SERVICE_NAME',
    flag: 'service-name',
    defaultValue: 'vgpu-warden',
    description: 'Service in front of the webhook; its DNS names go into the serving certificate',
    allowed: 'expected a DNS label such as vgpu-warden',
    parse: dnsLabel,
  }),
  setting({
    key: 'namespace',
    env: 'POD_NAMESPACE',
    flag: 'namespace',
    defaultValue: 'vgpu-warden',
    description: 'namespace vgpu-warden runs in (Service DNS names, the certificate Secret, the leader Lease)',
    allowed: 'expected a namespace name (DNS label)',
    parse: dnsLabel,
  }),
  setting({
    key: 'certHosts',
    env: 'CERT_HOSTS',
    flag: 'cert-hosts',
    defaultValue: '',
    description: 'extra DNS names and IPs for the serving certificate, comma-separated',
    allowed: 'expected comma-separated host names or IP addresses',
    parse: hostList,
  }),
  setting({
    key: 'certSecretName',
    env: 'CERT_SECRET_NAME',
    flag: 'cert-secret-name',
    defaultValue: undefined,
    description: 'keep the CA and serving certificate in this Secret (shared by all replicas) instead of CERT_DIR',
    allowed: 'expected a Secret name (DNS subdomain), or empty for the cert directory',
    parse: optionalDnsSubdomain,
  }),
  setting({
    key: 'webhookConfigName',
    env: 'WEBHOOK_CONFIG_NAME',
    flag: 'webhook-config-name',
    defaultValue: undefined,
    description: 'MutatingWebhookConfiguration whose caBundle vgpu-warden keeps current; unset leaves caBundle alone',
    allowed: 'expected an object name (DNS subdomain), or empty',
    parse: optionalDnsSubdomain,
  }),
  setting({
    key: 'certValidityMs',
    env: 'CERT_VALIDITY',
    flag: 'cert-validity',
    defaultValue: '8760h',
    description: 'lifetime of a newly issued serving certificate (the CA gets ten times as long)',
    allowed: 'expected a positive duration such as 8760h',
    parse: positiveDuration,
  }),
  setting({
    key: 'certRenewBeforeMs',
    env: 'CERT_RENEW_BEFORE',
    flag: 'cert-renew-before',
    defaultValue: '720h',
    description: 'renew a certificate this long before it expires',
    allowed: 'expected a positive duration such as 720h',
    parse: positiveDuration,
  }),
  setting({
    key: 'nodeSchedulerPolicy',
    env: 'NODE_SCHEDULER_POLICY',
    flag: 'node-scheduler-policy',
    defaultValue: 'binpack',
    description:
      "node policy of the extender's prioritize: binpack fills busy nodes first, spread empty ones (pod annotation " +
      'hami.io/node-scheduler-policy overrides)',
    allowed: 'expected binpack or spread',
    parse: placementPolicy,
  }),
  setting({
    key: 'gpuSchedulerPolicy',
    env: 'GPU_SCHEDULER_POLICY',
    flag: 'gpu-scheduler-policy',
    defaultValue: 'spread',
    description:
      'GPU policy inside a node: binpack shares busy GPUs first, spread uses idle ones (pod annotation ' +
      'hami.io/gpu-scheduler-policy overrides)',
    allowed: 'expected binpack or spread',
    parse: placementPolicy,
  }),
  setting({
    key: 'bindLockWaitMs',
    env: 'BIND_LOCK_WAIT',
    flag: 'bind-lock-wait',
    defaultValue: '15s',
    description:
      "how long a bind waits for a busy node's lock before failing (kube-scheduler then retries); must be below " +
      'BIND_TIMEOUT',
    allowed: 'expected a positive duration below 30s such as 15s',
    parse: (raw) => {
      const value = positiveDuration(raw);
      if (value >= 30_000) throw new InvalidValue();
      return value;
    },
  }),
  setting({
    key: 'successEvents',
    env: 'SUCCESS_EVENTS',
    flag: 'success-events',
    defaultValue: 'false',
    description:
      "also record HAMi's Normal Events FilteringSucceed and BindingSucceed on every GPU pod (kube-scheduler's " +
      "Scheduled says the same); each is one more apiserver write per pod, about 10 % of a burst's throughput. " +
      'Failures (FilteringFailed, BindingFailed) are recorded either way',
    allowed: 'expected true or false',
    parse: boolean,
  }),
  setting({
    key: 'bindTimeoutMs',
    env: 'BIND_TIMEOUT',
    flag: 'bind-timeout',
    defaultValue: '25s',
    description:
      'one deadline for a whole bind, lock wait, API calls and clean-up included; below the extender httpTimeout ' +
      '(30s) and BIND_GRACE',
    allowed: 'expected a duration from 100ms to below 30s such as 25s',
    parse: (raw) => {
      const value = positiveDuration(raw);
      if (value < 100 || value >= 30_000) throw new InvalidValue();
      return value;
    },
  }),
  setting({
    key: 'stateStaleAfterMs',
    env: 'STATE_STALE_AFTER',
    flag: 'state-stale-after',
    defaultValue: '30s',
    description:
      'a node or pod watch down this long makes the state store stale: filter answers with an error and /readyz ' +
      'fails until it recovers',
    allowed: 'expected a positive duration such as 30s',
    parse: positiveDuration,
  }),
  setting({
    key: 'leaderElection',
    env: 'LEADER_ELECTION',
    flag: 'leader-election',
    defaultValue: 'true',
    description:
      'elect one replica through a Lease to run the sweeper (lease 15s, renew 10s, retry 2s); false makes this ' +
      'replica sweep alone',
    allowed: 'expected true or false',
    parse: boolean,
  }),
  setting({
    key: 'leaseName',
    env: 'LEASE_NAME',
    flag: 'lease-name',
    defaultValue: 'vgpu-warden',
    description: 'coordination.k8s.io Lease used for leader election, in POD_NAMESPACE',
    allowed: 'expected a Lease name (DNS subdomain)',
    parse: dnsSubdomain,
  }),
  setting({
    key: 'podName',
    env: 'POD_NAME',
    flag: 'pod-name',
    defaultValue: undefined,
    description:
      "this replica's name (downward API; unset: the host name); the leader identity is it plus a random suffix",
    allowed: 'expected a non-empty name',
    parse: nonEmpty,
  }),
  setting({
    key: 'podWatchEnabled',
    env: 'POD_WATCH_ENABLED',
    flag: 'pod-watch-enabled',
    defaultValue: 'true',
    description:
      "release a pod's node lock when the pod watch shows it deleted or being deleted (works while the webhook is " +
      'down)',
    allowed: 'expected true or false',
    parse: boolean,
  }),
] as const satisfies readonly SettingSpec[];

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
  webhook: [
    'webhookHost',
    'webhookPort',
    'schedulerName',
    'overwriteDefaultScheduler',
    'defaultGpuCount',
    'overwriteEnv',
    'runtimeClassName',
    'gpuCorePolicy',
    'webhookDeleteTimeoutMs',
  ],
  extender: [
    'extenderHost',
    'extenderPort',
    'extenderClientAuth',
    'extenderClientSecretName',
    'schedulerName',
    'nodeSchedulerPolicy',
    'gpuSchedulerPolicy',
    'bindLockWaitMs',
    'bindTimeoutMs',
    'stateStaleAfterMs',
    'successEvents',
  ],
  metrics: ['metricsHost', 'metricsPort', 'legacyMetrics'],
  sweeper: ['sweepEnabled', 'sweepSchedule', 'leaderElection', 'leaseName', 'podName', 'podWatchEnabled', 'namespace'],
} as const satisfies Record<string, readonly SettingKey[]>;

export type SettingGroup = keyof typeof SETTING_GROUPS;

/** The settings of some groups, each once. */
export function settingsOf(groups: readonly SettingGroup[]): SettingKey[] {
  return [...new Set(groups.flatMap((group) => SETTING_GROUPS[group]))];
}
