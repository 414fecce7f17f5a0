import { copyFileSync } from 'node:fs';
import { CoreV1Api } from '@kubernetes/client-node';
import type { Command } from '../cli.js';
import { UsageError } from '../cli.js';
import { loadKubeConfig } from '../kube/client.js';
import { ControlPlane } from '../local/control-plane.js';
import { locateBinaries } from '../local/k8s-binaries.js';
import { ShutdownHooks, type ShutdownTarget } from '../local/shutdown-hooks.js';
import { simulatedGpuNode } from '../local/simulated-gpu-node.js';

function positiveInteger(flag: string, value: string | boolean | string[] | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const text = String(value);
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > 1000) {
    throw new UsageError(`invalid --${flag}=${JSON.stringify(text)}: expected a whole number from 1 to 1000`);
  }
  return Number(text);
}

/**
 * `vgpu-warden local`: a real etcd, kube-apiserver and kube-scheduler on loopback with simulated GPU
 * nodes, running until Ctrl-C. The webhook, extender and sweeper join it as their issues land.
 */
export function localCommand(deps: { repoRoot: string; shutdownTarget: ShutdownTarget }): Command {
  return {
    name: 'local',
    summary: 'run a local control plane (etcd, kube-apiserver, kube-scheduler) with simulated GPU nodes until Ctrl-C',
    usesConfig: true,
    flags: {
      'gpu-nodes': { type: 'string', description: 'number of simulated GPU nodes (default 2)' },
      'gpus-per-node': { type: 'string', description: 'GPUs advertised by each simulated node (default 4)' },
      'kubeconfig-out': { type: 'string', description: 'also copy the admin kubeconfig to this path' },
      'scheduler-name': { type: 'string', description: 'scheduler profile to run besides default-scheduler (env SCHEDULER_NAME)' },
    },
    run: async ({ io, flags, config }) => {
      const nodeCount = positiveInteger('gpu-nodes', flags['gpu-nodes'], 2);
      const gpusPerNode = positiveInteger('gpus-per-node', flags['gpus-per-node'], 4);
      const { schedulerName } = config();
      const binaries = locateBinaries({ repoRoot: deps.repoRoot, env: io.env });
      const hooks = new ShutdownHooks(deps.shutdownTarget, 20_000, (line) => { io.stdout(`local: ${line}`); });
      const plane = await ControlPlane.start({
        binaries,
        shutdownHooks: hooks,
        progress: (line) => { io.stdout(`local: ${line}`); },
        scheduler: { profiles: [{ schedulerName: 'default-scheduler' }, { schedulerName }] },
      });
      const core = loadKubeConfig(plane.kubeconfigPath).makeApiClient(CoreV1Api);
      for (let index = 1; index <= nodeCount; index++) {
        await core.createNode({ body: simulatedGpuNode({ name: `gpu-node-${index}`, gpus: gpusPerNode }) });
      }
      io.stdout(`local: ${nodeCount} simulated GPU nodes with ${gpusPerNode} GPUs each`);
      let kubeconfigPath = plane.kubeconfigPath;
      const out = flags['kubeconfig-out'];
      if (typeof out === 'string') {
        copyFileSync(plane.kubeconfigPath, out);
        kubeconfigPath = out;
      }
      io.stdout(`local: ready; use it with: export KUBECONFIG=${kubeconfigPath}`);
      io.stdout('local: press Ctrl-C to stop and remove everything');
      // Runs until a signal (the shutdown hooks then stop everything and exit) or until a component
      // dies. The interval keeps Node's event loop alive: child processes are deliberately unref'd.
      const keepAlive = setInterval(() => undefined, 60_000);
      const crashed = await plane.firstUnexpectedExit();
      clearInterval(keepAlive);
      io.stderr(`local: ${crashed.name} exited unexpectedly; last log lines:\n${crashed.lastLogLines()}`);
      await plane.stop();
      return 1;
    },
  };
}
