import { RealNodeError } from './real-node-error.js';

export interface KubeletConfigParams {
  port: number;
  healthzPort: number;
  cgroupRoot: string;
  containerdSocket: string;
  podLogsDir: string;
  volumePluginDir: string;
  clientCaFile: string;
}

/**
 * A KubeletConfiguration (kubelet.config.k8s.io/v1beta1) for a kubelet that shares the machine
 * with the host and with other kubelets: loopback ports of its own, cgroups under a root of its
 * own, nothing it may change on the host (iptables, kernel settings), and status updates every
 * second so tests see capacity and readiness quickly.
 */
export function buildKubeletConfiguration(params: KubeletConfigParams): Record<string, unknown> {
  const endpoint = `unix://${params.containerdSocket}`;
  return {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    address: '127.0.0.1',
    port: params.port,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: params.healthzPort,
    // No systemd as PID 1 and cgroup v1 hierarchies: plain cgroupfs folders under our own root.
    cgroupDriver: 'cgroupfs',
    cgroupRoot: params.cgroupRoot,
    cgroupsPerQOS: true,
    failCgroupV1: false,
    failSwapOn: false,
    containerRuntimeEndpoint: endpoint,
    imageServiceEndpoint: endpoint,
    staticPodPath: '',
    podLogsDir: params.podLogsDir,
    // Else kubelet creates /usr/libexec/kubernetes/kubelet-plugins on the host.
    volumePluginDir: params.volumePluginDir,
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: false },
      // kube-apiserver proxies logs/exec with a client certificate from the control plane's CA.
      x509: { clientCAFile: params.clientCaFile },
    },
    authorization: { mode: 'AlwaysAllow' },
    makeIPTablesUtilChains: false,
    // kubelet checks its kernel settings; the node's mount namespace shows it the values it wants.
    protectKernelDefaults: false,
    // A test machine's disk and memory are shared with everything else: evict only when nearly full.
    evictionHard: {
      'nodefs.available': '1%',
      'nodefs.inodesFree': '1%',
      'imagefs.available': '1%',
      'memory.available': '10Mi',
    },
    evictionPressureTransitionPeriod: '5s',
    // The imported images cannot be pulled again (there is no registry): never collect them.
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    nodeStatusUpdateFrequency: '1s',
    nodeStatusReportFrequency: '1s',
    nodeLeaseDurationSeconds: 40,
    syncFrequency: '10s',
    fileCheckFrequency: '20s',
    serializeImagePulls: false,
    rotateCertificates: false,
    serverTLSBootstrap: false,
    registerNode: true,
    // Graceful node shutdown needs systemd's inhibitor locks over D-Bus.
    shutdownGracePeriod: '0s',
    shutdownGracePeriodCriticalPods: '0s',
    containerLogMaxSize: '1Mi',
    containerLogMaxFiles: 2,
    kubeAPIQPS: 50,
    kubeAPIBurst: 100,
  };
}

export interface KubeletArgsParams {
  configFile: string;
  kubeconfig: string;
  rootDir: string;
  certDir: string;
  nodeName: string;
  labels?: Readonly<Record<string, string>>;
  verbosity?: number;
}

/** The command line; what the configuration file cannot say. */
export function kubeletArgs(params: KubeletArgsParams): string[] {
  const args = [
    `--config=${params.configFile}`,
    `--kubeconfig=${params.kubeconfig}`,
    `--root-dir=${params.rootDir}`,
    // No tlsCertFile: kubelet writes a self-signed serving certificate here, which
    // kube-apiserver accepts (it has no --kubelet-certificate-authority).
    `--cert-dir=${params.certDir}`,
    `--hostname-override=${params.nodeName}`,
    // kubelet refuses 127.0.0.1 as its node IP; as an "external cloud" node it sets no addresses
    // and waits for a cloud provider, which the real-node fixture plays (InternalIP 127.0.0.1).
    '--cloud-provider=external',
    `--v=${params.verbosity ?? 2}`,
  ];
  const labels = renderNodeLabels(params.labels ?? {});
  if (labels !== '') args.push(`--node-labels=${labels}`);
  return args;
}

/** `key=value,key=value` for --node-labels; a comma or `=` inside would silently split a label. */
export function renderNodeLabels(labels: Readonly<Record<string, string>>): string {
  return Object.entries(labels)
    .map(([key, value]) => {
      if (key === '' || /[,=\s]/.test(key) || /[,=\s]/.test(value)) {
        throw new RealNodeError(
          `node label ${JSON.stringify(key)}=${JSON.stringify(value)} cannot be passed to kubelet --node-labels`,
        );
      }
      return `${key}=${value}`;
    })
    .join(',');
}
