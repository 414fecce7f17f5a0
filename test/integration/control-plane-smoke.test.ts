import { PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { httpStatusOf } from '../../src/kube/errors.js';
import { simulatedGpuNode } from '../../src/local/simulated-gpu-node.js';
import { testCluster, uniqueName } from '../support/test-cluster.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

function unscheduledPod(name: string): V1Pod {
  // A scheduler name nobody serves, so only the test decides where the pod goes.
  return {
    metadata: { name },
    spec: { schedulerName: 'nobody-schedules-this', containers: [{ name: 'main', image: 'registry.invalid/none:1' }] },
  };
}

describe('control plane smoke (real kube-apiserver + etcd)', () => {
  it('creates a kubelet-less GPU node with allocatable nvidia.com/gpu and pods, and no not-ready taint', async () => {
    const { core } = testCluster();
    const name = uniqueName('gpu-node');
    await core.createNode({ body: simulatedGpuNode({ name, gpus: 4 }) });

    const node = await core.readNode({ name });
    expect(node.status?.allocatable?.['nvidia.com/gpu']).to.equal('4');
    expect(node.status?.allocatable?.pods).to.equal('110');
    expect(node.spec?.taints ?? []).to.deep.equal([]);
    expect(node.status?.conditions?.find((c) => c.type === 'Ready')?.status).to.equal('True');
  });

  it('binds a pod to a node through pods/binding, with the pod UID as precondition', async () => {
    const { core, namespace } = testCluster();
    const nodeName = uniqueName('gpu-node');
    await core.createNode({ body: simulatedGpuNode({ name: nodeName, gpus: 2 }) });
    const pod = await core.createNamespacedPod({ namespace, body: unscheduledPod('bind-me') });

    await core.createNamespacedPodBinding({
      name: 'bind-me',
      namespace,
      body: { metadata: { name: 'bind-me', uid: pod.metadata?.uid }, target: { apiVersion: 'v1', kind: 'Node', name: nodeName } },
    });

    const bound = await core.readNamespacedPod({ name: 'bind-me', namespace });
    expect(bound.spec?.nodeName).to.equal(nodeName);
    expect(bound.status?.conditions?.find((c) => c.type === 'PodScheduled')?.status).to.equal('True');
  });

  it('refuses a binding whose UID precondition names another incarnation of the pod', async () => {
    const { core, namespace } = testCluster();
    const nodeName = uniqueName('gpu-node');
    await core.createNode({ body: simulatedGpuNode({ name: nodeName, gpus: 2 }) });
    await core.createNamespacedPod({ namespace, body: unscheduledPod('recreated') });

    const error: unknown = await core
      .createNamespacedPodBinding({
        name: 'recreated',
        namespace,
        body: { metadata: { name: 'recreated', uid: '00000000-0000-0000-0000-000000000000' }, target: { kind: 'Node', name: nodeName } },
      })
      .then(() => undefined, (caught: unknown) => caught);

    expect(httpStatusOf(error)).to.equal(409);
    const pod = await core.readNamespacedPod({ name: 'recreated', namespace });
    expect(pod.spec?.nodeName).to.equal(undefined);
  });

  it('rejects a merge patch carrying a stale resourceVersion with 409 Conflict and keeps the newer write', async () => {
    const { core } = testCluster();
    const name = uniqueName('gpu-node');
    await core.createNode({ body: simulatedGpuNode({ name, gpus: 1 }) });
    const staleVersion = (await core.readNode({ name })).metadata?.resourceVersion;

    await core.patchNode(
      { name, body: { metadata: { resourceVersion: staleVersion, annotations: { 'hami.io/mutex.lock': 'first-writer' } } } },
      mergePatch,
    );
    const error: unknown = await core
      .patchNode({ name, body: { metadata: { resourceVersion: staleVersion, annotations: { 'hami.io/mutex.lock': 'second-writer' } } } }, mergePatch)
      .then(() => undefined, (caught: unknown) => caught);

    expect(httpStatusOf(error)).to.equal(409);
    const node = await core.readNode({ name });
    expect(node.metadata?.annotations?.['hami.io/mutex.lock']).to.equal('first-writer');
  });
});
