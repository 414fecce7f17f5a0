// One busy node: 20 GPU pods that all fit on one node are created at once; the real kube-scheduler
// sends all 20 binds to vgpu-warden, whose per-node FIFO hands the node lock from one pod to the
// next as the simulated device plugin finishes each Allocate. Time from the first create until all
// 20 are allocated, against the serial floor (20 x the simulated Allocate time: the node lock lets
// only one pod allocate at a time, so no design can beat it). Rounds with a 0 ms Allocate in the
// same run show the pure hand-over cost per pod.
//   npm run bench:one-node -- [rounds]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { ClusterCache } from '../src/cluster/cluster-cache.js';
import { startServer } from '../src/serve/start-server.js';
import { loadConfig } from '../src/config/load.js';
import { kubeSchedulerConfiguration } from '../src/extender/scheduler-config.js';
import { loadKubeConfig } from '../src/kube/client.js';
import { KubeNodeLockApi } from '../src/lock/kube-node-lock-api.js';
import { ControlPlane } from '../src/local/control-plane.js';
import { DevicePluginSimulator } from '../src/local/device-plugin-simulator.js';
import { findFreePort } from '../src/local/free-port.js';
import { locateBinaries } from '../src/local/k8s-binaries.js';
import { ShutdownHooks } from '../src/local/shutdown-hooks.js';
import { simulatedGpuNode } from '../src/local/simulated-gpu-node.js';
import { NODE_LOCK_ANNOTATION } from '../src/hami/wire.js';
import { NodeLocks } from '../src/lock/node-locks.js';
import { createLogger } from '../src/telemetry/logger.js';
import { kubeSources } from '../src/cluster/kube-list-watch.js';

const PODS = 20;
const ALLOCATE_MS = 100;
const rounds = Number(process.argv[2] ?? 3);
const repoRoot = resolve(import.meta.dirname, '..');
const node = 'busy-node';

const plane = await ControlPlane.start({
  binaries: locateBinaries({ repoRoot, env: process.env }),
  shutdownHooks: new ShutdownHooks(process),
});
const certDir = mkdtempSync(join(tmpdir(), 'bench-certs-'));
try {
  const kubeConfig = loadKubeConfig(plane.kubeconfigPath);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: 'bench' } } });
  // 8 GPUs x 10 slots: room for all 20 pods on the one node.
  await core.createNode({ body: simulatedGpuNode({ name: node, gpus: 8 }) });

  const extenderPort = await findFreePort();
  const server = await startServer(
    loadConfig({
      KUBECONFIG: plane.kubeconfigPath,
      CERT_DIR: certDir,
      WEBHOOK_HOST: '127.0.0.1',
      WEBHOOK_PORT: String(await findFreePort()),
      EXTENDER_PORT: String(extenderPort),
      CERT_HOSTS: '127.0.0.1',
      METRICS_PORT: String(await findFreePort()),
    }),
    createLogger('warn'),
  );
  await server.cache.waitForSync(60_000);
  const caPem = server.keeper.current()?.caBundlePem;
  const scheduler = await plane.startScheduler(
    kubeSchedulerConfiguration({
      schedulerName: 'hami-scheduler',
      extenderUrl: `https://127.0.0.1:${extenderPort}`,
      ...(caPem ? { caPem } : {}),
    }),
  );

  const simulatorCache = new ClusterCache({ sources: kubeSources(kubeConfig) });
  await simulatorCache.start();
  const locks = new NodeLocks({ api: new KubeNodeLockApi(core), config: { bindGraceMs: 60_000, expireMs: 300_000 } });

  // One round: create PODS pods at once, wait until the simulator has allocated all of them.
  const round = async (label: string, allocateMs: number): Promise<number> => {
    const simulator = new DevicePluginSimulator({
      core,
      cache: simulatorCache,
      locks,
      allocationDelayMs: allocateMs,
      isSimulated: (name) => name === node,
    });
    simulator.start();
    try {
      const names = Array.from({ length: PODS }, (_, index) => `${label}-${index}`);
      const started = performance.now();
      await Promise.all(
        names.map((name) =>
          core.createNamespacedPod({
            namespace: 'bench',
            body: {
              metadata: { name },
              spec: {
                schedulerName: 'hami-scheduler',
                containers: [
                  {
                    name: 'c',
                    image: 'x',
                    resources: {
                      limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1000', 'nvidia.com/gpucores': '5' },
                    },
                  },
                ],
              },
            },
          }),
        ),
      );
      while (simulator.allocated.length < PODS) {
        if (performance.now() - started > 120_000)
          throw new Error(`${label}: ${simulator.allocated.length}/${PODS} allocated after 120 s`);
        await new Promise((done) => setTimeout(done, 2));
      }
      return performance.now() - started;
    } finally {
      simulator.stop();
      await core.deleteCollectionNamespacedPod({ namespace: 'bench', gracePeriodSeconds: 0 });
      // The next round starts on a free node with no pods left in the store.
      for (;;) {
        const current = await core.readNode({ name: node });
        const left = (await core.listNamespacedPod({ namespace: 'bench' })).items.length;
        if (
          current.metadata?.annotations?.[NODE_LOCK_ANNOTATION] === undefined &&
          left === 0 &&
          server.cache.usageOn(node).size === 0
        )
          break;
        await new Promise((done) => setTimeout(done, 50));
      }
    }
  };

  await round('warmup', 0);
  const zero: number[] = [];
  const real: number[] = [];
  for (let index = 0; index < rounds; index++) {
    zero.push(await round(`zero-${index}`, 0));
    real.push(await round(`alloc-${index}`, ALLOCATE_MS));
  }
  const floor = PODS * ALLOCATE_MS;
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
  console.log(`${PODS} GPU pods created at once for one node, through the real kube-scheduler, ${rounds} rounds each:`);
  console.log(
    `  0 ms Allocate (hand-over cost only)    ${zero.map((ms) => ms.toFixed(0)).join(' / ')} ms  median ${median(zero).toFixed(0)} ms  (${(median(zero) / PODS).toFixed(1)} ms per pod)`,
  );
  console.log(
    `  ${ALLOCATE_MS} ms Allocate                        ${real.map((ms) => ms.toFixed(0)).join(' / ')} ms  median ${median(real).toFixed(0)} ms`,
  );
  console.log(
    `  serial floor ${PODS} x ${ALLOCATE_MS} ms = ${floor} ms  ->  ${(median(real) / floor).toFixed(2)}x the floor`,
  );
  await scheduler.stop();
  await simulatorCache.stop();
  await server.stop();
} finally {
  rmSync(certDir, { recursive: true, force: true });
  await plane.stop();
}
