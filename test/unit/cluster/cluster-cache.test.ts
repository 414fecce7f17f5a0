import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterCache } from '../../../src/cluster/cluster-cache.js';
import { ResourceExpiredError } from '../../../src/cluster/reflector.js';
import { ALLOCATED_ANNOTATION } from '../../../src/hami/wire.js';
import { simulatedGpuNode } from '../../../src/local/simulated-gpu-node.js';
import { ScriptedSource } from '../../support/scripted-source.js';
import { until } from '../../support/eventually.js';

const usedPod = (name: string, uid: string, node: string): V1Pod => ({
  metadata: {
    name,
    namespace: 'ns',
    uid,
    resourceVersion: '1',
    annotations: { [ALLOCATED_ANNOTATION]: `GPU-${node}-0,NVIDIA,8000,0:;`, 'hami.io/vgpu-node': node },
  },
  spec: { containers: [{ name: 'c' }], nodeName: node },
  status: { phase: 'Running' },
});

describe('ClusterCache (the state store)', () => {
  let cache: ClusterCache | undefined;
  afterEach(async () => {
    await cache?.stop();
    cache = undefined;
  });

  function build(options: { staleAfterMs?: number; clock?: () => number } = {}) {
    const nodes = new ScriptedSource<V1Node>();
    const pods = new ScriptedSource<V1Pod>();
    nodes.items = [simulatedGpuNode({ name: 'gpu-1', gpus: 1 })];
    cache = new ClusterCache({
      sources: { nodes, pods },
      reflector: { initialBackoffMs: 5, maxBackoffMs: 10, jitter: 0 },
      ...options,
    });
    return { nodes, pods, cache };
  }

  it('is not synced while the first LIST fails, and syncs after a good one (a throttled restart never filters on an empty view)', async () => {
    const { pods, cache } = build();
    pods.items = [usedPod('running', 'u1', 'gpu-1')];
    pods.listFailures = 2;
    const started = cache.start();
    expect(cache.synced).to.equal(false);
    expect(cache.problems()).to.include('pods not listed yet');
    await started;
    expect(pods.lists).to.equal(3);
    expect(cache.synced).to.equal(true);
    expect(cache.usageOn('gpu-1').get('GPU-gpu-1-0')?.memoryMiB).to.equal(8000);
  });

  it("a 410 relist across a same-name recreate drops the old incarnation's usage and reports its delete", async () => {
    const { pods, cache } = build();
    pods.items = [usedPod('sts-0', 'old', 'gpu-1')];
    await cache.start();
    const deleted: string[] = [];
    cache.onPodChange((pod, change) => {
      if (change === 'delete') deleted.push(pod.metadata?.uid ?? '');
    });
    // While the watch is gone, sts-0 is deleted and recreated, not yet placed.
    pods.items = [
      {
        metadata: { name: 'sts-0', namespace: 'ns', uid: 'new', resourceVersion: '7' },
        spec: { containers: [{ name: 'c' }] },
      },
    ];
    pods.fail(new ResourceExpiredError('too old resource version'));
    await until('the relist', () => cache.pod('ns', 'sts-0')?.metadata?.uid === 'new');
    expect(deleted).to.deep.equal(['old']);
    expect(cache.usageOn('gpu-1').size).to.equal(0);
  });

  it('remembers the last state of a pod from its DELETED event, and a pod that only vanished from a relist as a stale copy, not its last state', async () => {
    const { pods, cache } = build();
    pods.items = [usedPod('watched', 'w1', 'gpu-1'), usedPod('relisted', 'r1', 'gpu-1')];
    await cache.start();
    pods.emit('DELETED', {
      ...usedPod('watched', 'w1', 'gpu-1'),
      metadata: { ...usedPod('watched', 'w1', 'gpu-1').metadata, annotations: { 'hami.io/bind-phase': 'allocating' } },
    });
    await until('the delete', () => cache.pod('ns', 'watched') === undefined);
    expect(cache.goneIncarnation('ns', 'watched', 'w1')).to.deep.include({
      uid: 'w1',
      boundTo: 'gpu-1',
      bindPhase: 'allocating',
      final: true,
    });
    // Gone while the watch was down: its last state is not known (it may have been bound since).
    pods.items = [];
    pods.fail(new ResourceExpiredError('too old resource version'));
    await until('the relist', () => cache.pod('ns', 'relisted') === undefined);
    expect(cache.goneIncarnation('ns', 'relisted', 'r1')).to.deep.include({
      uid: 'r1',
      boundTo: 'gpu-1',
      final: false,
    });
  });

  it('turns stale when a watch stays down longer than the bound, and recovers', async () => {
    let now = 1_000_000;
    const { nodes, cache } = build({ staleAfterMs: 30_000, clock: () => now });
    await cache.start();
    expect(cache.problems()).to.deep.equal([]);
    nodes.listFailures = 1_000_000;
    nodes.fail(new Error('connection reset'));
    await until('relist attempts', () => nodes.lists > 2);
    now += 31_000;
    expect(cache.problems().join()).to.match(/nodes watch down for 31s/);
    nodes.listFailures = 0;
    await until('recovery', () => cache.problems().length === 0);
  });

  it('records when it first saw each lock value and wakes lock waiters on a change', async () => {
    let now = 5_000;
    const { nodes, cache } = build({ clock: () => now });
    await cache.start();
    let woken = 0;
    cache.onLockChange('gpu-1', () => {
      woken++;
    });
    const locked = (value: string, rv: string) => ({
      ...simulatedGpuNode({ name: 'gpu-1', gpus: 1 }),
      metadata: {
        ...simulatedGpuNode({ name: 'gpu-1', gpus: 1 }).metadata,
        resourceVersion: rv,
        annotations: {
          ...simulatedGpuNode({ name: 'gpu-1', gpus: 1 }).metadata?.annotations,
          'hami.io/mutex.lock': value,
        },
      },
    });
    nodes.emit('MODIFIED', locked('2020-01-01T00:00:00Z,ns,p', '2'));
    expect(cache.lockOf('gpu-1')?.firstSeen.getTime()).to.equal(5_000);
    now = 9_000;
    nodes.emit('MODIFIED', locked('2020-01-01T00:00:00Z,ns,p', '3'));
    expect(cache.lockView.lockSeenAt('gpu-1', '2020-01-01T00:00:00Z,ns,p')?.getTime()).to.equal(5_000);
    expect(woken).to.equal(1);
    expect(cache.lockedNodes()).to.deep.equal(['gpu-1']);
  });

  it('indexes lock owners: nodesLockedBy follows lock writes, owner changes and node deletes', async () => {
    const { nodes, cache } = build();
    nodes.items.push(simulatedGpuNode({ name: 'gpu-2', gpus: 1 }));
    await cache.start();
    const locked = (name: string, value: string | undefined, rv: string): V1Node => {
      const base = simulatedGpuNode({ name, gpus: 1 });
      const annotations = {
        ...base.metadata?.annotations,
        ...(value === undefined ? {} : { 'hami.io/mutex.lock': value }),
      };
      return { ...base, metadata: { ...base.metadata, resourceVersion: rv, annotations } };
    };
    nodes.emit('MODIFIED', locked('gpu-1', '2020-01-01T00:00:00Z,ns,p', '2'));
    nodes.emit('MODIFIED', locked('gpu-2', '2020-01-01T00:00:00Z,ns,p', '3'));
    expect(cache.nodesLockedBy('ns', 'p').sort()).to.deep.equal(['gpu-1', 'gpu-2']);
    expect(cache.nodesLockedBy('ns', 'q')).to.deep.equal([]);
    nodes.emit('MODIFIED', locked('gpu-1', '2020-01-01T00:00:01Z,ns,q', '4'));
    expect(cache.nodesLockedBy('ns', 'p')).to.deep.equal(['gpu-2']);
    expect(cache.nodesLockedBy('ns', 'q')).to.deep.equal(['gpu-1']);
    nodes.emit('DELETED', locked('gpu-2', '2020-01-01T00:00:00Z,ns,p', '5'));
    nodes.emit('MODIFIED', locked('gpu-1', undefined, '6'));
    expect(cache.nodesLockedBy('ns', 'p')).to.deep.equal([]);
    expect(cache.nodesLockedBy('ns', 'q')).to.deep.equal([]);
  });

  it("a pod whose allocation was never readable takes every GPU of its node, by the node's inventory, and is reported once", async () => {
    const logged: string[] = [];
    const nodes = new ScriptedSource<V1Node>();
    const pods = new ScriptedSource<V1Pod>();
    nodes.items = [simulatedGpuNode({ name: 'gpu-1', gpus: 2 })];
    const broken = usedPod('broken', 'u1', 'gpu-1');
    broken.metadata = {
      ...broken.metadata,
      annotations: { ...broken.metadata?.annotations, [ALLOCATED_ANNOTATION]: 'garbage,x:GPU-gpu-1-0,NVIDIA,8000,0:;' },
    };
    pods.items = [broken];
    cache = new ClusterCache({
      sources: { nodes, pods },
      reflector: { initialBackoffMs: 5, maxBackoffMs: 10, jitter: 0 },
      log: (_level, message) => {
        logged.push(message);
      },
    });
    await cache.start();
    expect(cache.usageOn('gpu-1')).to.deep.equal(
      new Map([
        ['GPU-gpu-1-0', { slots: 10, memoryMiB: 24576, cores: 100 }],
        ['GPU-gpu-1-1', { slots: 10, memoryMiB: 24576, cores: 100 }],
      ]),
    );
    expect(cache.unreadableAllocations().map((pod) => [pod.pod, pod.counted])).to.deep.equal([
      ['ns/broken', 'whole-node'],
    ]);
    expect(logged.filter((line) => line.includes('unreadable'))).to.deep.equal([
      'pod ns/broken: unreadable hami.io/vgpu-devices-allocated (container 0, device 0: pod annotation format error, missing fields, do not use nodeName in task spec ("garbage,x")); counted as using every GPU of node gpu-1 until it is readable or the pod is gone',
    ]);
  });
});
