import { findFreePorts } from './free-port.js';
import { ManagedProcess, type ManagedProcessOptions } from './managed-process.js';
import { PortTakenError, retryWhilePortTaken, waitUntilReady, type ReadinessProbe } from './wait-until-ready.js';

/**
 * The process runner of the control plane, lent to the real nodes of the stand-ins package (its
 * ProcessHost port): their kubelet and containerd run under the same guard as etcd and
 * kube-apiserver, and the package shares no code with src/.
 */
export const hostProcesses = {
  /** A ManagedProcess with its readiness wait, as real nodes start their programs. */
  start(options: ManagedProcessOptions) {
    const child = ManagedProcess.start(options);
    return {
      name: child.name,
      pid: child.pid,
      get hasExited() {
        return child.hasExited;
      },
      exited: child.exited,
      killNow: () => {
        child.killNow();
      },
      lastLogLines: () => child.lastLogLines(),
      untilReady: (probe: ReadinessProbe) => waitUntilReady(child, probe),
    };
  },
  freePorts: (count: number): Promise<number[]> => findFreePorts(count),
  retryWhilePortTaken,
  portTaken: (error: unknown): boolean => error instanceof PortTakenError,
};
