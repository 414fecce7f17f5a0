// Webhook benchmark over TLS with keep-alive: requests/s and p50/p99 latency for a GPU pod CREATE,
// a non-GPU pod CREATE and a DELETE of a bound GPU pod that holds no lock, answered from the state
// store as serve does and, for comparison, without the store (one node read on a real
// kube-apiserver per DELETE), with 1 and 64 concurrent clients. The baseline is a bare node:https
// server echoing the GPU pod's AdmissionReview, in the same process and run: the ratio is what the
// webhook costs on top of TLS + HTTP. GET /healthz is the webhook's own listener without admission work.
//   npm run bench:webhook -- [seconds per scenario, default 3]
import { spawn } from 'node:child_process';
import { Agent, request } from 'node:https';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { CoreV1Api } from '@kubernetes/client-node';
import { loadKubeConfig } from '../src/kube/client.js';
import { ControlPlane } from '../src/local/control-plane.js';
import { locateBinaries } from '../src/local/k8s-binaries.js';
import { ShutdownHooks } from '../src/local/shutdown-hooks.js';
import { simulatedGpuNode } from '../src/local/simulated-gpu-node.js';

const repoRoot = resolve(import.meta.dirname, '..');
const seconds = Number(process.argv[2] ?? 3);
if (!(seconds > 0 && seconds <= 60)) throw new Error(`seconds must be in (0, 60], got ${String(process.argv[2])}`);

function review(operation: string, object: unknown): string {
  const pod = object as { metadata: { name: string; namespace: string } };
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: '5f7a1c8e-0000-4000-8000-000000000001',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      name: pod.metadata.name,
      namespace: pod.metadata.namespace,
      operation,
      dryRun: false,
      userInfo: { username: 'system:serviceaccount:kube-system:job-controller' },
      ...(operation === 'DELETE' ? { oldObject: object, object: null } : { object, oldObject: null }),
    },
  });
}

function podObject(name: string, limits: Record<string, string> | undefined, nodeName?: string): unknown {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: 'bench',
      labels: { app: 'trainer', 'pod-template-hash': '5d8f7c9b6' },
      annotations: { 'kubectl.kubernetes.io/default-container': 'main' },
    },
    spec: {
      schedulerName: 'default-scheduler',
      ...(nodeName ? { nodeName } : {}),
      containers: [
        {
          name: 'main',
          image: 'nvcr.io/nvidia/pytorch:24.01-py3',
          command: ['python', 'train.py'],
          env: [{ name: 'EPOCHS', value: '10' }],
          ...(limits ? { resources: { limits } } : { resources: {} }),
        },
        { name: 'sidecar', image: 'busybox', resources: { limits: { cpu: '100m', memory: '64Mi' } } },
      ],
      tolerations: [
        { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
      ],
    },
  };
}

interface Result {
  count: number;
  rate: number;
  p50: number;
  p99: number;
}

async function load(
  port: number,
  caPem: string,
  concurrency: number,
  make: () => { method: string; path: string; body?: string },
): Promise<Result> {
  if (port <= 0) throw new Error('no port');
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency, ca: caPem });
  const latencies: number[] = [];
  const deadline = performance.now() + seconds * 1000;
  const once = () =>
    new Promise<void>((done, fail) => {
      const { method, path, body } = make();
      const started = performance.now();
      const req = request(
        {
          host: '127.0.0.1',
          port,
          method,
          path,
          agent,
          headers:
            body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode !== 200) {
              fail(new Error(`HTTP ${String(res.statusCode)} for ${method} ${path}`));
              return;
            }
            latencies.push(performance.now() - started);
            done();
          });
        },
      );
      req.on('error', fail);
      req.end(body);
    });
  const worker = async () => {
    while (performance.now() < deadline) await once();
  };
  // Open the connections before measuring: TLS handshakes are not what this measures.
  await Promise.all(Array.from({ length: concurrency }, () => once()));
  latencies.length = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return { count: latencies.length, rate: latencies.length / elapsed, p50: at(0.5), p99: at(0.99) };
}

const plane = await ControlPlane.start({
  binaries: locateBinaries({ repoRoot, env: process.env }),
  shutdownHooks: new ShutdownHooks(process),
});
const server = spawn(
  process.execPath,
  ['--import', 'tsx', resolve(repoRoot, 'bench', 'support', 'webhook-server-process.ts')],
  {
    env: { ...process.env, KUBECONFIG_PATH: plane.kubeconfigPath },
    stdio: ['ignore', 'pipe', 'inherit'],
  },
);
try {
  const core = loadKubeConfig(plane.kubeconfigPath).makeApiClient(CoreV1Api);
  await core.createNode({ body: simulatedGpuNode({ name: 'bench-node', gpus: 8 }) });
  const first = await new Promise<string>((done) => {
    createInterface({ input: server.stdout }).once('line', done);
  });
  const { port, withoutStorePort, echoPort, caPem } = JSON.parse(first) as {
    port: number;
    withoutStorePort: number;
    echoPort: number;
    caPem: string;
  };

  const gpuCreate = review('CREATE', podObject('trainer-0', { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '8000' }));
  const plainCreate = review('CREATE', podObject('web-0', undefined));
  const gpuDelete = review('DELETE', podObject('trainer-1', { 'nvidia.com/gpu': '1' }, 'bench-node'));
  const scenarios: [string, number, () => { method: string; path: string; body?: string }][] = [
    ['bare node:https echo (baseline)', echoPort, () => ({ method: 'POST', path: '/echo', body: gpuCreate })],
    ['GET /healthz', port, () => ({ method: 'GET', path: '/healthz' })],
    ['CREATE GPU pod', port, () => ({ method: 'POST', path: '/mutate', body: gpuCreate })],
    ['CREATE non-GPU pod', port, () => ({ method: 'POST', path: '/mutate', body: plainCreate })],
    ['DELETE GPU pod, no lock (store)', port, () => ({ method: 'POST', path: '/mutate', body: gpuDelete })],
    [
      'DELETE GPU pod, no lock (API read)',
      withoutStorePort,
      () => ({ method: 'POST', path: '/mutate', body: gpuDelete }),
    ],
  ];
  console.log(`webhook benchmark: TLS + keep-alive, ${seconds}s per scenario, server in its own process`);
  console.log('scenario                             clients  samples    req/s   p50 ms   p99 ms  req/s vs baseline');
  for (const concurrency of [1, 64]) {
    let baseline: number | undefined;
    for (const [name, target, make] of scenarios) {
      const result = await load(target, caPem, concurrency, make);
      baseline ??= result.rate;
      console.log(
        `${name.padEnd(36)} ${String(concurrency).padStart(7)} ${String(result.count).padStart(8)} ${result.rate.toFixed(0).padStart(8)} ${result.p50.toFixed(2).padStart(8)} ${result.p99.toFixed(2).padStart(8)} ${(result.rate / baseline).toFixed(2).padStart(10)}x`,
      );
    }
  }
} finally {
  server.kill('SIGTERM');
  await plane.stop();
}
