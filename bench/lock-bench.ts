// Node-lock benchmark: acquire+release cycles per second against a real local kube-apiserver.
// Scenarios (each worker is its own OS process running NodeLocks): one process on one node (the
// baseline), two processes sharing one node, two processes on separate nodes. Ratios are against
// the baseline measured in this same run.
//   npm run bench:lock -- [cycles per worker, default 300]
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { loadKubeConfig } from '../src/kube/client.js';
import { ControlPlane } from '../src/local/control-plane.js';
import { locateBinaries } from '../src/local/k8s-binaries.js';
import { ShutdownHooks } from '../src/local/shutdown-hooks.js';
import { simulatedGpuNode } from '../src/local/simulated-gpu-node.js';

const repoRoot = resolve(import.meta.dirname, '..');
const worker = resolve(repoRoot, 'test', 'support', 'fixtures', 'lock-worker.ts');
const cycles = Number(process.argv[2] ?? 300);
if (!Number.isInteger(cycles) || cycles < 1)
  throw new Error(`cycles must be a positive integer, got ${String(process.argv[2])}`);

interface Report {
  sections: unknown[];
  contentions: number;
  elapsedMs: number;
}

function runWorker(input: Record<string, unknown>): Promise<Report> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ['--import', 'tsx', worker], {
      env: { ...process.env, LOCK_WORKER: JSON.stringify(input) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.once('exit', (code) => {
      if (code === 0) done(JSON.parse(stdout) as Report);
      else fail(new Error(`worker exited ${String(code)}`));
    });
  });
}

const plane = await ControlPlane.start({
  binaries: locateBinaries({ repoRoot, env: process.env }),
  shutdownHooks: new ShutdownHooks(process),
});
try {
  const core = loadKubeConfig(plane.kubeconfigPath).makeApiClient(CoreV1Api);
  const namespace = `bench-${randomBytes(3).toString('hex')}`;
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  const nodes = ['bench-node-1', 'bench-node-2'];
  for (const name of nodes) await core.createNode({ body: simulatedGpuNode({ name, gpus: 4 }) });
  for (const name of ['worker-a', 'worker-b']) {
    await core.createNamespacedPod({
      namespace,
      body: { metadata: { name }, spec: { schedulerName: 'none', containers: [{ name: 'c', image: 'x' }] } },
    });
  }
  const base = { kubeconfig: plane.kubeconfigPath, namespace, cycles, holdMs: 0 };

  // Warm the apiserver's caches and our module loading once, unmeasured.
  await runWorker({ ...base, pod: 'worker-a', nodes: [nodes[0]], cycles: 30 });

  const scenarios: { name: string; workers: Record<string, unknown>[] }[] = [
    { name: '1 process, 1 node (baseline)', workers: [{ ...base, pod: 'worker-a', nodes: [nodes[0]] }] },
    {
      name: '2 processes, same node',
      workers: [
        { ...base, pod: 'worker-a', nodes: [nodes[0]] },
        { ...base, pod: 'worker-b', nodes: [nodes[0]] },
      ],
    },
    {
      name: '2 processes, separate nodes',
      workers: [
        { ...base, pod: 'worker-a', nodes: [nodes[0]] },
        { ...base, pod: 'worker-b', nodes: [nodes[1]] },
      ],
    },
  ];
  let baseline: number | undefined;
  console.log(`node-lock benchmark: ${cycles} acquire+release cycles per worker, real kube-apiserver ${plane.server}`);
  console.log('scenario                          cycles/s   ratio   contentions');
  for (const scenario of scenarios) {
    const reports = await Promise.all(scenario.workers.map(runWorker));
    const total = reports.reduce((sum, report) => sum + report.sections.length, 0);
    const seconds = Math.max(...reports.map((report) => report.elapsedMs)) / 1000;
    const rate = total / seconds;
    baseline ??= rate;
    const contentions = reports.reduce((sum, report) => sum + report.contentions, 0);
    console.log(
      `${scenario.name.padEnd(32)} ${rate.toFixed(1).padStart(9)} ${(rate / baseline).toFixed(2).padStart(7)}x ${String(contentions).padStart(12)}`,
    );
  }
} finally {
  await plane.stop();
}
