// Scheduler extender benchmark, against a real local kube-apiserver.
// 1. Filter latency: 1000 nodes x 8 GPUs with 5000 bound GPU pods in the cache; a GPU pod's filter
//    over all 1000 node names, over TLS with keep-alive, p50/p99. Baseline: a non-GPU pod's filter
//    (the pass-through path) on the same connection.
// 2. Scheduling throughput through the real kube-scheduler at 100 nodes: 200 pods without the
//    extender (default-scheduler) and with it (hami-scheduler, device-plugin simulator releasing the
//    locks), with the ratio.
//   npm run bench:extender
import { Agent, request } from 'node:https';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  CoreV1Api,
  HttpMethod,
  IsomorphicFetchHttpLibrary,
  RequestContext,
  type KubeConfig,
  type V1Pod,
} from '@kubernetes/client-node';
import { ClusterCache } from '../src/cluster/cluster-cache.js';
import { encodeAllocation } from '../src/devices/allocation-codec.js';
import { kubeSchedulerConfiguration } from '../src/extender/scheduler-config.js';
import { loadKubeConfig } from '../src/kube/client.js';
import { KubeNodeLockApi } from '../src/lock/kube-node-lock-api.js';
import { ControlPlane } from '../src/local/control-plane.js';
import { DevicePluginSimulator } from '../src/local/device-plugin-simulator.js';
import { findFreePort } from '../src/local/free-port.js';
import { locateBinaries } from '../src/local/k8s-binaries.js';
import { ShutdownHooks } from '../src/local/shutdown-hooks.js';
import { simulatedGpuNode, simulatedGpus } from '../src/local/simulated-gpu-node.js';
import { NodeLocks } from '../src/lock/node-locks.js';
import { ALLOCATED_ANNOTATION } from '../src/hami/wire.js';
import { kubeSources } from '../src/cluster/kube-list-watch.js';
import { startServeProcess, type ServeProcess } from './support/serve-process.js';

const repoRoot = resolve(import.meta.dirname, '..');

async function inBatches<T>(items: T[], width: number, work: (item: T) => Promise<unknown>): Promise<void> {
  for (let index = 0; index < items.length; index += width)
    await Promise.all(items.slice(index, index + width).map(work));
}

/** CPU seconds (user + system) so far of every process by command name, for BENCH_VERBOSE's breakdown. */
function cpuByProcess(): Map<string, number> {
  const totals = new Map<string, number>();
  for (const pid of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const seconds = (Number(fields[11]) + Number(fields[12])) / 100;
      const key =
        pid === String(process.pid) ? 'bench' : name === 'MainThread' || name === 'node' ? `node:${pid}` : name;
      totals.set(key, (totals.get(key) ?? 0) + seconds);
    } catch {
      /* gone meanwhile */
    }
  }
  return totals;
}

/**
 * kube-apiserver's own count of the requests it answered (apiserver_request_total), by verb,
 * resource and code, watches left out: for BENCH_VERBOSE's requests per run.
 */
async function apiserverRequests(kubeConfig: KubeConfig): Promise<Map<string, number>> {
  const server = kubeConfig.getCurrentCluster()?.server;
  if (server === undefined) return new Map();
  const context = new RequestContext(`${server}/metrics`, HttpMethod.GET);
  await kubeConfig.applySecurityAuthentication(context);
  const text = await (await new IsomorphicFetchHttpLibrary().send(context).toPromise()).body.text();
  const counts = new Map<string, number>();
  for (const line of text.split('\n')) {
    const sample = /^apiserver_request_total\{(.*)\} (\d+)$/.exec(line);
    if (sample === null) continue;
    const label = (name: string) => new RegExp(`${name}="([^"]*)"`).exec(sample[1] ?? '')?.[1] ?? '';
    if (label('verb') === 'WATCH') continue;
    const key = `${label('verb')} ${label('resource')}${label('subresource') === '' ? '' : `/${label('subresource')}`} ${label('code')}`;
    counts.set(key, (counts.get(key) ?? 0) + Number(sample[2]));
  }
  return counts;
}

function percentile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

function post(agent: Agent, port: number, path: string, body: string): Promise<{ ms: number; text: string }> {
  return new Promise((done, fail) => {
    const started = performance.now();
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => {
          text += chunk.toString();
        });
        res.on('end', () => {
          done({ ms: performance.now() - started, text });
        });
      },
    );
    req.on('error', fail);
    req.end(body);
  });
}

const plane = await ControlPlane.start({
  binaries: locateBinaries({ repoRoot, env: process.env }),
  shutdownHooks: new ShutdownHooks(process),
});
const certDir = mkdtempSync(join(tmpdir(), 'bench-certs-'));
let server: ServeProcess | undefined;
try {
  const kubeConfig = loadKubeConfig(plane.kubeconfigPath);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: 'bench' } } });
  // serve's own namespace (POD_NAMESPACE), as an install has it: its leader-election Lease lives
  // there, and readiness waits for it.
  await core.createNamespace({ body: { metadata: { name: 'vgpu-warden' } } });

  const [webhookPort, extenderPort, metricsPort] = [await findFreePort(), await findFreePort(), await findFreePort()];
  // Its own process, as in a cluster; started once the cluster holds what a part measures against,
  // so that its first sync reads all of it (ready means synced).
  const startWarden = () =>
    startServeProcess({
      KUBECONFIG: plane.kubeconfigPath,
      CERT_DIR: certDir,
      WEBHOOK_HOST: '127.0.0.1',
      WEBHOOK_PORT: String(webhookPort),
      EXTENDER_PORT: String(extenderPort),
      CERT_HOSTS: '127.0.0.1',
      METRICS_PORT: String(metricsPort),
    });
  let started = performance.now();
  // `--throughput` runs part 2 alone (part 1 spends most of its time building 5000 pods).
  if (!process.argv.includes('--throughput')) {
    // ---- 1. filter latency at 1000 nodes x 8 GPUs, 5000 bound pods ----
    const nodes = Array.from({ length: 1000 }, (_, index) => `f-node-${String(index).padStart(4, '0')}`);
    started = performance.now();
    await inBatches(nodes, 32, (name) =>
      core.createNode({ body: simulatedGpuNode({ name, gpus: 8, labels: { bench: 'filter' } }) }),
    );
    await inBatches(
      Array.from({ length: 5000 }, (_, index) => index),
      32,
      async (index) => {
        const node = nodes[index % nodes.length] ?? '';
        const gpu = simulatedGpus({ name: node, gpus: 8 })[index % 8]?.uuid ?? '';
        const allocation = encodeAllocation([[{ uuid: gpu, type: 'NVIDIA', memoryMiB: 2000, cores: 10 }]]);
        await core.createNamespacedPod({
          namespace: 'bench',
          body: {
            metadata: {
              name: `bound-${index}`,
              annotations: { [ALLOCATED_ANNOTATION]: allocation, 'hami.io/vgpu-node': node },
            },
            spec: {
              schedulerName: 'none',
              nodeName: node,
              containers: [
                {
                  name: 'c',
                  image: 'x',
                  resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '2000' } },
                },
              ],
            },
          },
        });
      },
    );
    console.log(`setup: 1000 nodes and 5000 bound pods in ${((performance.now() - started) / 1000).toFixed(1)} s`);

    server = await startWarden();
    const agent = new Agent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false });
    const podBody = (limits: Record<string, string>): V1Pod => ({
      metadata: { name: 'probe', namespace: 'bench', uid: 'probe-uid' },
      spec: { containers: [{ name: 'c', image: 'x', resources: { limits } }] },
    });
    const gpuArgs = JSON.stringify({
      Pod: podBody({ 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '4000' }),
      Nodes: null,
      NodeNames: nodes,
    });
    const plainArgs = JSON.stringify({ Pod: podBody({ cpu: '1' }), Nodes: null, NodeNames: nodes });
    const measure = async (body: string, count: number) => {
      for (let i = 0; i < 10; i++) await post(agent, extenderPort, '/filter', body);
      const samples: number[] = [];
      for (let i = 0; i < count; i++) samples.push((await post(agent, extenderPort, '/filter', body)).ms);
      return samples.sort((a, b) => a - b);
    };
    const plain = await measure(plainArgs, 1000);
    const gpu = await measure(gpuArgs, 1000);
    const check = JSON.parse((await post(agent, extenderPort, '/filter', gpuArgs)).text) as {
      NodeNames: string[] | null;
    };
    console.log(`filter over 1000 nodes x 8 GPUs, 5000 bound pods (${check.NodeNames?.length ?? 0} nodes fit):`);
    console.log(
      `  non-GPU pod (baseline)  p50 ${percentile(plain, 0.5).toFixed(2)} ms  p99 ${percentile(plain, 0.99).toFixed(2)} ms`,
    );
    console.log(
      `  GPU pod                 p50 ${percentile(gpu, 0.5).toFixed(2)} ms  p99 ${percentile(gpu, 0.99).toFixed(2)} ms  (${(percentile(gpu, 0.5) / percentile(plain, 0.5)).toFixed(1)}x baseline p50)`,
    );
    agent.destroy();
    await inBatches(nodes, 64, (name) => core.deleteNode({ name }));
    await core.deleteCollectionNamespacedPod({ namespace: 'bench', gracePeriodSeconds: 0 });
  }

  // ---- 2. throughput through the real kube-scheduler at 100 nodes ----
  const small = Array.from({ length: 100 }, (_, index) => `t-node-${String(index).padStart(3, '0')}`);
  await inBatches(small, 32, (name) =>
    core.createNode({ body: simulatedGpuNode({ name, gpus: 4, labels: { bench: 'throughput' } }) }),
  );
  const simulatorCache = new ClusterCache({ sources: kubeSources(kubeConfig) });
  await simulatorCache.start();
  const simulator = new DevicePluginSimulator({
    core,
    cache: simulatorCache,
    allocationDelayMs: 0,
    locks: new NodeLocks({ api: new KubeNodeLockApi(core), config: { bindGraceMs: 60_000, expireMs: 300_000 } }),
    isSimulated: (node) => node.startsWith('t-node-'),
  });
  simulator.start();
  /** pods/s until all 200 are bound, the nodes they ended on, and kube-scheduler's FailedScheduling events for them. */
  const run = async (
    label: string,
    schedulerName: string,
    config: Record<string, unknown>,
    limits: Record<string, string>,
    annotations: Record<string, string> = {},
  ): Promise<{ rate: number; nodes: number; failed: number }> => {
    const scheduler = await plane.startScheduler(config);
    const cpuBefore = process.env.BENCH_VERBOSE ? cpuByProcess() : undefined;
    const requestsBefore = process.env.BENCH_VERBOSE ? await apiserverRequests(kubeConfig) : undefined;
    try {
      const names = Array.from({ length: 200 }, (_, index) => `${label}-${index}`);
      started = performance.now();
      await inBatches(names, 50, (name) =>
        core.createNamespacedPod({
          namespace: 'bench',
          body: {
            metadata: { name, annotations },
            spec: {
              schedulerName,
              nodeSelector: { bench: 'throughput' },
              containers: [{ name: 'c', image: 'x', resources: { limits } }],
            },
          },
        }),
      );
      let pods: V1Pod[];
      for (;;) {
        // From the simulator's watch, not a LIST every 100 ms: the harness must not load the apiserver it measures.
        pods = [...simulatorCache.allPods()].filter(
          (pod) => pod.metadata?.namespace === 'bench' && pod.metadata.name?.startsWith(`${label}-`) === true,
        );
        if (pods.length === 200 && pods.every((pod) => pod.spec?.nodeName !== undefined)) break;
        if (performance.now() - started > 300_000) throw new Error(`${label}: not all pods bound after 300 s`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const rate = 200 / ((performance.now() - started) / 1000);
      const events = (await core.listNamespacedEvent({ namespace: 'bench' })).items.filter(
        (event) => event.reason === 'FailedScheduling' && event.involvedObject.name?.startsWith(`${label}-`) === true,
      );
      if (cpuBefore !== undefined) {
        const after = cpuByProcess();
        console.log(
          `  ${label}: CPU s by process: ${[...after]
            .map(([name, seconds]) => [name, seconds - (cpuBefore.get(name) ?? 0)] as const)
            .filter(([, seconds]) => seconds >= 0.05)
            .sort(([, a], [, b]) => b - a)
            .map(([name, seconds]) => `${name} ${seconds.toFixed(2)}`)
            .join(', ')}`,
        );
      }
      if (requestsBefore !== undefined) {
        const delta = [...(await apiserverRequests(kubeConfig))].map(
          ([key, count]) => [key, count - (requestsBefore.get(key) ?? 0)] as const,
        );
        console.log(
          `  ${label}: kube-apiserver requests: ${delta
            .filter(([, count]) => count >= 5)
            .sort(([, a], [, b]) => b - a)
            .map(([key, count]) => `${key} ${count}`)
            .join(', ')}`,
        );
      }
      if (process.env.BENCH_VERBOSE && server !== undefined) {
        const text = await server.metrics();
        console.log(
          `  ${label}: ${text
            .split('\n')
            .filter((row) => /^vgpu_warden_(filter|bind)_duration_seconds_(sum|count)/.test(row))
            .join('  ')}`,
        );
      }
      if (process.env.BENCH_VERBOSE)
        for (const message of new Set(events.map((event) => (event.message ?? '').replace(/\d+/g, 'N'))))
          console.log(`  ${label}: ${message.slice(0, 300)}`);
      return {
        rate,
        nodes: new Set(pods.map((pod) => pod.spec?.nodeName)).size,
        failed: events.reduce((sum, event) => sum + (event.count ?? 1), 0),
      };
    } finally {
      await scheduler.stop();
      // Each run starts on empty nodes: the next policy's placement must not depend on this one's.
      await core.deleteCollectionNamespacedPod({ namespace: 'bench', gracePeriodSeconds: 0 });
      while ((await core.listNamespacedPod({ namespace: 'bench' })).items.length > 0)
        await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  const without = await run(
    'plain',
    'default-scheduler',
    { profiles: [{ schedulerName: 'default-scheduler' }] },
    { 'nvidia.com/gpu': '1' },
  );
  server ??= await startWarden();
  const caPem = readFileSync(join(certDir, 'ca.crt'), 'utf8');
  const extenderConfig = kubeSchedulerConfiguration({
    schedulerName: 'hami-scheduler',
    extenderUrl: `https://127.0.0.1:${extenderPort}`,
    ...(caPem ? { caPem } : {}),
  });
  const gpuLimits = { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '2000', 'nvidia.com/gpucores': '10' };
  // spread: pods go to different nodes, so binds run in parallel; binpack (the default) fills the
  // fewest nodes that hold the burst (5 here: 4 GPUs x 10 shares each), binding on those 5 locks at once.
  const spread = await run('spread', 'hami-scheduler', extenderConfig, gpuLimits, {
    'hami.io/node-scheduler-policy': 'spread',
  });
  const binpack = await run('binpack', 'hami-scheduler', extenderConfig, gpuLimits, {
    'hami.io/node-scheduler-policy': 'binpack',
  });
  console.log(
    'scheduling throughput, 200 pods created at once onto 100 nodes x 4 GPUs through the real kube-scheduler:',
  );
  const line = (name: string, result: { rate: number; nodes: number; failed: number }) =>
    `  ${name.padEnd(40)} ${result.rate.toFixed(1).padStart(6)} pods/s  (${(result.rate / without.rate).toFixed(2)}x)  ${String(result.nodes).padStart(3)} nodes used  ${result.failed} failed scheduling attempts`;
  console.log(line('without extender (default-scheduler)', without));
  console.log(line('with extender, spread', spread));
  console.log(line('with extender, binpack (5 nodes hold it)', binpack));
  simulator.stop();
  await simulatorCache.stop();
  await server.stop();
} finally {
  await server?.stop();
  rmSync(certDir, { recursive: true, force: true });
  await plane.stop();
}
