// Scale benchmark: `serve` (its own process) against a real local kube-apiserver holding N nodes x
// 8 GPUs and M bound GPU pods, created before serve starts: start -> ready, resident memory after
// the first sync and after the 6020 requests below (and its peak), and over HTTPS with keep-alive, 1000
// samples each, p50/p99 of
// - /filter of a non-GPU pod (the pass-through: the baseline, same connection, same run, interleaved),
// - /filter of a GPU pod and the /prioritize that follows it for the same pod, sent the names filter
//   passed (as kube-scheduler does: at most 100 when more fit),
// over all N names in each call, and over the 10 % window kube-scheduler passes at 5000 nodes
// (percentageOfNodesToScore), its start rotating from call to call as kube-scheduler's does.
// serve runs with the Node options manifests/deployment.yaml gives it (BENCH_SERVE_NODE_OPTIONS
// overrides them; empty for V8's own heap sizes).
//   npm run bench:scale -- [sizes, default 1000x5000,5000x40000]
import { Agent } from 'node:https';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { encodeAllocation } from '../src/devices/allocation-codec.js';
import { ALLOCATED_ANNOTATION, VGPU_NODE_ANNOTATION } from '../src/hami/wire.js';
import { loadKubeConfig } from '../src/kube/client.js';
import { ControlPlane } from '../src/local/control-plane.js';
import { findFreePorts } from '../src/local/free-port.js';
import { locateBinaries } from '../src/local/k8s-binaries.js';
import { ShutdownHooks } from '../src/local/shutdown-hooks.js';
import { simulatedGpuNode, simulatedGpus } from '../src/local/simulated-gpu-node.js';
import { serveNodeOptions, startServeProcess } from './support/serve-process.js';
import { timedPost } from './support/timed-post.js';

const repoRoot = resolve(import.meta.dirname, '..');
const sizes = (process.argv[2] ?? '1000x5000,5000x40000').split(',').map((size) => {
  const [nodes, pods] = size.split('x').map(Number);
  if (!(Number.isInteger(nodes) && Number.isInteger(pods) && (nodes ?? 0) > 0 && (pods ?? -1) >= 0))
    throw new Error(`a size is <nodes>x<pods>, got ${size}`);
  return { nodes: nodes ?? 0, pods: pods ?? 0 };
});
const SAMPLES = 1000;

async function inBatches<T>(items: readonly T[], width: number, work: (item: T) => Promise<unknown>): Promise<void> {
  for (let index = 0; index < items.length; index += width)
    await Promise.all(items.slice(index, index + width).map(work));
}

async function postReading(
  agent: Agent,
  port: number,
  path: string,
  body: string,
): Promise<{ ms: number; text: string }> {
  const answer = await timedPost(agent, port, path, body);
  if (answer.status !== 200) throw new Error(`HTTP ${String(answer.status)} for ${path}`);
  return answer;
}

async function post(agent: Agent, port: number, path: string, body: string): Promise<number> {
  return (await postReading(agent, port, path, body)).ms;
}

function memoryMiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) =>
    Number(
      /^(\w+):\s+(\d+) kB$/m.exec(status.split('\n').find((line) => line.startsWith(`${name}:`)) ?? '')?.[2] ?? 0,
    ) / 1024;
  return { rss: field('VmRSS'), peak: field('VmHWM') };
}

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(0);

/** prom-client's default process metrics: the V8 heap in use and allocated, in MiB. */
function heapMiB(exposition: string): { used: string; total: string } {
  const gauge = (name: string) => {
    const value = new RegExp(`^${name} (\\S+)$`, 'm').exec(exposition)?.[1];
    return value === undefined ? '?' : (Number(value) / 2 ** 20).toFixed(0);
  };
  return { used: gauge('nodejs_heap_size_used_bytes'), total: gauge('nodejs_heap_size_total_bytes') };
}

const quantile = (sorted: readonly number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
const summary = (samples: number[]) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) };
};

for (const size of sizes) {
  const plane = await ControlPlane.start({
    binaries: locateBinaries({ repoRoot, env: process.env }),
    shutdownHooks: new ShutdownHooks(process),
  });
  const certDir = mkdtempSync(join(tmpdir(), 'bench-scale-certs-'));
  let server: Awaited<ReturnType<typeof startServeProcess>> | undefined;
  try {
    const core = loadKubeConfig(plane.kubeconfigPath).makeApiClient(CoreV1Api);
    for (const name of ['bench', 'vgpu-warden']) await core.createNamespace({ body: { metadata: { name } } });
    const nodes = Array.from({ length: size.nodes }, (_, index) => `s-node-${String(index).padStart(5, '0')}`);
    let started = performance.now();
    await inBatches(nodes, 64, (name) => core.createNode({ body: simulatedGpuNode({ name, gpus: 8 }) }));
    await inBatches(
      Array.from({ length: size.pods }, (_, index) => index),
      64,
      async (index) => {
        const node = nodes[index % nodes.length] ?? '';
        const gpu = simulatedGpus({ name: node, gpus: 8 })[Math.floor(index / nodes.length) % 8]?.uuid ?? '';
        const allocation = encodeAllocation([[{ uuid: gpu, type: 'NVIDIA', memoryMiB: 2000, cores: 10 }]]);
        await core.createNamespacedPod({
          namespace: 'bench',
          body: {
            metadata: {
              name: `bound-${index}`,
              annotations: { [ALLOCATED_ANNOTATION]: allocation, [VGPU_NODE_ANNOTATION]: node },
            },
            spec: {
              schedulerName: 'none',
              nodeName: node,
              containers: [
                {
                  name: 'c',
                  image: 'x',
                  resources: {
                    limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '2000', 'nvidia.com/gpucores': '10' },
                  },
                },
              ],
            },
          },
        });
      },
    );
    console.log(
      `${size.nodes} nodes x 8 GPUs, ${size.pods} bound GPU pods: created in ${((performance.now() - started) / 1000).toFixed(0)} s`,
    );

    const [webhookPort = 0, extenderPort = 0, metricsPort = 0] = await findFreePorts(3);
    started = performance.now();
    server = await startServeProcess(
      {
        KUBECONFIG: plane.kubeconfigPath,
        CERT_DIR: certDir,
        WEBHOOK_HOST: '127.0.0.1',
        WEBHOOK_PORT: String(webhookPort),
        EXTENDER_PORT: String(extenderPort),
        CERT_HOSTS: '127.0.0.1',
        METRICS_PORT: String(metricsPort),
      },
      { readyTimeoutMs: 600_000, inspect: true },
    );
    const readyMs = performance.now() - started;
    const afterSync = memoryMiB(server.pid);
    const heapAfterSync = heapMiB(await server.metrics());
    const liveAfterSync = await server.liveHeapBytes();
    // The full GC just run returns garbage to V8, not necessarily to the system: RSS after it, too.
    const rssAfterGc = memoryMiB(server.pid).rss;

    const agent = new Agent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false });
    const pod = (index: number, gpu: boolean): V1Pod => ({
      metadata: { name: `probe-${index}`, namespace: 'bench', uid: `probe-${gpu ? 'gpu' : 'plain'}-${index}` },
      spec: {
        containers: [
          {
            name: 'c',
            image: 'x',
            resources: {
              limits: gpu
                ? { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '4000', 'nvidia.com/gpucores': '20' }
                : { cpu: '1' },
            },
          },
        ],
      },
    });
    const window = Math.max(1, Math.round(size.nodes / 10));
    // kube-scheduler starts each search where the last one stopped.
    const namesFor = (index: number, all: boolean) =>
      all
        ? nodes
        : Array.from({ length: window }, (_, offset) => nodes[(index * window + offset) % nodes.length] ?? '');
    const args = (index: number, gpu: boolean, all: boolean) =>
      JSON.stringify({ Pod: pod(index, gpu), Nodes: null, NodeNames: namesFor(index, all) });
    const rows: string[] = [];
    for (const all of [true, false]) {
      const scope = all ? `all ${size.nodes} names` : `${window} names (10 %)`;
      for (let index = 0; index < 10; index++) await post(agent, extenderPort, '/filter', args(index, true, all));
      const plain: number[] = [];
      const filter: number[] = [];
      const prioritize: number[] = [];
      // Interleaved, one of each per round: a stretch of a busy machine falls on the baseline and the
      // measured calls alike (taken one kind after the other, the 500-name p99 ratio moved between
      // 0.8x and 2.1x from run to run).
      for (let index = 0; index < SAMPLES; index++) {
        plain.push(await post(agent, extenderPort, '/filter', args(index, false, all)));
        const answer = await postReading(agent, extenderPort, '/filter', args(index, true, all));
        filter.push(answer.ms);
        // As kube-scheduler does: prioritize is sent the names filter passed.
        const passed = (JSON.parse(answer.text) as { NodeNames?: string[] | null }).NodeNames ?? [];
        const body = JSON.stringify({ Pod: pod(index, true), Nodes: null, NodeNames: passed });
        prioritize.push(await post(agent, extenderPort, '/prioritize', body));
      }
      const [base, fit, score] = [summary(plain), summary(filter), summary(prioritize)];
      rows.push(
        `  ${scope.padEnd(20)} pass-through (baseline) p50 ${base.p50.toFixed(2)} / p99 ${base.p99.toFixed(2)} ms;  GPU filter p50 ${fit.p50.toFixed(2)} / p99 ${fit.p99.toFixed(2)} ms (${(fit.p99 / base.p99).toFixed(1)}x at p99);  prioritize p50 ${score.p50.toFixed(2)} / p99 ${score.p99.toFixed(2)} ms (${(score.p99 / base.p99).toFixed(1)}x)`,
      );
    }
    agent.destroy();
    const afterLoad = memoryMiB(server.pid);
    const heapAfterLoad = heapMiB(await server.metrics());
    const liveAfterLoad = await server.liveHeapBytes();
    console.log(
      `  serve (${process.env.BENCH_SERVE === 'dist' ? 'dist/bin.js, as the image runs it' : 'from the sources through tsx'}; NODE_OPTIONS ${JSON.stringify(serveNodeOptions())}) start -> ready ${(readyMs / 1000).toFixed(1)} s; RSS after sync ${afterSync.rss.toFixed(0)} MiB (V8 heap used ${heapAfterSync.used} of ${heapAfterSync.total} MiB; live after a full GC ${mib(liveAfterSync)} MiB, RSS then ${rssAfterGc.toFixed(0)} MiB), after ${2 * (10 + 3 * SAMPLES)} requests ${afterLoad.rss.toFixed(0)} MiB (peak ${afterLoad.peak.toFixed(0)} MiB; heap used ${heapAfterLoad.used} of ${heapAfterLoad.total} MiB, live ${mib(liveAfterLoad)} MiB); ${SAMPLES} samples each:`,
    );
    for (const row of rows) console.log(row);
  } finally {
    await server?.stop();
    rmSync(certDir, { recursive: true, force: true });
    await plane.stop();
  }
}
