import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterCache } from '../../../src/cluster/cluster-cache.js';
import { simulatedGpuNode } from '../../../src/local/simulated-gpu-node.js';
import type { ReleasePath } from '../../../src/lock/lock-events.js';
import { startPodWatchRelease, type WatchReleaser } from '../../../src/sweeper/pod-watch-release.js';
import { ScriptedSource } from '../../support/scripted-source.js';

const lockedNode = (name: string, lock: string | undefined, rv: string): V1Node => {
  const base = simulatedGpuNode({ name, gpus: 1 });
  return {
    ...base,
    metadata: {
      ...base.metadata,
      resourceVersion: rv,
      annotations: { ...base.metadata?.annotations, ...(lock === undefined ? {} : { 'hami.io/mutex.lock': lock }) },
    },
  };
};

const pod = (
  name: string,
  rv: string,
  extra: { nodeName?: string; deleting?: boolean; bindPhase?: string } = {},
): V1Pod => ({
  metadata: {
    name,
    namespace: 'ns',
    uid: `uid-${name}`,
    resourceVersion: rv,
    ...(extra.deleting === true ? { deletionTimestamp: new Date('2026-01-01T00:00:00Z') } : {}),
    ...(extra.bindPhase === undefined ? {} : { annotations: { 'hami.io/bind-phase': extra.bindPhase } }),
  },
  spec: { containers: [{ name: 'c' }], ...(extra.nodeName === undefined ? {} : { nodeName: extra.nodeName }) },
  status: { phase: 'Pending' },
});

/** Records what the watch asked the lock service to do: every release goes through the rules. */
class RecordingReleaser implements WatchReleaser {
  readonly checked: string[] = [];
  pending: (() => void)[] = [];
  /** When set, conditional releases answer at once with this; otherwise they wait in `pending`. */
  answer: (() => 'kept' | 'released') | undefined;
  releaseIfReleasable(node: string, path: ReleasePath) {
    this.checked.push(`${node}:${path}`);
    const answer = this.answer;
    if (answer !== undefined) return Promise.resolve({ outcome: answer() });
    return new Promise<{ outcome: 'kept' }>((done) => {
      this.pending.push(() => {
        done({ outcome: 'kept' });
      });
    });
  }
}

describe('pod-watch release', () => {
  let cache: ClusterCache | undefined;
  let stop: (() => void) | undefined;
  afterEach(async () => {
    stop?.();
    await cache?.stop();
  });

  async function build() {
    const nodes = new ScriptedSource<V1Node>();
    const pods = new ScriptedSource<V1Pod>();
    nodes.items = [lockedNode('gpu-a', '2026-01-01T00:00:00Z,ns,p', '1'), lockedNode('gpu-b', undefined, '1')];
    cache = new ClusterCache({ sources: { nodes, pods } });
    await cache.start();
    const locks = new RecordingReleaser();
    const pauses: number[] = [];
    let wake: (() => void) | undefined;
    // The follower's pauses wait for the test to let them go, so the test sees every check.
    const sleep = (ms: number) => {
      pauses.push(ms);
      return new Promise<void>((resolve) => {
        wake = resolve;
      });
    };
    stop = startPodWatchRelease({ cache, locks, sleep, followIntervalMs: 100 });
    const nextCheck = async () => {
      const resume = wake;
      wake = undefined;
      resume?.();
      await new Promise((resolve) => setImmediate(resolve));
    };
    return { nodes, pods, locks, pauses, nextCheck };
  }

  it('asks to free a lock left on another node once its owner is bound elsewhere, one check per node at a time', async () => {
    const { pods, locks } = await build();
    pods.emit('ADDED', pod('p', '2'));
    expect(locks.checked, 'an unbound owner is not checked').to.deep.equal([]);
    pods.emit('MODIFIED', pod('p', '3', { nodeName: 'gpu-b' }));
    pods.emit('MODIFIED', pod('p', '4', { nodeName: 'gpu-b' }));
    expect(locks.checked).to.deep.equal(['gpu-a:watch']);
    locks.pending.splice(0).forEach((done) => {
      done();
    });
    await new Promise((resolve) => setImmediate(resolve));
    pods.emit('MODIFIED', pod('p', '5', { nodeName: 'gpu-b' }));
    expect(locks.checked).to.deep.equal(['gpu-a:watch', 'gpu-a:watch']);
  });

  it('leaves the lock of a pod bound to the locked node itself to the device plugin', async () => {
    const { pods, locks } = await build();
    pods.emit('ADDED', pod('p', '2', { nodeName: 'gpu-a' }));
    expect(locks.checked).to.deep.equal([]);
  });

  // Issue #42 item 4: the plugin answered Allocate but never flipped bind-phase.
  it('asks the rules about the lock of a pod bound there once kubelet reports it admitted while bind-phase still says allocating', async () => {
    const { pods, locks } = await build();
    locks.answer = () => 'released';
    pods.emit('ADDED', pod('p', '2', { nodeName: 'gpu-a', bindPhase: 'allocating' }));
    expect(locks.checked, "not admitted yet: the plugin's turn").to.deep.equal([]);
    const admitted = pod('p', '3', { nodeName: 'gpu-a', bindPhase: 'allocating' });
    pods.emit('MODIFIED', { ...admitted, status: { phase: 'Pending', startTime: new Date('2026-01-01T00:00:05Z') } });
    expect(locks.checked).to.deep.equal(['gpu-a:watch']);
  });

  // Issue #42 item 2: the release on a delete went by name behind a time fence; it now asks the
  // rules, which decide by UID and resourceVersion whom the lock was written for.
  it('asks the rules to free the lock of a pod being deleted', async () => {
    const { pods, locks } = await build();
    locks.answer = () => 'released';
    pods.emit('ADDED', pod('p', '2', { nodeName: 'gpu-a', deleting: true }));
    expect(locks.checked).to.deep.equal(['gpu-a:watch']);
  });

  it('keeps the lock of a pod deleted while bound there and awaiting allocation, and once it is gone frees it only when the rules say kubelet is past it', async () => {
    const { pods, locks, pauses, nextCheck } = await build();
    pods.emit('ADDED', pod('p', '2', { nodeName: 'gpu-a', deleting: true, bindPhase: 'allocating' }));
    expect(locks.checked, 'kubelet may still admit it').to.deep.equal([]);
    const answers: ('kept' | 'released')[] = ['kept', 'kept', 'kept', 'released'];
    locks.answer = () => answers.shift() ?? 'released';
    pods.emit('DELETED', pod('p', '3', { nodeName: 'gpu-a', deleting: true, bindPhase: 'allocating' }));
    pods.emit('DELETED', pod('p', '3', { nodeName: 'gpu-a', deleting: true, bindPhase: 'allocating' }));
    await new Promise((resolve) => setImmediate(resolve));
    expect(locks.checked, 'one follower per node').to.deep.equal(['gpu-a:watch']);
    for (let i = 0; i < 5; i++) await nextCheck();
    expect(locks.checked, 'checked again while kept, and no more once released').to.have.length(4);
    expect(pauses, 'the pause grows to 4x the interval').to.deep.equal([100, 200, 400]);
  });

  // Issue #42 item 8: one follower per node, whichever deleted owner its lock names now; before, a
  // follower was tied to one name, so the lock of a same-name recreate or of the next deleted pod on
  // that node was not followed while the first follower slept.
  it("follows a node's lock with one follower, as the lock moves from one deleted owner to another", async () => {
    const { nodes, pods, locks, nextCheck } = await build();
    locks.answer = () => 'kept';
    pods.emit('ADDED', pod('p', '2', { nodeName: 'gpu-a', bindPhase: 'allocating' }));
    pods.emit('DELETED', pod('p', '3', { nodeName: 'gpu-a', deleting: true, bindPhase: 'allocating' }));
    await new Promise((resolve) => setImmediate(resolve));
    expect(locks.checked).to.deep.equal(['gpu-a:watch']);
    nodes.emit('MODIFIED', lockedNode('gpu-a', '2026-01-01T00:00:09Z,ns,q', '2'));
    pods.emit('ADDED', pod('q', '4', { nodeName: 'gpu-a', bindPhase: 'allocating' }));
    pods.emit('DELETED', pod('q', '5', { nodeName: 'gpu-a', deleting: true, bindPhase: 'allocating' }));
    await new Promise((resolve) => setImmediate(resolve));
    expect(locks.checked, 'no second follower for the node').to.deep.equal(['gpu-a:watch']);
    await nextCheck();
    expect(locks.checked, "the one follower checks q's lock at its pace").to.deep.equal(['gpu-a:watch', 'gpu-a:watch']);
    nodes.emit('MODIFIED', lockedNode('gpu-a', '2026-01-01T00:00:10Z,ns,r', '3'));
    await nextCheck();
    expect(locks.checked, 'a lock of a pod nobody deleted is not followed').to.have.length(2);
  });

  it('frees the lock a dead bind left for a pod never bound, found through the store, once the pod is deleted (chaos seed 2)', async () => {
    const { pods, locks } = await build();
    pods.emit('ADDED', pod('p', '2'));
    expect(locks.checked, 'a pending pod keeps the lock its bind may still use').to.deep.equal([]);
    locks.answer = () => 'released';
    pods.emit('MODIFIED', pod('p', '3', { deleting: true }));
    expect(locks.checked).to.deep.equal(['gpu-a:watch']);
  });

  it('frees nothing for a deleted pod never bound whose name no lock carries', async () => {
    const { pods, locks } = await build();
    pods.emit('ADDED', pod('q', '2'));
    pods.emit('DELETED', pod('q', '3', { deleting: true }));
    expect(locks.checked).to.deep.equal([]);
  });
});
