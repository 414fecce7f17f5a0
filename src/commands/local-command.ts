import { type Command } from './cli.js';
import type { LocalDeps } from './local-run.js';

/**
 * `vgpu-warden local`: the command's flags here, its run loaded lazily (local-run.ts), so that the
 * other commands, `serve` first, never load the control-plane runner or the node stand-ins.
 */
export function localCommand(deps: LocalDeps): Command {
  return {
    name: 'local',
    summary:
      'run a local cluster (etcd, kube-apiserver, kube-scheduler) with vgpu-warden and GPU nodes ' +
      '(real or simulated) until Ctrl-C',
    usesConfig: true,
    flags: {
      nodes: {
        type: 'string',
        description:
          '"real" (kubelet + containerd per node; needs root and the packages) or "simulated" (no kubelet); ' +
          'default: real where possible',
      },
      'gpu-nodes': { type: 'string', description: 'number of GPU nodes (default 2)' },
      'gpus-per-node': { type: 'string', description: 'mock GPUs on each node (default 4)' },
      'kubeconfig-out': { type: 'string', description: 'also copy the admin kubeconfig to this path' },
      'gpu-memory': { type: 'string', description: 'memory of each mock GPU in MiB (default 24576)' },
      'scheduler-name': { type: 'string', description: 'scheduler profile GPU pods are sent to (env SCHEDULER_NAME)' },
      demo: {
        type: 'string',
        description:
          'run a demo once ready: "seed" deletes a lock owner the moment its lock appears and binds a replacement',
      },
      // Without --demo it would run until Ctrl-C, the opposite of what was asked: refused by the CLI.
      'exit-after-demo': {
        type: 'boolean',
        description: 'stop everything and exit 0 once the demo has finished (headless runs, tests)',
        requires: 'demo',
      },
      'no-view': {
        type: 'boolean',
        description:
          'no live view (nodes, GPU use, lock states, pending GPU pods, newest events); plain progress lines',
      },
    },
    run: async (context) => (await import('./local-run.js')).runLocal(deps, context),
  };
}
