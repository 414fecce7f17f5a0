import { accessSync, constants } from 'node:fs';
import { MissingToolError } from './real-node-error.js';

/** The programs a real node runs. kubelet comes from tools/k8s/build.sh, the rest from Debian packages. */
export interface RealNodeTools {
  kubelet: string;
  containerd: string;
  ctr: string;
  unshare: string;
  nsenter: string;
  /** Static, so it runs alone in the test image. */
  busybox: string;
  tar: string;
  /** containernetworking-plugins (the loopback plugin). */
  cniBinDir: string;
}

const DEBIAN_TOOLS: Omit<RealNodeTools, 'kubelet'> = {
  containerd: '/usr/bin/containerd',
  ctr: '/usr/bin/ctr',
  unshare: '/usr/bin/unshare',
  nsenter: '/usr/bin/nsenter',
  busybox: '/bin/busybox',
  tar: '/usr/bin/tar',
  cniBinDir: '/usr/lib/cni',
};

// containerd finds its shim and the shim finds runc on PATH; they are checked here so a missing
// package fails at once with its name, not as a sandbox error minutes later.
const ON_PATH = ['/usr/bin/containerd-shim-runc-v2', '/usr/sbin/runc'];

/** The tools at their Debian paths (overridable), checked to be executable. */
export function locateRealNodeTools(
  binaries: { readonly kubelet?: string | undefined },
  overrides: Partial<RealNodeTools> = {},
): RealNodeTools {
  const kubelet = overrides.kubelet ?? binaries.kubelet;
  if (kubelet === undefined) throw new MissingToolError('kubelet is not built; run "bash tools/k8s/build.sh"');
  const tools: RealNodeTools = { ...DEBIAN_TOOLS, kubelet, ...overrides };
  const programs = [
    tools.kubelet,
    tools.containerd,
    tools.ctr,
    tools.unshare,
    tools.nsenter,
    tools.busybox,
    tools.tar,
    `${tools.cniBinDir}/loopback`,
    ...ON_PATH,
  ];
  for (const program of programs) {
    try {
      accessSync(program, constants.X_OK);
    } catch (error) {
      throw new MissingToolError(
        `${program} is missing; real nodes need kubelet (tools/k8s/build.sh) and the Debian packages ` +
          'containerd, runc, containernetworking-plugins, busybox-static, util-linux',
        { cause: error },
      );
    }
  }
  return tools;
}
