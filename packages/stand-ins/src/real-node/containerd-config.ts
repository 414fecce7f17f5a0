/** What one node's containerd needs to know; every path is inside the node folder except the CNI binaries. */
export interface ContainerdConfigParams {
  root: string;
  state: string;
  socket: string;
  runcRoot: string;
  cniBinDir: string;
  cniConfDir: string;
  sandboxImage: string;
}

// Plugins that would look for things this machine lacks (aufs, btrfs, devmapper, zfs), write
// outside the node folder (opt makes /opt/containerd) or are never used here (OTLP tracing). Left
// enabled they only log, or leave a folder on the host. The v1 runtime must stay: containerd 1.6's
// tasks service, and so CRI, will not load without it.
const DISABLED_PLUGINS = [
  'io.containerd.internal.v1.opt',
  'io.containerd.snapshotter.v1.aufs',
  'io.containerd.snapshotter.v1.btrfs',
  'io.containerd.snapshotter.v1.devmapper',
  'io.containerd.snapshotter.v1.zfs',
  'io.containerd.tracing.processor.v1.otlp',
  'io.containerd.internal.v1.tracing',
];

// TOML basic strings accept JSON's escapes, and these are plain paths and image names.
const str = (value: string) => JSON.stringify(value);

/** containerd 1.6 configuration (version 2) for a node of its own: CRI on, nothing shared with the host. */
export function renderContainerdConfig(params: ContainerdConfigParams): string {
  return `version = 2
root = ${str(params.root)}
state = ${str(params.state)}
disabled_plugins = [${DISABLED_PLUGINS.map(str).join(', ')}]

[grpc]
  address = ${str(params.socket)}

[ttrpc]
  address = ${str(`${params.socket}.ttrpc`)}

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ${str(params.sandboxImage)}
  # The VM lacks CAP_SYS_RESOURCE: runc cannot set the -998 kubelet asks for the sandbox
  # ("nsexec: failed to update /proc/self/oom_score_adj: Permission denied"), so clamp it.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_tcp_service = true
  enable_selinux = false
  disable_apparmor = true
  disable_hugetlb_controller = true
  tolerate_missing_hugetlb_controller = true
  # A non-hostNetwork sandbox would otherwise pin its netns under /var/run/netns on the host.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = ${str(params.cniBinDir)}
    conf_dir = ${str(params.cniConfDir)}
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # No systemd as PID 1: cgroups are plain folders that kubelet names (cgroupDriver: cgroupfs).
        SystemdCgroup = false
        Root = ${str(params.runcRoot)}
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = ""

[plugins."io.containerd.monitor.v1.cgroups"]
  no_prometheus = true
`;
}

/**
 * Loopback only: CRI reports NetworkReady (so the node goes Ready), and hostNetwork pods run. Any
 * other pod would need an address that is not loopback, which these nodes do not have.
 */
export const LOOPBACK_CNI_CONFLIST = { cniVersion: '1.0.0', name: 'lo', plugins: [{ type: 'loopback' }] };
