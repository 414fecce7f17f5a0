import { execFileSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import { WardenError } from '../base/errors.js';

export interface ControlPlaneBinaries {
  etcd: string;
  kubeApiserver: string;
  kubeScheduler: string;
  /** Optional: only tests that need Deployments, ReplicaSets or garbage collection start it. */
  kubeControllerManager?: string;
  /** Optional: only the real-node fixture (src/local/real-node) runs it. */
  kubelet?: string;
}

export class MissingBinariesError extends WardenError {}

export const BIN_DIR_ENV = 'VGPU_WARDEN_K8S_BIN_DIR';

/**
 * Finds etcd, kube-apiserver and kube-scheduler: in $VGPU_WARDEN_K8S_BIN_DIR when set, else in the
 * cache directory that tools/k8s/build.sh builds into for the pinned versions.
 */
export function locateBinaries(options: {
  repoRoot: string;
  env: Readonly<Record<string, string | undefined>>;
}): ControlPlaneBinaries {
  const buildScript = join(options.repoRoot, 'tools', 'k8s', 'build.sh');
  let binDir = options.env[BIN_DIR_ENV];
  if (binDir === undefined || binDir === '') {
    try {
      binDir = execFileSync('bash', [buildScript, '--print-bin-dir'], {
        encoding: 'utf8',
        env: { ...process.env, ...options.env },
      }).trim();
    } catch (error) {
      throw new MissingBinariesError(`could not ask ${buildScript} where the control-plane binaries are`, {
        cause: error,
      });
    }
  }
  const binaries = {
    etcd: join(binDir, 'etcd'),
    kubeApiserver: join(binDir, 'kube-apiserver'),
    kubeScheduler: join(binDir, 'kube-scheduler'),
  };
  const optional = { kubeControllerManager: join(binDir, 'kube-controller-manager'), kubelet: join(binDir, 'kubelet') };
  for (const path of Object.values(binaries)) {
    try {
      accessSync(path, constants.X_OK);
    } catch (error) {
      throw new MissingBinariesError(
        `control-plane binary ${path} is missing; build it with "bash tools/k8s/build.sh" (or set ${BIN_DIR_ENV})`,
        { cause: error },
      );
    }
  }
  const found: ControlPlaneBinaries = { ...binaries };
  for (const [key, path] of Object.entries(optional) as [keyof typeof optional, string][]) {
    if (isExecutable(path)) found[key] = path;
  }
  return found;
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The Kubernetes version these binaries are (`v1.37.2`), as kube-apiserver reports it: the version
 * under test is whatever was built and located, whether the main one or a compatibility one.
 */
export function kubernetesVersionOf(binaries: Pick<ControlPlaneBinaries, 'kubeApiserver'>): string {
  let printed: string;
  try {
    printed = execFileSync(binaries.kubeApiserver, ['--version'], { encoding: 'utf8' });
  } catch (error) {
    throw new MissingBinariesError(`could not run ${binaries.kubeApiserver} --version`, { cause: error });
  }
  const version = /\bv1\.\d+\.\d+\b/.exec(printed)?.[0];
  if (version === undefined)
    throw new MissingBinariesError(
      `${binaries.kubeApiserver} --version printed no Kubernetes version: ${printed.slice(0, 80)}`,
    );
  return version;
}
