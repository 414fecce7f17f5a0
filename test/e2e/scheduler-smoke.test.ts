import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import type { SchedulerHandle } from '../../src/local/control-plane.js';
import { ReadinessError } from '../../src/local/wait-until-ready.js';
import { simulatedGpuNode } from '../../src/local/simulated-gpu-node.js';
import { podStory } from '../support/observations.js';
import { eventually, notYet, sharedControlPlane, testCluster, uniqueName } from '../support/test-cluster.js';

function podOn(nodeName: string, name: string, gpus?: number): V1Pod {
  return {
    metadata: { name },
    spec: {
      // Pin to this test's node: nodes are cluster-wide and other tests add their own.
      nodeSelector: { 'kubernetes.io/hostname': nodeName },
      containers: [
        {
          name: 'main',
          image: 'registry.invalid/none:1',
          ...(gpus === undefined ? {} : { resources: { limits: { 'nvidia.com/gpu': String(gpus) } } }),
        },
      ],
    },
  };
}

/**
 * Simulated nodes: the smoke test checks that the control plane built from Go modules schedules at
 * all, onto Node objects with no kubelet behind them; nothing here depends on kubelet.
 */
describe('kube-scheduler smoke (real kube-scheduler, apiserver, etcd)', function () {
  let scheduler: SchedulerHandle | undefined;

  before(async function () {
    this.timeout(120_000);
    scheduler = await sharedControlPlane().startScheduler({ profiles: [{ schedulerName: 'default-scheduler' }] });
  });

  after(async function () {
    this.timeout(30_000);
    await scheduler?.stop();
  });

  it('schedules a plain pod onto a kubelet-less node', async () => {
    const { core, namespace } = testCluster();
    const nodeName = uniqueName('gpu-node');
    await core.createNode({ body: simulatedGpuNode({ name: nodeName, gpus: 4 }) });
    await core.createNamespacedPod({ namespace, body: podOn(nodeName, 'plain') });

    const placedOn = await eventually('the scheduler to bind the pod', async () => {
      const pod = await core.readNamespacedPod({ name: 'plain', namespace });
      return pod.spec?.nodeName ?? notYet(await podStory(core, namespace, 'plain', pod));
    });
    expect(placedOn).to.equal(nodeName);
  });

  it("fails a scheduler start with kube-scheduler's own last log lines", async () => {
    const error: unknown = await sharedControlPlane()
      .startScheduler({ profiles: [{ schedulerName: 'broken' }], notAField: true })
      .then(
        () => undefined,
        (caught: unknown) => caught,
      );

    expect(error).to.be.instanceOf(ReadinessError);
    expect((error as Error).message)
      .to.match(/kube-scheduler:\d+ exited/)
      .and.include('notAField');
  });

  it('leaves a pod Unschedulable when the node has too few nvidia.com/gpu', async () => {
    const { core, namespace } = testCluster();
    const nodeName = uniqueName('gpu-node');
    await core.createNode({ body: simulatedGpuNode({ name: nodeName, gpus: 1 }) });
    await core.createNamespacedPod({ namespace, body: podOn(nodeName, 'too-big', 2) });

    const condition = await eventually('PodScheduled=False', async () => {
      const pod = await core.readNamespacedPod({ name: 'too-big', namespace });
      const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
      return scheduled?.status === 'False'
        ? scheduled
        : notYet(`PodScheduled ${scheduled?.status ?? 'not set'}; ${await podStory(core, namespace, 'too-big', pod)}`);
    });
    expect(condition.reason).to.equal('Unschedulable');
    expect(condition.message).to.include('nvidia.com/gpu');
  });
});
