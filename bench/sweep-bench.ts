// Sweep benchmark: one sweep pass over 1000 locked nodes against a real local kube-apiserver.
// Baseline: a pass over the same 1000 nodes whose locks are all held (classified, kept, no writes);
// then a pass where every lock is releasable (owner gone) and is released. Both are compared with
// the default sweep interval (30 s).
//   npm run bench:sweep
import { resolve } from 'node:path';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { ClusterCache } from '../src/cluster/cluster-cache.js';
import { loadKubeConfig } from '../src/kube/client.js';
import { KubeNodeLockApi } from '../src/lock/kube-node-lock-api.js';
import { ControlPlane } from '../src/local/control-plane.js';
import { locateBinaries } from '../src/local/k8s-binaries.js';
import { ShutdownHooks } from '../src/local/shutdown-hooks.js';
import { simulatedGpuNode } from '../src/local/simulated-gpu-node.js';
import { formatLockValue } from '../src/lock/lock-value.js';
import type { NodeLockApi } from '../src/lock/node-lock-api.js';
import { NodeLocks } from '../src/lock/node-locks.js';
import { sweepOnce } from '../src/sweeper/sweep-pass.js';
import { NODE_LOCK_ANNOTATION } from '../src/hami/wire.js';
import { kubeSources } from '../src/cluster/kube-list-watch.js';

const repoRoot = resolve(import.meta.dirname, '..');
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const NODES = 1000;

async function inBatches<T>(items: T[], width: number, work: (item: T) => Promise<unknown>): Promise<void> {
  for (let index = 0; index < items.length; index += width)
    await Promise.all(items.slice(index, index + width).map(work));
}

const plane = await ControlPlane.start({
  binaries: locateBinaries({ repoRoot, env: process.env }),
  shutdownHooks: new ShutdownHooks(process),
});
try {
  const kubeConfig = loadKubeConfig(plane.kubeconfigPath);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: 'bench' } } });
  await core.createNamespacedPod({
    namespace: 'bench',
    body: { metadata: { name: 'holder' }, spec: { schedulerName: 'none', containers: [{ name: 'c', image: 'x' }] } },
  });
  const nodes = Array.from({ length: NODES }, (_, index) => `s-node-${String(index).padStart(4, '0')}`);
  await inBatches(nodes, 32, (name) => core.createNode({ body: simulatedGpuNode({ name, gpus: 8 }) }));
  const lockAll = (owner: string) =>
    inBatches(nodes, 32, (name) =>
      core.patchNode(
        {
          name,
          body: {
            metadata: {
              annotations: { [NODE_LOCK_ANNOTATION]: formatLockValue(new Date(), { namespace: 'bench', name: owner }) },
            },
          },
        },
        mergePatch,
      ),
    );
  const cache = new ClusterCache({ sources: kubeSources(kubeConfig) });
  await cache.start();
  // Every API call the lock service makes, counted.
  const api = new KubeNodeLockApi(core);
  let apiCalls = 0;
  const counted: NodeLockApi = {
    readNode: (name, signal) => {
      apiCalls++;
      return api.readNode(name, signal);
    },
    writeLock: (name, rv, value, signal) => {
      apiCalls++;
      return api.writeLock(name, rv, value, signal);
    },
    readPod: (pod, signal) => {
      apiCalls++;
      return api.readPod(pod, signal);
    },
  };
  const config = { bindGraceMs: 60_000, expireMs: 300_000 };
  const fromApi = new NodeLocks({ api: counted, config });
  const fromStore = new NodeLocks({ api: counted, view: cache.lockView, config });
  const pass = async (locks: NodeLocks, expectLocked: number) => {
    for (let waited = 0; cache.lockedNodes().length !== expectLocked && waited < 30_000; waited += 100)
      await new Promise((r) => setTimeout(r, 100));
    apiCalls = 0;
    const started = performance.now();
    const report = await sweepOnce({ targets: cache, locks, concurrency: 16 });
    return { ms: performance.now() - started, report, apiCalls };
  };

  await lockAll('holder');
  const baseline = await pass(fromApi, NODES);
  const held = await pass(fromStore, NODES);
  await lockAll('gone');
  const releasable = await pass(fromStore, NODES);
  const row = (label: string, result: Awaited<ReturnType<typeof pass>>, extra: string) =>
    `  ${label.padEnd(52)} ${(result.ms / 1000).toFixed(3)} s, ${result.apiCalls} API calls, ${extra} (${(result.ms / baseline.ms).toFixed(3)}x baseline)`;
  console.log(`sweep pass over ${NODES} locked nodes (16 at a time), default interval 30 s:`);
  console.log(row('all held, classified from API reads (baseline)', baseline, `kept ${baseline.report.kept}`));
  console.log(row('all held, classified from the state store', held, `kept ${held.report.kept}`));
  console.log(
    row(
      'all releasable (owner gone), confirmed by API reads',
      releasable,
      `released ${releasable.report.released.length}`,
    ),
  );
  await cache.stop();
} finally {
  await plane.stop();
}
