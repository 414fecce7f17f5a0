import { EventEmitter } from 'node:events';
import { PatchStrategy, setHeaderOptions, type CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { simulatedGpuNode } from '../../src/local/simulated-gpu-node.js';
import { HamiDevicePlugin, pluginApiFromCore, wire, type AllocateAction } from '@vgpu-warden/stand-ins/hami-plugin';
import { KubeletSim, type KubeletSimOptions } from '../support/kubelet-sim/index.js';
import { describePod } from '../support/observations.js';
import { eventually, notYet, testCluster, uniqueName, wakeOn } from '../support/test-cluster.js';

/**
 * The kubelet simulator and the HAMi stand-in against a real apiserver, without vgpu-warden: the
 * test plays the scheduler's part (lock, then a Binding carrying HAMi's annotations), so what is
 * checked is the simulators' own behaviour on the wire.
 */
describe('kubelet simulator + HAMi stand-in on a real apiserver', function () {
  this.timeout(60_000);

  let node: string;
  let plugin: HamiDevicePlugin;
  let kubelet: KubeletSim | undefined;
  let action: AllocateAction;
  // Emits 'record' on each step the kubelet notes, to wake the waits below: most steps (running,
  // terminated) are noted after their status write, the others are caught by the poll.
  const recorded = new EventEmitter();

  async function start(core: CoreV1Api, options: Partial<KubeletSimOptions> = {}): Promise<KubeletSim> {
    const { kubeConfig } = testCluster();
    plugin = new HamiDevicePlugin({ api: pluginApiFromCore(core), behaviour: () => action });
    kubelet = new KubeletSim({
      kubeConfig,
      core,
      plugin,
      servesNode: (name) => name === node,
      onRecord: () => {
        recorded.emit('record');
      },
      ...options,
    });
    await kubelet.start();
    return kubelet;
  }

  beforeEach(async () => {
    const { core } = testCluster();
    node = uniqueName('sim-node');
    action = { kind: 'allocate' };
    // One GPU split 2 ways: kubelet sees 2 nvidia.com/gpu device IDs.
    await core.createNode({ body: simulatedGpuNode({ name: node, gpus: 1, splitCount: 2 }) });
  });

  afterEach(async () => {
    await kubelet?.stop();
    kubelet = undefined;
    plugin.stop();
    await testCluster()
      .core.deleteNode({ name: node })
      .catch(() => undefined);
  });

  /** What vgpu-warden's bind does: lock the node for the pod, then a Binding carrying the annotations. */
  async function bindAsScheduler(
    core: CoreV1Api,
    namespace: string,
    name: string,
    gpus = 1,
    toAllocate = `GPU-${node}-0,NVIDIA,1000,10:;`,
  ): Promise<V1Pod> {
    const created = await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name },
        spec: {
          schedulerName: 'nobody',
          containers: [{ name: 'main', image: 'cuda', resources: { limits: { 'nvidia.com/gpu': String(gpus) } } }],
        },
      },
    });
    await core.patchNode(
      {
        name: node,
        body: {
          metadata: {
            annotations: {
              [wire.NODE_LOCK]: `${new Date().toISOString().replace(/\.\d+Z$/, 'Z')},${namespace},${name}`,
            },
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await core.createNamespacedPodBinding({
      name,
      namespace,
      body: {
        metadata: {
          name,
          uid: created.metadata?.uid,
          annotations: {
            [wire.DEVICES_TO_ALLOCATE]: toAllocate,
            [wire.BIND_PHASE]: 'allocating',
            [wire.BIND_TIME]: '1',
            [wire.VGPU_NODE]: node,
          },
        },
        target: { kind: 'Node', name: node },
      },
    });
    return created;
  }

  const lockOf = async (core: CoreV1Api) =>
    (await core.readNode({ name: node })).metadata?.annotations?.[wire.NODE_LOCK];
  /** The kubelet's steps for the pod so far, for a wait that did not see what it waited for. */
  const kubeletSaw = (namespace: string, name: string): string =>
    `kubelet records: ${
      kubelet
        ?.recordsOf(namespace, name)
        .map((record) => record.kind)
        .join(', ') || 'none'
    }`;
  const phaseOf = (core: CoreV1Api, namespace: string, name: string, phase: string) =>
    eventually(
      `${name} ${phase}`,
      async () => {
        const pod = await core.readNamespacedPod({ name, namespace });
        return pod.status?.phase === phase
          ? pod
          : notYet(`${name}: ${describePod(pod)}; ${kubeletSaw(namespace, name)}`);
      },
      20_000,
      50,
      wakeOn(recorded, 'record'),
    );

  it('admits a bound GPU pod: Allocate through the lock, annotation consumed, bind-phase success, lock gone, pod Running', async () => {
    const { core, namespace } = testCluster();
    await start(core);
    await bindAsScheduler(core, namespace, 'gpu');
    const pod = await phaseOf(core, namespace, 'gpu', 'Running');
    expect(pod.metadata?.annotations?.[wire.DEVICES_TO_ALLOCATE]).to.equal(';;');
    expect(pod.metadata?.annotations?.[wire.BIND_PHASE]).to.equal('success');
    expect(await lockOf(core)).to.equal(undefined);
    expect(pod.status?.conditions?.map((condition) => condition.type)).to.include.members([
      'PodScheduled',
      'Ready',
      'ContainersReady',
    ]);
    expect(pod.status?.containerStatuses?.[0]?.state?.running).to.not.equal(undefined);
    expect(
      plugin.records.map((record) => [
        record.outcome,
        record.admitted.name,
        record.resolvedTo?.name,
        record.deviceIds.length,
      ]),
    ).to.deep.equal([['allocated', 'gpu', 'gpu', 1]]);
  });

  it('a failed Allocate: pod Failed with UnexpectedAdmissionError, bind-phase failed, lock released', async () => {
    const { core, namespace } = testCluster();
    action = { kind: 'fail', message: 'nvml: driver not loaded' };
    await start(core);
    await bindAsScheduler(core, namespace, 'doomed');
    const pod = await phaseOf(core, namespace, 'doomed', 'Failed');
    expect(pod.status?.reason).to.equal('UnexpectedAdmissionError');
    expect(pod.status?.message).to.equal(
      'Pod was rejected: Allocate failed due to rpc error: code = Unknown desc = nvml: driver not loaded, which is unexpected',
    );
    expect(pod.metadata?.annotations?.[wire.BIND_PHASE]).to.equal('failed');
    expect(await lockOf(core)).to.equal(undefined);
  });

  it("retries a status write the apiserver refused (kubelet's status manager does): a pod rejected meanwhile still ends Failed", async () => {
    const { core, namespace } = testCluster();
    action = { kind: 'fail', message: 'nvml: driver not loaded' };
    // The apiserver answers the first two status writes with a 503, as during a restart.
    let refusals = 2;
    const flaky = new Proxy(core, {
      get(target, property, receiver) {
        const value: unknown = Reflect.get(target, property, receiver);
        if (property !== 'patchNamespacedPodStatus' || typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          if (refusals > 0) {
            refusals -= 1;
            return Promise.reject(Object.assign(new Error('HTTP-Code: 503 Service Unavailable'), { code: 503 }));
          }
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    await start(flaky);
    await bindAsScheduler(core, namespace, 'unlucky');
    const pod = await phaseOf(core, namespace, 'unlucky', 'Failed');
    expect(pod.status?.reason).to.equal('UnexpectedAdmissionError');
    expect(refusals).to.equal(0);
  });

  it("more nvidia.com/gpu than the plugin advertises: kubelet's device manager rejects the pod, Allocate is never called", async () => {
    const { core, namespace } = testCluster();
    await start(core);
    await bindAsScheduler(core, namespace, 'greedy', 3);
    const pod = await phaseOf(core, namespace, 'greedy', 'Failed');
    expect(pod.status?.message).to.include(
      'requested number of devices unavailable for nvidia.com/gpu. Requested: 3, Available: 2',
    );
    expect(plugin.records).to.deep.equal([]);
    expect(await lockOf(core), 'no Allocate, so the lock stays for vgpu-warden to judge').to.not.equal(undefined);
  });

  it('finishes a graceful delete (containers terminated, then DELETE with grace 0) and frees the devices for the next pod', async () => {
    const { core, namespace } = testCluster();
    const sim = await start(core);
    await bindAsScheduler(core, namespace, 'one', 2, `GPU-${node}-0,NVIDIA,1000,10:GPU-${node}-0,NVIDIA,1000,10:;`);
    await phaseOf(core, namespace, 'one', 'Running');
    await core.deleteNamespacedPod({ name: 'one', namespace });
    await eventually(
      'one to be gone',
      async () => {
        const pods = (await core.listNamespacedPod({ namespace })).items;
        return pods.length === 0
          ? true
          : notYet(
              `${pods.map((pod) => `${pod.metadata?.name ?? '?'}: ${describePod(pod)}`).join(' | ')}; ${kubeletSaw(namespace, 'one')}`,
            );
      },
      20_000,
      50,
      wakeOn(recorded, 'record'),
    );
    expect(sim.recordsOf(namespace, 'one').map((record) => record.kind)).to.deep.equal([
      'bound',
      'admitting',
      'admitted',
      'running',
      'terminating',
      'terminated',
      'deleted',
    ]);
    // Both device IDs were held by `one`: the next pod gets them only because they were freed.
    await bindAsScheduler(core, namespace, 'two', 2, `GPU-${node}-0,NVIDIA,1000,10:GPU-${node}-0,NVIDIA,1000,10:;`);
    await phaseOf(core, namespace, 'two', 'Running');
  });

  it('with finishGracefulDeletes off a plain DELETE only sets deletionTimestamp, as on a node without a kubelet', async () => {
    const { core, namespace } = testCluster();
    await start(core, { finishGracefulDeletes: false });
    await bindAsScheduler(core, namespace, 'lingers');
    await phaseOf(core, namespace, 'lingers', 'Running');
    await core.deleteNamespacedPod({ name: 'lingers', namespace });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const pod = await core.readNamespacedPod({ name: 'lingers', namespace });
    expect(pod.metadata?.deletionTimestamp).to.not.equal(undefined);
    expect(pod.status?.phase).to.equal('Running');
    await core.deleteNamespacedPod({ name: 'lingers', namespace, gracePeriodSeconds: 0 });
  });

  it('admits in its own order: held pods wait for admitNow, latest-first takes the later-bound one first', async () => {
    const { core, namespace } = testCluster();
    const sim = await start(core, { order: 'latest-first', admitDelayMs: () => 'never' });
    await bindAsScheduler(core, namespace, 'early', 0);
    await bindAsScheduler(core, namespace, 'late', 0);
    await eventually(
      'both seen bound',
      () => {
        const bound = sim.records.filter((record) => record.kind === 'bound').map((record) => record.pod.name);
        return Promise.resolve(bound.length === 2 ? true : notYet(`seen bound: [${bound.join(', ')}]`));
      },
      10_000,
      20,
      wakeOn(recorded, 'record'),
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(
      sim.records.some((record) => record.kind === 'admitting'),
      'held pods are not admitted',
    ).to.equal(false);
    // Both become due in one tick; latest-first picks `late` although `early` was released first.
    expect([sim.admitNow(namespace, 'early'), sim.admitNow(namespace, 'late')]).to.deep.equal([true, true]);
    await phaseOf(core, namespace, 'early', 'Running');
    await phaseOf(core, namespace, 'late', 'Running');
    expect(sim.records.filter((record) => record.kind === 'admitting').map((record) => record.pod.name)).to.deep.equal([
      'late',
      'early',
    ]);
  });
});
