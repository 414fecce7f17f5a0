import { join } from 'node:path';
import { RealNodeError } from './real-node-error.js';

/** Every path one real node uses; all of them are inside its node folder (`<runDir>/<nodeName>`). */
export interface NodeLayout {
  nodeDir: string;
  /** Host folder bind-mounted on /var/lib/kubelet/device-plugins inside the node: kubelet.sock appears here. */
  devicePluginDir: string;
  sysctlDir: string;
  namespaceReadyFile: string;
  containerdConfig: string;
  containerdRoot: string;
  containerdState: string;
  containerdSocket: string;
  runcRoot: string;
  cniConfDir: string;
  kubeletRoot: string;
  kubeletCertDir: string;
  kubeletConfig: string;
  kubeletKubeconfig: string;
  clientCaFile: string;
  podLogsDir: string;
  volumePluginDir: string;
  logs: { namespace: string; containerd: string; kubelet: string };
}

// sun_path is 108 bytes with its terminating NUL; a longer socket path fails only at bind time,
// deep inside containerd or a device plugin, with a message that does not name the cause.
const MAX_SOCKET_PATH = 107;
const SOCKET_SUFFIX_ROOM = 'device-plugins/'.length + 'vgpu-warden-device-plugin.sock'.length;

export function nodeLayout(runDir: string, nodeName: string): NodeLayout {
  const nodeDir = join(runDir, nodeName);
  const layout: NodeLayout = {
    nodeDir,
    devicePluginDir: join(nodeDir, 'device-plugins'),
    sysctlDir: join(nodeDir, 'sysctl'),
    namespaceReadyFile: join(nodeDir, 'namespace-ready'),
    containerdConfig: join(nodeDir, 'containerd.toml'),
    containerdRoot: join(nodeDir, 'containerd', 'root'),
    containerdState: join(nodeDir, 'containerd', 'state'),
    containerdSocket: join(nodeDir, 'containerd.sock'),
    runcRoot: join(nodeDir, 'runc'),
    cniConfDir: join(nodeDir, 'cni'),
    kubeletRoot: join(nodeDir, 'kubelet'),
    kubeletCertDir: join(nodeDir, 'kubelet-pki'),
    kubeletConfig: join(nodeDir, 'kubelet-config.json'),
    kubeletKubeconfig: join(nodeDir, 'kubelet.kubeconfig'),
    clientCaFile: join(nodeDir, 'client-ca.crt'),
    podLogsDir: join(nodeDir, 'pod-logs'),
    volumePluginDir: join(nodeDir, 'volume-plugins'),
    logs: {
      namespace: join(nodeDir, 'namespace.log'),
      containerd: join(nodeDir, 'containerd.log'),
      kubelet: join(nodeDir, 'kubelet.log'),
    },
  };
  const longest = Math.max(`${layout.containerdSocket}.ttrpc`.length, nodeDir.length + 1 + SOCKET_SUFFIX_ROOM);
  if (longest > MAX_SOCKET_PATH) {
    throw new RealNodeError(
      `node folder ${nodeDir} is too long for unix sockets inside it (${longest} > ${MAX_SOCKET_PATH} bytes); ` +
        'use a shorter base folder or node name',
    );
  }
  return layout;
}

/** The cgroup (in every hierarchy) under which this node's kubelet puts its pods. */
export function cgroupRootFor(nodeName: string): string {
  return `/vgpu-warden-${nodeName}`;
}
