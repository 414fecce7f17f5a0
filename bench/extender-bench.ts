// Scheduler extender benchmark, against a real local kube-apiserver.
// 1. Filter latency: 1000 nodes x 8 GPUs with 5000 bound GPU pods in the cache; a GPU pod's filter
//    over all 1000 node names, over TLS with keep-alive, p50/p99. Baseline: a non-GPU pod's filter
//    (the pass-through path) on the same connection.
// 2. Scheduling throughput and placement through the real kube-scheduler at each size of --nodes
//    (nodes x 4 GPUs): 200 GPU pods created at once, without the extender (default-scheduler, at its
//    client's default rate limit and with the limit raised), and with it (hami-scheduler, spread and
//    binpack, the device-plugin simulator releasing the locks), with the ratios, the nodes used and
//    the most pods on one node. Above 100 nodes kube-scheduler looks at only a sample of the nodes
//    (percentageOfNodesToScore); --gpu-percentage overrides what the GPU profile says (0: adaptive).
//   npm run bench:extender -- [--throughput] [--nodes 100,1000,5000] [--runs 1] [--gpu-percentage P]
import https, { Agent } from 'node:https';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
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
import { timedPost } from './support/timed-post.js';
import { eventLoopLine, fetchInsecure, schedulerLines, seriesOf, serveLines } from './support/burst-breakdown.js';

const repoRoot = resolve(import.meta.dirname, '..');

interface BenchOptions {
  sizes: number[];
  runs: number;
  /** The GPU profile's percentageOfNodesToScore instead of the shipped one; 0: kube-scheduler's adaptive default. */
  gpuPercentage: number | undefined;
}

function parseOptions(argv: readonly string[]): BenchOptions {
  const valueOf = (flag: string): string | undefined => {
    const index = argv.indexOf(flag);
    return index < 0 ? undefined : argv[index + 1];
  };
  const count = (text: string, flag: string, least: number): number => {
    const value = Number(text);
    if (!Number.isInteger(value) || value < least)
      throw new Error(`${flag} takes whole numbers >= ${least}, got ${text}`);
    return value;
  };
  const sizes = (valueOf('--nodes') ?? '100,1000,5000').split(',').map((size) => count(size, '--nodes', 5));
  const percentage = valueOf('--gpu-percentage');
  return {
    sizes: [...sizes].sort((a, b) => a - b),
    runs: count(valueOf('--runs') ?? '1', '--runs', 1),
    gpuPercentage: percentage === undefined ? undefined : count(percentage, '--gpu-percentage', 0),
  };
}
const options = parseOptions(process.argv.slice(2));

interface RunResult {
  rate: number;
  nodes: number;
  mostOnOneNode: number;
  failed: number;
}

/** The GPU profile with its percentageOfNodesToScore replaced (0: removed, kube-scheduler's adaptive default). */
function withGpuPercentage(config: Record<string, unknown>, percentage: number | undefined): Record<string, unknown> {
  if (percentage === undefined) return config;
  const profiles = (config.profiles as Record<string, unknown>[]).map((profile) => {
    const adaptive = { ...profile };
    delete adaptive.percentageOfNodesToScore;
    return percentage === 0 ? adaptive : { ...adaptive, percentageOfNodesToScore: percentage };
  });
  return { ...config, profiles };
}

const seconds = (since: number): string => ((performance.now() - since) / 1000).toFixed(1);
const range = (values: number[], digits: number): string => {
  const [low, high] = [Math.min(...values), Math.max(...values)];
  return low === high ? low.toFixed(digits) : `${low.toFixed(digits)}-${high.toFixed(digits)}`;
};

function printThroughput(size: number, results: Record<string, RunResult[]>, gpuPercentage: number | undefined): void {
  const plain = results.plain ?? [];
  const raised = results.raised ?? [];
  const ratio = (result: RunResult, index: number, baseline: RunResult[]) =>
    result.rate / (baseline[index]?.rate ?? Number.NaN);
  const percentage =
    gpuPercentage === undefined ? 'as shipped' : gpuPercentage === 0 ? 'adaptive' : `${gpuPercentage} %`;
  console.log(
    `scheduling throughput, 200 GPU pods created at once onto ${size} nodes x 4 GPUs through the real kube-scheduler ` +
      `(${plain.length} runs; GPU profile percentageOfNodesToScore ${percentage}):`,
  );
  for (const [name, label] of [
    ['plain', 'default-scheduler, client limit 50/s'],
    ['raised', 'default-scheduler, client limit raised'],
    ['spread', 'with extender, spread'],
    ['binpack', 'with extender, binpack (5 nodes hold it)'],
  ] as const) {
    const runs = results[name] ?? [];
    const ratios =
      name === 'plain' || name === 'raised'
        ? ''
        : `  ${range(
            runs.map((run, index) => ratio(run, index, plain)),
            2,
          )}x of limited, ` +
          `${range(
            runs.map((run, index) => ratio(run, index, raised)),
            2,
          )}x of raised`;
    console.log(
      `  ${label.padEnd(42)} ${range(
        runs.map((run) => run.rate),
        1,
      ).padStart(11)} pods/s${ratios}  ` +
        `nodes used ${range(
          runs.map((run) => run.nodes),
          0,
        )}, most on one ${range(
          runs.map((run) => run.mostOnOneNode),
          0,
        )}, ` +
        `failed attempts ${range(
          runs.map((run) => run.failed),
          0,
        )}`,
    );
  }
}

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

/**
 * BENCH_PPROF=<dir>: 5 s CPU profiles of kube-scheduler and kube-apiserver from the burst's start,
 * written as <dir>/<label>-<process>.pprof (read with `go tool pprof -top`).
 */
async function startProfiles(label: string, schedulerUrl: string): Promise<void> {
  const dir = process.env.BENCH_PPROF;
  if (!dir) return;
  const fetchProfile = async (url: string, file: string, authenticated: boolean) => {
    const options: https.RequestOptions = { rejectUnauthorized: false };
    if (authenticated) await kubeConfigForProfiles?.applyToHTTPSOptions(options);
    const body = await new Promise<Buffer>((resolve, reject) => {
      https
        .get(`${url}/debug/pprof/profile?seconds=5`, options, (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () => {
            resolve(Buffer.concat(chunks));
          });
        })
        .on('error', reject);
    });
    writeFileSync(join(dir, `${label}-${file}.pprof`), body);
  };
  const server = kubeConfigForProfiles?.getCurrentCluster()?.server ?? '';
  await Promise.all([
    fetchProfile(schedulerUrl, 'kube-scheduler', false),
    fetchProfile(server, 'kube-apiserver', true),
  ]).catch((error: unknown) => {
    console.log(`  ${label}: profile failed: ${String(error)}`);
  });
}
let kubeConfigForProfiles: KubeConfig | undefined;

function percentile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

const post = timedPost;

const plane = await ControlPlane.start({
  binaries: locateBinaries({ repoRoot, env: process.env }),
  shutdownHooks: new ShutdownHooks(process),
});
const certDir = mkdtempSync(join(tmpdir(), 'bench-certs-'));
let server: ServeProcess | undefined;
try {
  const kubeConfig = loadKubeConfig(plane.kubeconfigPath);
  kubeConfigForProfiles = kubeConfig;
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

  // ---- 2. throughput through the real kube-scheduler at each size of --nodes ----
  const simulatorCache = new ClusterCache({ sources: kubeSources(kubeConfig) });
  await simulatorCache.start();
  // A fresh simulator for each round's GPU runs (a stopped one stays stopped): only they need it.
  const startSimulator = () => {
    const simulator = new DevicePluginSimulator({
      core,
      cache: simulatorCache,
      allocationDelayMs: 0,
      locks: new NodeLocks({ api: new KubeNodeLockApi(core), config: { bindGraceMs: 60_000, expireMs: 300_000 } }),
      isSimulated: (node) => node.startsWith('t-node-'),
    });
    simulator.start();
    return simulator;
  };
  server ??= await startWarden();
  const caPem = readFileSync(join(certDir, 'ca.crt'), 'utf8');
  // Each policy through its own profile, as NODE_SCHEDULER_POLICY and the shipped configuration pair them.
  const gpuConfig = (nodePolicy: 'binpack' | 'spread') =>
    withGpuPercentage(
      kubeSchedulerConfiguration({
        schedulerName: 'hami-scheduler',
        extenderUrl: `https://127.0.0.1:${extenderPort}`,
        nodePolicy,
        ...(caPem ? { caPem } : {}),
      }),
      options.gpuPercentage,
    );
  const gpuLimits = { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '2000', 'nvidia.com/gpucores': '10' };
  const withoutExtender = { profiles: [{ schedulerName: 'default-scheduler' }] };
  // kube-scheduler's own client is held to 50 requests/s (burst 100) by default: default-scheduler
  // alone is then paced by that limit, not by CPU. Raised, it shows what the machine can do.
  const withoutExtenderRaised = { ...withoutExtender, clientConnection: { qps: 10_000, burst: 10_000 } };
  /** pods/s until all 200 are bound, the nodes they ended on, and kube-scheduler's FailedScheduling events for them. */
  const run = async (
    label: string,
    schedulerName: string,
    config: Record<string, unknown>,
    limits: Record<string, string>,
    annotations: Record<string, string> = {},
  ): Promise<RunResult> => {
    const scheduler = await plane.startScheduler(config);
    const schedulerUrl = scheduler.healthzUrl.replace(/\/healthz$/, '');
    // BENCH_VERBOSE: the components' metrics before the burst (the serve scrape restarts its event-loop histogram).
    const serveBefore = process.env.BENCH_VERBOSE && server ? seriesOf(await server.metrics()) : undefined;
    const schedulerBefore = process.env.BENCH_VERBOSE
      ? seriesOf(await fetchInsecure(`${schedulerUrl}/metrics`))
      : undefined;
    const profiles = startProfiles(label, schedulerUrl);
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
      await profiles;
      const events = (await core.listNamespacedEvent({ namespace: 'bench' })).items.filter(
        (event) => event.reason === 'FailedScheduling' && event.involvedObject.name?.startsWith(`${label}-`) === true,
      );
      if (cpuBefore !== undefined) {
        const spent = [...cpuByProcess()]
          .map(([name, seconds]) => [name, seconds - (cpuBefore.get(name) ?? 0)] as const)
          .filter(([, seconds]) => seconds >= 0.05)
          .sort(([, a], [, b]) => b - a);
        console.log(
          `  ${label}: CPU s by process: ${spent.map(([name, seconds]) => `${name} ${seconds.toFixed(2)}`).join(', ')}`,
        );
        // The burst's CPU per pod, summed over every process, and the rate this machine's cores allow at
        // that cost; then the same without serve's share: the most any extender could reach here.
        const cores = availableParallelism();
        const perPodMs = (spent.reduce((sum, [, seconds]) => sum + seconds, 0) * 1000) / 200;
        const servePerPodMs = ((spent.find(([name]) => name === `node:${server?.pid}`)?.[1] ?? 0) * 1000) / 200;
        const ceiling = (ms: number) => ((cores * 1000) / ms).toFixed(0);
        console.log(
          `  ${label}: CPU ${perPodMs.toFixed(1)} ms per pod over all processes, serve's ${servePerPodMs.toFixed(1)}: ` +
            `at most ${ceiling(perPodMs)} pods/s on ${cores} cores (bound at ${rate.toFixed(1)}), ` +
            `${ceiling(perPodMs - servePerPodMs)} if serve cost nothing`,
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
      if (serveBefore !== undefined && server !== undefined) {
        const serveAfter = seriesOf(await server.metrics());
        for (const line of [...serveLines(serveBefore, serveAfter), eventLoopLine(serveAfter)])
          console.log(`  ${label}: ${line}`);
      }
      if (schedulerBefore !== undefined) {
        const schedulerAfter = seriesOf(await fetchInsecure(`${schedulerUrl}/metrics`));
        for (const line of schedulerLines(schedulerBefore, schedulerAfter, 200)) console.log(`  ${label}: ${line}`);
      }
      if (process.env.BENCH_VERBOSE)
        for (const message of new Set(events.map((event) => (event.message ?? '').replace(/\d+/g, 'N'))))
          console.log(`  ${label}: ${message.slice(0, 300)}`);
      const perNode = new Map<string, number>();
      for (const pod of pods) perNode.set(pod.spec?.nodeName ?? '', (perNode.get(pod.spec?.nodeName ?? '') ?? 0) + 1);
      return {
        rate,
        nodes: perNode.size,
        mostOnOneNode: Math.max(...perNode.values()),
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
  const created: string[] = [];
  for (const size of options.sizes) {
    const added = Array.from(
      { length: size - created.length },
      (_, index) => `t-node-${String(created.length + index).padStart(5, '0')}`,
    );
    started = performance.now();
    await inBatches(added, 32, (name) =>
      core.createNode({ body: simulatedGpuNode({ name, gpus: 4, labels: { bench: 'throughput' } }) }),
    );
    created.push(...added);
    while (simulatorCache.nodeCount < created.length) await new Promise((resolve) => setTimeout(resolve, 100));
    console.log(`setup: ${size} nodes x 4 GPUs (${added.length} added in ${seconds(started)} s)`);
    const results: Record<string, RunResult[]> = { plain: [], raised: [], spread: [], binpack: [] };
    for (let round = 0; round < options.runs; round++) {
      results.plain?.push(await run('plain', 'default-scheduler', withoutExtender, { 'nvidia.com/gpu': '1' }));
      results.raised?.push(await run('raised', 'default-scheduler', withoutExtenderRaised, { 'nvidia.com/gpu': '1' }));
      const simulator = startSimulator();
      // spread: pods go to different nodes, so binds run in parallel; binpack (the default) fills the
      // fewest nodes that hold the burst (5: 4 GPUs x 10 shares each), binding on those 5 locks at once.
      results.spread?.push(
        await run('spread', 'hami-scheduler', gpuConfig('spread'), gpuLimits, {
          'hami.io/node-scheduler-policy': 'spread',
        }),
      );
      results.binpack?.push(
        await run('binpack', 'hami-scheduler', gpuConfig('binpack'), gpuLimits, {
          'hami.io/node-scheduler-policy': 'binpack',
        }),
      );
      simulator.stop();
    }
    printThroughput(size, results, options.gpuPercentage);
  }
  await simulatorCache.stop();
  await server.stop();
} finally {
  await server?.stop();
  rmSync(certDir, { recursive: true, force: true });
  await plane.stop();
}
