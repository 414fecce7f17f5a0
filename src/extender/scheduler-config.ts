/**
 * The one KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) that runs kube-scheduler next
 * to vgpu-warden: a profile with our scheduler name and one extender for filter, prioritize and
 * bind over TLS on loopback. Used by the e2e tests, local mode and manifests/ (a unit test keeps the
 * manifest equal to what this builds).
 */
export const GPU_MANAGED_RESOURCES = ['nvidia.com/gpu', 'nvidia.com/gpumem', 'nvidia.com/gpumem-percentage', 'nvidia.com/gpucores', 'nvidia.com/priority'] as const;

export interface SchedulerConfigOptions {
  schedulerName: string;
  /** e.g. https://127.0.0.1:9444; the verbs are appended. */
  extenderUrl: string;
  /** CA that signed the extender's certificate; without it the scheduler skips verification (loopback only). */
  caPem?: string;
  /** Also keep a default-scheduler profile (tests and local mode schedule plain pods too). */
  includeDefaultProfile?: boolean;
  leaderElection?: { leaderElect: boolean; resourceNamespace?: string; resourceName?: string };
  kubeconfigPath?: string;
}

export function kubeSchedulerConfiguration(options: SchedulerConfigOptions): Record<string, unknown> {
  return {
    apiVersion: 'kubescheduler.config.k8s.io/v1',
    kind: 'KubeSchedulerConfiguration',
    ...(options.kubeconfigPath === undefined ? {} : { clientConnection: { kubeconfig: options.kubeconfigPath } }),
    leaderElection: options.leaderElection ?? { leaderElect: false },
    profiles: [
      ...(options.includeDefaultProfile === true ? [{ schedulerName: 'default-scheduler' }] : []),
      { schedulerName: options.schedulerName },
    ],
    extenders: [{
      urlPrefix: options.extenderUrl,
      filterVerb: 'filter',
      prioritizeVerb: 'prioritize',
      bindVerb: 'bind',
      weight: 1,
      enableHTTPS: true,
      tlsConfig: options.caPem === undefined ? { insecure: true } : { caData: Buffer.from(options.caPem).toString('base64') },
      nodeCacheCapable: true,
      // The extender's bind waits for a busy node's lock for up to BIND_LOCK_WAIT (25 s): stay above it.
      httpTimeout: '30s',
      ignorable: false,
      managedResources: GPU_MANAGED_RESOURCES.map((name) => ({ name, ignoredByScheduler: true })),
    }],
  };
}
