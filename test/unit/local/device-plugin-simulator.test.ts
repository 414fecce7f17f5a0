import type { CoreV1Api, V1Node, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterCache } from '../../../src/cluster/cluster-cache.js';
import {
  ALLOCATED_ANNOTATION,
  BIND_PHASE_ANNOTATION,
  NODE_LOCK_ANNOTATION,
  TO_ALLOCATE_ANNOTATION,
} from '../../../src/hami/wire.js';
import { DevicePluginSimulator } from '../../../src/local/device-plugin-simulator.js';
import { simulatedGpuNode } from '../../../src/local/simulated-gpu-node.js';
import { NodeLocks } from '../../../src/lock/node-locks.js';
import { OneNodeLockApi } from '../../support/one-node-lock-api.js';
import { ScriptedSource } from '../../support/scripted-source.js';
import { eventually, notYet } from '../../support/eventually.js';

const LOCK = '2026-12-05T10:00:00Z,ns,train-0';

function boundPod(uid: string): V1Pod {
  const encoded = 'GPU-gpu-1-0,NVIDIA,4000,10:;';
  return {
    metadata: {
      namespace: 'ns',
      name: 'train-0',
      uid,
      annotations: {
        [TO_ALLOCATE_ANNOTATION]: encoded,
        [ALLOCATED_ANNOTATION]: encoded,
        [BIND_PHASE_ANNOTATION]: 'allocating',
      },
    },
    spec: { nodeName: 'gpu-1', containers: [{ name: 'c' }] },
  };
}

function lockedNode(lock: string | undefined): V1Node {
  const node = simulatedGpuNode({ name: 'gpu-1', gpus: 1 });
  return {
    ...node,
    metadata: {
      ...node.metadata,
      annotations: { ...node.metadata?.annotations, ...(lock === undefined ? {} : { [NODE_LOCK_ANNOTATION]: lock }) },
    },
  };
}

describe("DevicePluginSimulator (HAMi's plugin and kubelet on kubelet-less nodes)", () => {
  let cache: ClusterCache;
  let simulator: DevicePluginSimulator;
  afterEach(async () => {
    simulator.stop();
    await cache.stop();
  });

  it('serves a pod incarnation once: a lock its cache still shows after the release does not allocate it again', async () => {
    const nodes = new ScriptedSource<V1Node>();
    const pods = new ScriptedSource<V1Pod>();
    nodes.items = [lockedNode(LOCK)];
    pods.items = [boundPod('uid-1')];
    cache = new ClusterCache({ sources: { nodes, pods } });
    await cache.start();
    const patches: string[] = [];
    const core = {
      patchNamespacedPod: (request: { name: string; body: unknown }) => {
        patches.push(JSON.stringify(request.body));
        return Promise.resolve({});
      },
    } as unknown as CoreV1Api;
    const api = new OneNodeLockApi('gpu-1', LOCK);
    simulator = new DevicePluginSimulator({
      core,
      cache,
      locks: new NodeLocks({ api, config: { bindGraceMs: 60_000, expireMs: 300_000 } }),
      isSimulated: () => true,
      allocationDelayMs: 0,
    });
    simulator.start();
    await eventually(
      'the first Allocate',
      () =>
        Promise.resolve(
          simulator.allocated.length === 1 && api.lock === undefined
            ? true
            : notYet(`${simulator.allocated.length} allocations, lock ${api.lock ?? 'gone'}`),
        ),
      5000,
      10,
    );
    expect(patches).to.have.length(2);

    // The cache has not seen the release yet: the pod's own annotation writes arrive first, each a
    // reason to look at the node again, which still shows the lock naming the same incarnation.
    pods.emit('MODIFIED', {
      ...boundPod('uid-1'),
      metadata: { ...boundPod('uid-1').metadata, annotations: { [BIND_PHASE_ANNOTATION]: 'success' } },
    });
    nodes.emit('MODIFIED', lockedNode(LOCK));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(simulator.allocated, 'kubelet admits a pod once').to.deep.equal(['ns/train-0@gpu-1']);
    expect(patches).to.have.length(2);

    // Another incarnation under the same name, bound to the node and named by a new lock, is served.
    api.lock = LOCK;
    pods.emit('MODIFIED', boundPod('uid-2'));
    nodes.emit('MODIFIED', lockedNode(LOCK));
    await eventually(
      "the second incarnation's Allocate",
      () =>
        Promise.resolve(simulator.allocated.length === 2 ? true : notYet(`${simulator.allocated.length} allocations`)),
      5000,
      10,
    );
    expect(patches).to.have.length(4);
  });
});
