import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PatchStrategy, setHeaderOptions, type CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import type { GpuUse } from '../../src/devices/usage.js';
import { simulatedGpuNode } from '../../src/local/simulated-gpu-node.js';
import type { RunningServer } from '../../src/serve/start-server.js';
import { eventually, notYet, testCluster, uniqueName } from '../support/test-cluster.js';
import { startTestServer } from '../support/test-server.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

const gpuContainer = (name: string, memoryMiB: number) => ({
  name,
  image: 'registry.invalid/none:1',
  resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': String(memoryMiB), 'nvidia.com/gpucores': '25' } },
});

/**
 * Places a pod the way HAMi v2.10 did, on the real apiserver: the Filter merge patch (annotations
 * and the hami.io/vgpu-node label, no resourceVersion), the Bind patch and Binding, then the device
 * plugin's rewrite of to-allocate and bind-phase success. `allocated` is the value HAMi wrote.
 */
async function placeAsHamiV210(
  core: CoreV1Api,
  namespace: string,
  node: string,
  body: V1Pod,
  allocated: string,
  consumed: string,
): Promise<void> {
  const name = body.metadata?.name ?? '';
  const created = await core.createNamespacedPod({ namespace, body });
  await core.patchNamespacedPod(
    {
      name,
      namespace,
      body: {
        metadata: {
          annotations: {
            'hami.io/vgpu-node': node,
            'hami.io/vgpu-time': '1787293239',
            'hami.io/vgpu-devices-to-allocate': allocated,
            'hami.io/vgpu-devices-allocated': allocated,
          },
          labels: { 'hami.io/vgpu-node': node },
        },
      },
    },
    mergePatch,
  );
  await core.patchNamespacedPod(
    {
      name,
      namespace,
      body: { metadata: { annotations: { 'hami.io/bind-phase': 'allocating', 'hami.io/bind-time': '1787293240' } } },
    },
    mergePatch,
  );
  await core.createNamespacedPodBinding({
    name,
    namespace,
    body: { metadata: { name, uid: created.metadata?.uid ?? '' }, target: { kind: 'Node', name: node } },
  });
  await core.patchNamespacedPod(
    {
      name,
      namespace,
      body: {
        metadata: { annotations: { 'hami.io/vgpu-devices-to-allocate': consumed, 'hami.io/bind-phase': 'success' } },
      },
    },
    mergePatch,
  );
}

/** What kubelet reports once the pod's init containers have all exited 0 and its app containers run. */
async function initContainersDone(
  core: CoreV1Api,
  namespace: string,
  name: string,
  initNames: string[],
): Promise<void> {
  const terminated = { exitCode: 0, reason: 'Completed', startedAt: new Date(), finishedAt: new Date() };
  await core.patchNamespacedPodStatus(
    {
      name,
      namespace,
      body: {
        status: {
          phase: 'Running',
          initContainerStatuses: initNames.map((initName) => ({
            name: initName,
            image: 'registry.invalid/none:1',
            imageID: '',
            ready: true,
            restartCount: 0,
            state: { terminated },
          })),
        },
      },
    },
    mergePatch,
  );
}

const describeUsage = (usage: ReadonlyMap<string, GpuUse>): string =>
  JSON.stringify([...usage].sort(([a], [b]) => a.localeCompare(b)));

describe("pods HAMi v2.10 placed before the switch: vgpu-warden counts what HAMi's device plugin allocated (real apiserver)", function () {
  this.timeout(120_000);
  let server: RunningServer | undefined;
  const certDir = mkdtempSync(join(tmpdir(), 'hami-v210-certs-'));

  after(async () => {
    await server?.stop();
    rmSync(certDir, { recursive: true, force: true });
  });

  it('counts both app containers of a pod written without its init segment (HAMi #2899) and values HAMi reads leniently', async () => {
    const { core, namespace, controlPlane } = testCluster();
    const node = uniqueName('hami-v210');
    await core.createNode({ body: simulatedGpuNode({ name: node, gpus: 3 }) });
    const [gpu0, gpu1, gpu2] = [0, 1, 2].map((index) => `GPU-${node}-${index}`);

    // HAMi #2899: one GPU-less init container, two GPU app containers; the empty init segment missing.
    await placeAsHamiV210(
      core,
      namespace,
      node,
      {
        metadata: { name: 'issue-2899' },
        spec: {
          schedulerName: 'nobody',
          initContainers: [{ name: 'prepare', image: 'registry.invalid/none:1' }],
          containers: [gpuContainer('app-0', 2500), gpuContainer('app-1', 2500)],
        },
      },
      `${gpu0},NVIDIA,2500,25:;${gpu1},NVIDIA,2500,25:;`,
      ';;;',
    );
    await initContainersDone(core, namespace, 'issue-2899', ['prepare']);

    // A value without its terminators and with a fifth field: HAMi's decoder reads it, so its plugin allocated it.
    await placeAsHamiV210(
      core,
      namespace,
      node,
      {
        metadata: { name: 'lenient' },
        spec: { schedulerName: 'nobody', containers: [gpuContainer('main', 3000)] },
      },
      `${gpu2},NVIDIA,3000,30,extra`,
      ';',
    );

    // vgpu-warden starts after HAMi placed them, as in a migration.
    ({ server } = await startTestServer(controlPlane, certDir));
    const running = server;
    const expected = new Map<string, GpuUse>([
      [gpu0 ?? '', { slots: 1, memoryMiB: 2500, cores: 25 }],
      [gpu1 ?? '', { slots: 1, memoryMiB: 2500, cores: 25 }],
      [gpu2 ?? '', { slots: 1, memoryMiB: 3000, cores: 30 }],
    ]);
    await eventually(
      `vgpu-warden to count ${describeUsage(expected)} on ${node}`,
      () => {
        const usage = running.cache.usageOn(node);
        return Promise.resolve(
          describeUsage(usage) === describeUsage(expected) ? true : notYet(`counted ${describeUsage(usage)}`),
        );
      },
      20_000,
      50,
    );
    // Readable: neither pod is counted as taking the whole node.
    expect(running.cache.unreadableAllocations().filter((entry) => entry.node === node)).to.deep.equal([]);
  });
});
