import { WardenError } from '../base/errors.js';

/** Which nodes local mode runs: real kubelets with containerd, or simulated nodes (no kubelet). */
export type NodeMode = 'real' | 'simulated';

export interface NodeModeChoice {
  mode: NodeMode;
  /** One line for the user: which, and why. */
  why: string;
}

export class NodeModeError extends WardenError {}

/** The --nodes value, or undefined when it names no mode. Pure. */
export function parseNodeMode(value: string): NodeMode | undefined {
  return value === 'real' || value === 'simulated' ? value : undefined;
}

/**
 * Real nodes where the machine allows them (root, for namespaces, mounts and cgroups; kubelet built
 * and the Debian packages present), else simulated ones; `asked` (--nodes) decides when given, and
 * asking for real nodes where they cannot run is an error that says what is missing. Pure.
 */
export function chooseNodeMode(input: {
  asked: NodeMode | undefined;
  isRoot: boolean;
  toolsProblem: string | undefined;
}): NodeModeChoice {
  const { asked, isRoot, toolsProblem } = input;
  const obstacle = !isRoot ? 'real nodes need root (mount and pid namespaces, cgroups, kubelet)' : toolsProblem;
  if (asked === 'simulated')
    return {
      mode: 'simulated',
      why: 'simulated nodes, as --nodes=simulated asks (no kubelet: pods are allocated, never Running)',
    };
  if (asked === 'real') {
    if (obstacle !== undefined) throw new NodeModeError(`--nodes=real cannot run here: ${obstacle}`);
    return {
      mode: 'real',
      why: 'real nodes, as --nodes=real asks (kubelet and containerd each; the HAMi plugin stand-in over gRPC)',
    };
  }
  return obstacle === undefined
    ? {
        mode: 'real',
        why:
          'real nodes: root, kubelet and containerd are here ' +
          '(kubelet and containerd each; --nodes=simulated for simulated ones)',
      }
    : {
        mode: 'simulated',
        why: `simulated nodes (no kubelet: pods are allocated, never Running), because ${obstacle}`,
      };
}
