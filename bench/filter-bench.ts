// Filter + prioritize from the state store, in process (no HTTP, no apiserver): 1000 nodes x 8 GPUs
// with 5000 bound GPU pods. Each sample is one GPU pod's filter over all 1000 node names followed
// by its prioritize, as kube-scheduler calls them; before each sample one node's usage changes
// (a pod assumed there), so caches keyed by node generation are exercised honestly.
// Baseline in the same run: a non-GPU pod's filter + prioritize (the pass-through path).
// The quota case: pods of a namespace with a GPU ResourceQuota (never reached), whose use changes
// with every sample (the churn pod counts against it), so the budget-keyed verdicts never repeat.
//   npm run bench:filter -- [NODESxPODS]   (default 1000x5000; bench:scale's large size is 5000x40000)
import type { V1Node, V1Pod, V1ResourceQuota } from '@kubernetes/client-node';
import { ClusterCache } from '../src/cluster/cluster-cache.js';
import type { ListWatchSource } from '../src/cluster/reflector.js';
import { ALLOCATED_ANNOTATION } from '../src/hami/wire.js';
import { DEFAULT_REQUEST_DEFAULTS } from '../src/devices/requests.js';
import type { Binder } from '../src/extender/binder.js';
import { ExtenderService } from '../src/extender/extender-service.js';
import { simulatedGpuNode } from '../src/local/simulated-gpu-node.js';
import type { EventRecorder } from '../src/telemetry/events.js';

const size = /^(\d+)x(\d+)$/.exec(process.argv[2] ?? '1000x5000');
if (size === null)
  throw new Error(`bench:filter takes one size, NODESxPODS (1000x5000, say), not ${process.argv[2] ?? ''}`);
const NODES = Number(size[1]);
const GPUS = 8;
const BOUND_PODS = Number(size[2]);
const SAMPLES = 2000;

function staticSource<T>(items: T[]): ListWatchSource<T> {
  return {
    list: () => Promise.resolve({ items, resourceVersion: '1' }),
    watch: (_rv, _handlers, signal) =>
      new Promise((resolve) => {
        signal.addEventListener(
          'abort',
          () => {
            resolve();
          },
          { once: true },
        );
      }),
  };
}

const nodeNames = Array.from({ length: NODES }, (_, index) => `node-${String(index).padStart(5, '0')}`);
const nodes: V1Node[] = nodeNames.map((name) => simulatedGpuNode({ name, gpus: GPUS }));
const pods: V1Pod[] = Array.from({ length: BOUND_PODS }, (_, index) => {
  const node = nodeNames[index % NODES] ?? '';
  const gpu = `GPU-${node}-${index % GPUS}`;
  return {
    metadata: {
      name: `bound-${index}`,
      namespace: 'bench',
      uid: `uid-${index}`,
      resourceVersion: '1',
      annotations: { [ALLOCATED_ANNOTATION]: `${gpu},NVIDIA,3000,10:;`, 'hami.io/vgpu-node': node },
    },
    spec: { nodeName: node, containers: [{ name: 'c' }] },
    status: { phase: 'Running' },
  };
});
const QUOTA_NAMESPACE = 'bench-quota';
const quotas: V1ResourceQuota[] = [
  {
    metadata: { name: 'gpu-quota', namespace: QUOTA_NAMESPACE, uid: 'q', resourceVersion: '1' },
    spec: { hard: { 'limits.nvidia.com/gpumem': '1000000000', 'limits.nvidia.com/gpu': '1000000' } },
  },
];
const cache = new ClusterCache({
  sources: { nodes: staticSource(nodes), pods: staticSource(pods), quotas: staticSource(quotas) },
});
await cache.start();
const service = new ExtenderService({
  cache,
  binder: {} as Binder,
  events: { record: () => undefined } as unknown as EventRecorder,
  defaults: { nodePolicy: 'binpack', gpuPolicy: 'spread', requestDefaults: DEFAULT_REQUEST_DEFAULTS },
  syncWaitMs: 1000,
});

// distinct: every sample a new request shape (no pod of that shape was filtered before: the
// per-node shape cache misses and every node is fitted afresh). Otherwise replicas of one shape.
const podOf = (index: number, gpu: boolean, distinct = false, namespace = 'bench') => ({
  metadata: { name: `p-${index}`, namespace, uid: `new-${index}` },
  spec: {
    containers: [
      {
        name: 'c',
        resources: {
          limits: gpu
            ? {
                'nvidia.com/gpu': '1',
                'nvidia.com/gpumem': String(distinct ? 1000 + index : 4000),
                'nvidia.com/gpucores': '20',
              }
            : { cpu: '1' },
        },
      },
    ],
  },
});

async function run(gpu: boolean, distinct = false, namespace = 'bench'): Promise<number[]> {
  const times: number[] = [];
  for (let index = 0; index < SAMPLES; index++) {
    // One node changes between samples, as binds land (in the pod's namespace: its quota use grows).
    cache.assumePod(
      `churn-${namespace}-${index}`,
      nodeNames[index % NODES] ?? '',
      new Map([[`GPU-${nodeNames[index % NODES] ?? ''}-0`, { slots: 1, memoryMiB: 1, cores: 0 }]]),
      namespace,
    );
    const pod = podOf(index, gpu, distinct, namespace);
    const started = performance.now();
    const filtered = await service.filter({ pod, nodeNames });
    await service.prioritize({ pod, nodeNames: filtered.NodeNames ?? [] });
    times.push(performance.now() - started);
  }
  return times.sort((a, b) => a - b);
}

const q = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;
await run(true); // warm up the JIT
const baseline = await run(false);
const gpu = await run(true);
const distinct = await run(true, true);
const quota = await run(true, false, QUOTA_NAMESPACE);
console.log(
  `filter + prioritize over ${NODES} nodes x ${GPUS} GPUs, ${BOUND_PODS} bound pods, ${SAMPLES} samples each (in process):`,
);
console.log(
  `  non-GPU pod (baseline, pass-through)  p50 ${q(baseline, 0.5).toFixed(3)} ms  p99 ${q(baseline, 0.99).toFixed(3)} ms`,
);
console.log(
  `  GPU pod, replicas of one shape        p50 ${q(gpu, 0.5).toFixed(3)} ms  p99 ${q(gpu, 0.99).toFixed(3)} ms  (${(q(gpu, 0.5) / q(baseline, 0.5)).toFixed(1)}x baseline at p50)`,
);
console.log(
  `  GPU pod, a new shape every sample     p50 ${q(distinct, 0.5).toFixed(3)} ms  p99 ${q(distinct, 0.99).toFixed(3)} ms  (${(q(distinct, 0.5) / q(baseline, 0.5)).toFixed(1)}x baseline at p50)`,
);
console.log(
  `  GPU pod under a namespace GPU quota   p50 ${q(quota, 0.5).toFixed(3)} ms  p99 ${q(quota, 0.99).toFixed(3)} ms  (${(q(quota, 0.5) / q(baseline, 0.5)).toFixed(1)}x baseline at p50; its namespace's use changes every sample)`,
);
await cache.stop();
