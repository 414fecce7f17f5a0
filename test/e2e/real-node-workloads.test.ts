import { expect } from 'chai';
import { decodePodDevices, wire } from '@vgpu-warden/stand-ins/hami-plugin';
import { expectOwnGpus, nodeUnlocked, RealGpuNodes, realGpuPod, runningPod } from '../support/real-gpu-nodes.js';
import { eventually, notYet, sharedControlPlane, testCluster } from '../support/test-cluster.js';

/**
 * Workloads whose outcome depends on what kubelet's device manager does, on a real node (kubelet
 * + containerd, the HAMi stand-in over gRPC): a pod whose init container and app container
 * both ask for a GPU (kubelet calls Allocate for each, init first, and HAMi's annotation has one
 * segment per container in that order), and a burst of 20 GPU pods onto one node, whose binds
 * the node lock serialises behind each Allocate.
 */
describe('GPU workloads on a real node', function () {
  this.timeout(300_000);
  let cluster: RealGpuNodes;
  let node: string;

  before(async function () {
    this.timeout(180_000);
    cluster = new RealGpuNodes(sharedControlPlane(), { nodes: 1, gpusPerNode: 2 });
    await cluster.start();
    node = cluster.nodeNames[0] ?? '';
  });

  after(async function () {
    this.timeout(120_000);
    await cluster.stop();
  });

  it('an init container and the app container each get the GPU of their own segment of the allocation', async () => {
    const { core, namespace } = testCluster();
    const pod = realGpuPod('with-init', cluster.group, {
      'nvidia.com/gpu': '1',
      'nvidia.com/gpumem': '2000',
      'nvidia.com/gpucores': '20',
    });
    const initLimits = { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1000', 'nvidia.com/gpucores': '10' };
    pod.spec = {
      ...pod.spec,
      containers: pod.spec?.containers ?? [],
      initContainers: [
        {
          name: 'init',
          image: pod.spec?.containers[0]?.image ?? '',
          imagePullPolicy: 'Never',
          command: ['sh', '-c', 'env | sort'],
          resources: { limits: initLimits },
        },
      ],
    };
    await core.createNamespacedPod({ namespace, body: pod });
    const running = await runningPod('with-init', 60_000);
    const segments = decodePodDevices(running.metadata?.annotations?.['hami.io/vgpu-devices-allocated'] ?? '');
    const [initDevices = [], mainDevices = []] = segments;
    expect(
      initDevices.map((device) => device.usedMem),
      'init first in the annotation',
    ).to.deep.equal([1000]);
    expect(mainDevices.map((device) => device.usedMem)).to.deep.equal([2000]);

    await expectOwnGpus(running, { container: 'init', segment: 0 });
    await expectOwnGpus(running, { container: 'main', segment: 1 });
    expect(running.metadata?.annotations?.[wire.BIND_PHASE]).to.equal('success');
    await nodeUnlocked(core, node);
  });

  it("a burst of 20 GPU pods onto one real node: all Running, each with its own GPUs, against the serial floor of one pod's bind-to-Allocate time", async () => {
    const { core, namespace } = testCluster();
    const limits = { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1000', 'nvidia.com/gpucores': '10' };
    // One pod's cycle, alone: the time the node lock is held per pod (bound -> allocated).
    const singles: number[] = [];
    for (let run = 0; run < 3; run++) {
      const name = `single-${run}`;
      await core.createNamespacedPod({ namespace, body: realGpuPod(name, cluster.group, limits) });
      const bound = await eventually(
        `${name} bound`,
        async () => {
          const pod = await core.readNamespacedPod({ namespace, name });
          return pod.spec?.nodeName !== undefined ? Date.now() : notYet('unbound');
        },
        20_000,
        10,
      );
      await eventually(
        `${name} allocated`,
        async () => {
          const pod = await core.readNamespacedPod({ namespace, name });
          return pod.metadata?.annotations?.[wire.BIND_PHASE] === 'success' ? true : notYet('allocating');
        },
        20_000,
        10,
      );
      singles.push(Date.now() - bound);
      await core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 });
    }
    await eventually(
      'the singles gone',
      async () => ((await core.listNamespacedPod({ namespace })).items.length === 0 ? true : notYet('pods left')),
      30_000,
      100,
    );
    await cluster.allocatable(node, 20);

    const names = Array.from({ length: 20 }, (_, index) => `burst-${index}`);
    const started = Date.now();
    await Promise.all(
      names.map((name) => core.createNamespacedPod({ namespace, body: realGpuPod(name, cluster.group, limits) })),
    );
    // Allocated (the lock's part: binds one at a time per node) apart from Running (containerd's part:
    // 20 sandboxes and containers started on two cores), so the ratio says which one costs the time.
    const allocated = await eventually(
      'all 20 allocated',
      async () => {
        const listed = (await core.listNamespacedPod({ namespace })).items.filter(
          (pod) => pod.metadata?.annotations?.[wire.BIND_PHASE] === 'success',
        );
        return listed.length === names.length
          ? Date.now() - started
          : notYet(`${listed.length} of ${names.length} allocated`);
      },
      180_000,
      20,
    );
    const pods = [];
    for (const name of names) pods.push(await runningPod(name, 180_000));
    const total = Date.now() - started;
    const single = [...singles].sort((a, b) => a - b)[1] ?? 0;
    process.stdout.write(
      `      20-pod burst -> all allocated: ${allocated} ms, all Running: ${total} ms; one pod bound -> allocated: median ${single} ms (3 runs); serial floor 20 x ${single} = ${20 * single} ms; ratio allocated ${(allocated / (20 * single)).toFixed(2)}, Running ${(total / (20 * single)).toFixed(2)}\n`,
    );
    for (const pod of pods) await expectOwnGpus(pod);
    const perGpu = new Map<string, number>();
    for (const pod of pods)
      for (const device of decodePodDevices(pod.metadata?.annotations?.[wire.DEVICES_ALLOCATED] ?? '').flat())
        perGpu.set(device.uuid, (perGpu.get(device.uuid) ?? 0) + device.usedCores);
    for (const [uuid, cores] of perGpu) expect(cores, `cores on ${uuid}`).to.be.at.most(100);
    await nodeUnlocked(core, node);
  });
});
