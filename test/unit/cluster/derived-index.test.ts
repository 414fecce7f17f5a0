import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterCache } from '../../../src/cluster/cluster-cache.js';
import type { Delivery, IndexEffects } from '../../../src/cluster/derived-index.js';
import { LockIndex } from '../../../src/cluster/lock-index.js';
import { PodIncarnations } from '../../../src/cluster/pod-incarnations.js';
import { ResourceExpiredError } from '../../../src/cluster/reflector.js';
import { ALLOCATED_ANNOTATION, NODE_LOCK_ANNOTATION } from '../../../src/hami/wire.js';
import { simulatedGpuNode } from '../../../src/local/simulated-gpu-node.js';
import { ScriptedSource } from '../../support/scripted-source.js';
import { until } from '../../support/eventually.js';

const LOCK_A = '2026-12-02T10:00:00Z,team-a,train-0';

const usedPod = (name: string, uid: string, node: string, version = '1'): V1Pod => ({
  metadata: {
    name,
    namespace: 'ns',
    uid,
    resourceVersion: version,
    annotations: { [ALLOCATED_ANNOTATION]: `GPU-${node}-0,NVIDIA,1000,0:;`, 'hami.io/vgpu-node': node },
  },
  spec: { containers: [{ name: 'c' }], nodeName: node },
  status: { phase: 'Running' },
});

const lockedNode = (name: string, lock: string | undefined, version: string): V1Node => {
  const node = simulatedGpuNode({ name, gpus: 1 });
  node.metadata = {
    ...node.metadata,
    resourceVersion: version,
    annotations: { ...node.metadata?.annotations, ...(lock === undefined ? {} : { [NODE_LOCK_ANNOTATION]: lock }) },
  };
  return node;
};

/** Effects that record what an index asked for. */
function recorder(): IndexEffects & { changed_: string[]; woken: string[]; warnings: string[] } {
  const effects = {
    changed_: [] as string[],
    woken: [] as string[],
    warnings: [] as string[],
    changed: (node: string) => effects.changed_.push(node),
    wake: (node: string) => effects.woken.push(node),
    warn: (message: string) => effects.warnings.push(message),
  };
  return effects;
}

describe('derived indexes (the store tells each registered index of every change)', () => {
  let cache: ClusterCache | undefined;
  afterEach(async () => {
    await cache?.stop();
    cache = undefined;
  });

  function build() {
    const nodes = new ScriptedSource<V1Node>();
    const pods = new ScriptedSource<V1Pod>();
    nodes.items = [lockedNode('gpu-1', undefined, '1'), lockedNode('gpu-2', undefined, '1')];
    cache = new ClusterCache({
      sources: { nodes, pods },
      reflector: { initialBackoffMs: 5, maxBackoffMs: 10, jitter: 0 },
    });
    return { nodes, pods, cache };
  }

  it('runs every index over a whole relist before any listener hears of its first change', async () => {
    const { pods, cache } = build();
    await cache.start();
    const seen: number[] = [];
    cache.onPodChange(() => {
      seen.push((cache.usageOn('gpu-1').get('GPU-gpu-1-0')?.memoryMiB ?? 0) + (cache.usageOn('gpu-2').size ? 1 : 0));
    });
    pods.items = [usedPod('a', 'ua', 'gpu-1'), usedPod('b', 'ub', 'gpu-2')];
    pods.fail(new ResourceExpiredError('too old resource version'));
    await until('the relist', () => cache.pod('ns', 'b') !== undefined);
    expect(seen, 'both listeners see the usage of both pods').to.deep.equal([1001, 1001]);
  });

  it('a node event reaches the node states, the lock index and the usage sums: a new lock moves the generation and is parsed once', async () => {
    const { nodes, cache } = build();
    await cache.start();
    const before = cache.nodeGeneration('gpu-1');
    nodes.emit('MODIFIED', lockedNode('gpu-1', LOCK_A, '5'));
    await until('the lock', () => cache.lockOf('gpu-1') !== undefined);
    expect(cache.nodeGeneration('gpu-1')).to.not.equal(before);
    const first = cache.lockOf('gpu-1')?.value;
    expect(first).to.deep.include({ kind: 'owned', owner: { namespace: 'team-a', name: 'train-0' } });
    expect(cache.lockOf('gpu-1')?.value, 'the stored parse, not a new one').to.equal(first);
    nodes.emit('DELETED', lockedNode('gpu-1', LOCK_A, '6'));
    await until('the delete', () => cache.node('gpu-1') === undefined);
    expect(cache.lockOf('gpu-1')).to.equal(undefined);
    expect(cache.nodeGeneration('gpu-1')).to.equal(undefined);
    expect(cache.lockedNodes()).to.deep.equal([]);
  });

  it('wakes a lock waiter once per batch when the pod its lock names changes', async () => {
    const { nodes, pods, cache } = build();
    nodes.items = [lockedNode('gpu-1', LOCK_A, '3')];
    await cache.start();
    let woken = 0;
    cache.onLockChange('gpu-1', () => {
      woken += 1;
    });
    pods.emit('ADDED', {
      ...usedPod('train-0', 'ut', 'gpu-1'),
      metadata: { name: 'train-0', namespace: 'team-a', uid: 'ut' },
    });
    await until('the pod', () => cache.pod('team-a', 'train-0') !== undefined);
    expect(woken).to.equal(1);
  });
});

describe('lockHeldBy (the stored parse of a node lock)', () => {
  const effects = recorder();
  const locks = new LockIndex(
    () => 1000,
    (listeners) => {
      for (const listener of [...listeners]) listener();
    },
  );
  const change = (name: string, lock: string | undefined) => ({
    type: 'add' as const,
    object: lockedNode(name, lock, '9'),
  });
  const event: Delivery = { kind: 'write' };

  it('names the holder of an owned value only, by exact namespace and name', () => {
    locks.onNode(change('owned', LOCK_A), event, effects);
    locks.onNode(change('legacy', '2026-12-02T10:00:00Z'), event, effects);
    locks.onNode(change('garbage', 'not a lock'), event, effects);
    locks.onNode(change('free', undefined), event, effects);
    expect(locks.heldBy('owned', { namespace: 'team-a', name: 'train-0' })).to.equal(true);
    expect(locks.heldBy('owned', { namespace: 'team-a', name: 'train' }), 'no prefix match (HAMi #1433)').to.equal(
      false,
    );
    expect(locks.heldBy('owned', { namespace: 'team-b', name: 'train-0' })).to.equal(false);
    expect(locks.heldBy('legacy', { namespace: 'team-a', name: 'train-0' })).to.equal(false);
    expect(locks.heldBy('garbage', { namespace: 'team-a', name: 'train-0' })).to.equal(false);
    expect(locks.heldBy('free', { namespace: 'team-a', name: 'train-0' })).to.equal(false);
    expect(locks.valueOf('garbage')?.kind).to.equal('malformed');
    expect(effects.changed_.sort()).to.deep.equal(['garbage', 'legacy', 'owned']);
    expect(effects.woken.sort()).to.deep.equal(['garbage', 'legacy', 'owned']);
  });

  it("follows the node's value: a new holder, then none", () => {
    locks.onNode(change('owned', '2026-12-02T10:00:09Z,team-b,train-1'), event, effects);
    expect(locks.heldBy('owned', { namespace: 'team-a', name: 'train-0' })).to.equal(false);
    expect(locks.heldBy('owned', { namespace: 'team-b', name: 'train-1' })).to.equal(true);
    expect(locks.nodesLockedBy('team-b', 'train-1')).to.deep.equal(['owned']);
    locks.onNode({ type: 'delete', object: lockedNode('owned', undefined, '10') }, event, effects);
    expect(locks.heldBy('owned', { namespace: 'team-b', name: 'train-1' })).to.equal(false);
    expect(locks.nodesLockedBy('team-b', 'train-1')).to.deep.equal([]);
  });

  it('ClusterCache.lockHeldBy answers from the stored parse', async () => {
    const nodes = new ScriptedSource<V1Node>();
    const pods = new ScriptedSource<V1Pod>();
    nodes.items = [lockedNode('gpu-1', LOCK_A, '1')];
    const cache = new ClusterCache({ sources: { nodes, pods } });
    await cache.start();
    expect(cache.lockHeldBy('gpu-1', { namespace: 'team-a', name: 'train-0' })).to.equal(true);
    expect(cache.lockHeldBy('gpu-1', { namespace: 'team-a', name: 'train-1' })).to.equal(false);
    expect(cache.lockHeldBy('gpu-2', { namespace: 'team-a', name: 'train-0' })).to.equal(false);
    await cache.stop();
  });
});

describe('PodIncarnations (versions and gone incarnations, as a derived index)', () => {
  it('takes creation from an ADDED event, first sight from a relist, and a relist delete as not final', () => {
    const index = new PodIncarnations(() => 0);
    const created = usedPod('a', 'ua', 'gpu-1', '11');
    index.onPod({ type: 'add', object: created }, { kind: 'event', type: 'ADDED', object: created });
    expect(index.createdVersion('ua')).to.equal('11');
    expect(index.seenVersion('ua')).to.equal('11');
    const listed = usedPod('b', 'ub', 'gpu-1', '12');
    index.onPod({ type: 'add', object: listed }, { kind: 'relist', version: '40' });
    expect(index.createdVersion('ub')).to.equal(undefined);
    expect(index.seenVersion('ub')).to.equal('40');
    index.onPod({ type: 'delete', object: listed }, { kind: 'relist', version: '41' });
    expect(index.goneByUid('ns', 'b', 'ub')?.final).to.equal(false);
    expect(index.seenVersion('ub')).to.equal(undefined);
    index.onPod({ type: 'delete', object: created }, { kind: 'event', type: 'DELETED', object: created });
    expect(index.goneByUid('ns', 'a', 'ua')?.final).to.equal(true);
    expect(index.createdVersion('ua')).to.equal(undefined);
  });
});

describe('finishBinding (Assumed, binding finished)', () => {
  it('restarts the expiry of an assumption from the end of its binding, and ignores a pod not assumed', async () => {
    const now = { ms: 0 };
    const nodes = new ScriptedSource<V1Node>();
    const pods = new ScriptedSource<V1Pod>();
    nodes.items = [lockedNode('gpu-1', undefined, '1')];
    const cache = new ClusterCache({ sources: { nodes, pods }, clock: () => now.ms });
    await cache.start();
    cache.assumePod('u1', 'gpu-1', new Map([['GPU-gpu-1-0', { slots: 1, memoryMiB: 100, cores: 0 }]]));
    now.ms = 9 * 60_000;
    cache.finishBinding('u1');
    cache.finishBinding('not-assumed');
    now.ms = 11 * 60_000;
    expect(cache.isAssumed('u1')).to.equal(true);
    expect(cache.usageOn('gpu-1').get('GPU-gpu-1-0')?.memoryMiB, 'still counted past the TTL from assume').to.equal(
      100,
    );
    now.ms = 19 * 60_000 + 1;
    expect(cache.usageOn('gpu-1').size, 'expired a TTL after finishBinding').to.equal(0);
    expect(cache.isAssumed('u1')).to.equal(false);
    await cache.stop();
  });
});
