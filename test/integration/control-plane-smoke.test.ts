import { PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { readdirSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { expect } from 'chai';
import { httpStatusOf } from '../../src/kube/errors.js';
import { ControlPlane } from '../../src/local/control-plane.js';
import { findFreePorts } from '../../src/local/free-port.js';
import { locateBinaries } from '../../src/local/k8s-binaries.js';
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
      body: {
        metadata: { name: 'bind-me', uid: pod.metadata?.uid },
        target: { apiVersion: 'v1', kind: 'Node', name: nodeName },
      },
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
        body: {
          metadata: { name: 'recreated', uid: '00000000-0000-0000-0000-000000000000' },
          target: { kind: 'Node', name: nodeName },
        },
      })
      .then(
        () => undefined,
        (caught: unknown) => caught,
      );

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
      {
        name,
        body: { metadata: { resourceVersion: staleVersion, annotations: { 'hami.io/mutex.lock': 'first-writer' } } },
      },
      mergePatch,
    );
    const error: unknown = await core
      .patchNode(
        {
          name,
          body: { metadata: { resourceVersion: staleVersion, annotations: { 'hami.io/mutex.lock': 'second-writer' } } },
        },
        mergePatch,
      )
      .then(
        () => undefined,
        (caught: unknown) => caught,
      );

    expect(httpStatusOf(error)).to.equal(409);
    const node = await core.readNode({ name });
    expect(node.metadata?.annotations?.['hami.io/mutex.lock']).to.equal('first-writer');
  });
});

describe('control plane start when another process takes a port first (real etcd, kube-apiserver, kube-scheduler)', function () {
  this.timeout(180_000);

  it('starts again on fresh ports, for the API server and for kube-scheduler, and removes the failed run directory', async () => {
    // It accepts and never answers, like a process that took the port for itself; its accepted
    // sockets (readiness probes that found it) are destroyed at the end, or close() would wait on them.
    const accepted = new Set<Socket>();
    const squatter = createServer((socket) => {
      accepted.add(socket);
    });
    await new Promise<void>((done) => {
      squatter.listen({ host: '127.0.0.1', port: 0 }, done);
    });
    const taken = (squatter.address() as AddressInfo).port;
    // The first ask for three ports (API server, etcd client, etcd peer) and the first ask for
    // kube-scheduler's port each get the squatter's port, as a lost race would.
    const handedOut: number[][] = [];
    const freePorts = async (count: number): Promise<number[]> => {
      const ports = await findFreePorts(count);
      if (handedOut.length === 0 || (count === 1 && !handedOut.some((ports) => ports.length === 1))) ports[0] = taken;
      handedOut.push(ports);
      return ports;
    };
    const progress: string[] = [];
    const runDirsBefore = new Set(readdirSync(tmpdir()).filter((entry) => entry.startsWith('vgpu-warden-cp-')));
    let plane: ControlPlane | undefined;
    try {
      plane = await ControlPlane.start({
        binaries: locateBinaries({ repoRoot: resolve(import.meta.dirname, '..', '..'), env: process.env }),
        freePorts,
        progress: (line) => {
          progress.push(line);
        },
        scheduler: { profiles: [{ schedulerName: 'port-retry-scheduler' }] },
      });
      expect(handedOut.map((ports) => ports.length)).to.deep.equal([3, 3, 1, 1]);
      expect(handedOut[0]?.[0]).to.equal(taken);
      expect(handedOut[2]?.[0]).to.equal(taken);
      expect(new URL(plane.server).port).to.equal(String(handedOut[1]?.[0]));
      expect(progress.filter((line) => line.includes('a port was taken'))).to.have.length(2);
      expect(progress).to.include(
        `kube-scheduler ready (health https://127.0.0.1:${String(handedOut[3]?.[0])}/healthz)`,
      );
      const newRunDirs = readdirSync(tmpdir()).filter(
        (entry) => entry.startsWith('vgpu-warden-cp-') && !runDirsBefore.has(entry),
      );
      expect(newRunDirs, 'only the run that started keeps a directory').to.have.length(1);
    } finally {
      await plane?.stop();
      for (const socket of accepted) socket.destroy();
      await new Promise<void>((done) => {
        squatter.close(() => {
          done();
        });
      });
    }
  });
});
