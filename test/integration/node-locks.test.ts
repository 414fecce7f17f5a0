import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterCache } from '../../src/cluster/cluster-cache.js';
import { KubeNodeLockApi } from '../../src/lock/kube-node-lock-api.js';
import { LockContentionError, NodeNotFoundError } from '../../src/lock/lock-errors.js';
import type { LockRulesConfig } from '../../src/lock/lock-rules.js';
import { formatLockValue, formatRfc3339, parseLockValue, type PodRef } from '../../src/lock/lock-value.js';
import { NodeLocks, type NodeLocksDeps } from '../../src/lock/node-locks.js';
import { createGpuNode, createPod, InstrumentedLockApi, readLock, setLock } from '../support/lock-helpers.js';
import { eventually, notYet, testCluster } from '../support/test-cluster.js';
import type { LockEvent } from '../../src/lock/lock-events.js';
import { kubeSources } from '../../src/cluster/kube-list-watch.js';

const CONFIG: LockRulesConfig = { bindGraceMs: 60_000, expireMs: 300_000 };
const MINUTE = 60_000;

function lockValue(pod: PodRef, ageMs = 0): string {
  return formatLockValue(new Date(Date.now() - ageMs), pod);
}

function newLocks(overrides: Partial<NodeLocksDeps> = {}): { locks: NodeLocks; events: LockEvent[] } {
  const events: LockEvent[] = [];
  const locks = new NodeLocks({
    api: new KubeNodeLockApi(testCluster().core),
    config: CONFIG,
    observer: { onLockEvent: (event) => events.push(event) },
    ...overrides,
  });
  return { locks, events };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

describe('NodeLocks on a real apiserver', () => {
  describe("HAMi's scenarios", () => {
    it("a conflict preserves the other pod's lock", async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const [podA, podB] = [await createPod(core, namespace, 'pod-a'), await createPod(core, namespace, 'pod-b')];
      const theirs = lockValue(podB);
      // pod-b's real write lands between our read and our RV-guarded patch, so ours gets a real 409.
      const api = new InstrumentedLockApi(core, {
        beforeWrite: (call) => (call === 1 ? setLock(core, node, theirs) : Promise.resolve()),
      });
      const { locks } = newLocks({ api });

      const error = await rejection(locks.acquire(node, podA));

      expect(error).to.be.instanceOf(LockContentionError);
      expect(await readLock(core, node)).to.equal(theirs);
      expect(api.writes).to.equal(1);
    });

    it('a lost patch response still counts as acquired', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const podA = await createPod(core, namespace, 'pod-a');
      const api = new InstrumentedLockApi(core, { loseResponse: (call) => call === 1 });
      const { locks } = newLocks({ api, sleep: () => Promise.resolve() });

      const result = await locks.acquire(node, podA);

      expect(result.outcome).to.equal('acquired');
      expect(api.writes).to.equal(1);
      expect(await readLock(core, node)).to.equal(result.value);
    });

    it('a re-stamped lock of the same pod is released', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const podA = await createPod(core, namespace, 'pod-a');
      await setLock(core, node, lockValue(podA, 2000));
      const api = new InstrumentedLockApi(core, {
        beforeWrite: (call) => (call === 1 ? setLock(core, node, lockValue(podA, 1000)) : Promise.resolve()),
      });
      const { locks } = newLocks({ api });

      const result = await locks.release(node, podA);

      expect(result.outcome).to.equal('released');
      expect(api.writes).to.equal(2);
      expect(await readLock(core, node)).to.equal(undefined);
    });

    it('the contention message names the holder and the lock age', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const [podA, podB] = [await createPod(core, namespace, 'pod-a'), await createPod(core, namespace, 'pod-b')];
      // Lock values have second precision: a fixed, second-aligned clock makes the age exact.
      const now = new Date(Math.floor(Date.now() / 1000) * 1000);
      await setLock(core, node, formatLockValue(new Date(now.getTime() - 12_000), podB));
      const { locks, events } = newLocks({ clock: () => now.getTime() });

      const error = await rejection(locks.acquire(node, podA));

      expect((error as Error).message).to.equal(
        `node ${node} is locked by pod ${namespace}/pod-b (12s old, held: bind-in-progress); ${namespace}/pod-a must wait`,
      );
      expect(events.map((event) => event.type)).to.deep.equal(['contention']);
    });

    it('a lock whose owner is deleted is taken over at once', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const podA = await createPod(core, namespace, 'pod-a');
      const orphan = lockValue({ namespace, name: 'deleted-pod' }, 1000);
      await setLock(core, node, orphan);
      const { locks, events } = newLocks();

      const result = await locks.acquire(node, podA);

      expect(result).to.deep.include({ outcome: 'taken-over', replaced: { value: orphan, reason: 'owner-not-found' } });
      expect(await readLock(core, node)).to.equal(result.value);
      expect(events.map((event) => event.type)).to.deep.equal(['released', 'acquired']);
      expect(events[0]).to.deep.include({ path: 'takeover', reason: 'owner-not-found' });
    });

    // The second acquire re-stamps the lock (a retried bind renews its age): the same value, and so
    // no change to the node, only when both fall in the same second of the stamp. The test used to
    // expect the first value always and failed whenever the two straddled a second (seen under load).
    it('re-entrancy: the same pod acquiring again succeeds, re-stamping its own lock', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const podA = await createPod(core, namespace, 'pod-a');
      const { locks } = newLocks();

      const first = await locks.acquire(node, podA);
      const second = await locks.acquire(node, podA);

      expect(first.outcome).to.equal('acquired');
      expect(second.outcome).to.equal('reentrant');
      const stamp = (value: string) => Date.parse(value.split(',')[0] ?? '');
      expect(second.value.split(',').slice(1)).to.deep.equal(first.value.split(',').slice(1));
      expect(stamp(second.value)).to.be.at.least(stamp(first.value));
      if (second.value === first.value)
        expect(second.resourceVersion, 'the same value writes nothing').to.equal(first.resourceVersion);
    });

    it('two concurrent acquirers in separate services give exactly one winner', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const [podA, podB] = [await createPod(core, namespace, 'pod-a'), await createPod(core, namespace, 'pod-b')];
      // Separate instances share no in-process mutex: only the resourceVersion decides.
      const results = await Promise.allSettled([
        newLocks().locks.acquire(node, podA),
        newLocks().locks.acquire(node, podB),
      ]);

      const winners = results.filter((result) => result.status === 'fulfilled');
      const losers = results.filter((result) => result.status === 'rejected');
      expect(winners).to.have.length(1);
      expect(losers).to.have.length(1);
      expect((losers[0] as PromiseRejectedResult).reason).to.be.instanceOf(LockContentionError);
      expect(await readLock(core, node)).to.equal(
        (winners[0] as PromiseFulfilledResult<{ value: string }>).value.value,
      );
    });

    it('keeps going through many conflicts caused by unrelated node writes (kubelet, device plugin)', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const podA = await createPod(core, namespace, 'pod-a');
      // Each of our first eight writes races a real write of another annotation: eight 409s.
      const api = new InstrumentedLockApi(core, {
        beforeWrite: (call) =>
          call <= 8
            ? core
                .patchNode(
                  { name: node, body: { metadata: { annotations: { 'example.com/heartbeat': String(call) } } } },
                  setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
                )
                .then(() => undefined)
            : Promise.resolve(),
      });

      const result = await newLocks({ api }).locks.acquire(node, podA);

      expect(result.outcome).to.equal('acquired');
      expect(result.attempts).to.equal(9);
      expect(api.writes).to.equal(9);
    });

    it('two concurrent acquirers in one service are serialised per node and give exactly one winner', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const [podA, podB] = [await createPod(core, namespace, 'pod-a'), await createPod(core, namespace, 'pod-b')];
      const { locks } = newLocks();
      const results = await Promise.allSettled([locks.acquire(node, podA), locks.acquire(node, podB)]);
      expect(results.map((result) => result.status).sort()).to.deep.equal(['fulfilled', 'rejected']);
    });
  });

  describe('release', () => {
    it("never deletes another pod's lock", async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const [podA, podB] = [await createPod(core, namespace, 'pod-a'), await createPod(core, namespace, 'pod-b')];
      const theirs = lockValue(podB);
      await setLock(core, node, theirs);

      const result = await newLocks().locks.release(node, podA);

      expect(result).to.deep.include({ outcome: 'not-owner', value: theirs });
      expect(await readLock(core, node)).to.equal(theirs);
    });

    it('keeps a lock another pod took while our release was retrying', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const [podA, podB] = [await createPod(core, namespace, 'pod-a'), await createPod(core, namespace, 'pod-b')];
      await setLock(core, node, lockValue(podA));
      const theirs = lockValue(podB);
      const api = new InstrumentedLockApi(core, {
        beforeWrite: (call) => (call === 1 ? setLock(core, node, theirs) : Promise.resolve()),
      });

      const result = await newLocks({ api }).locks.release(node, podA);

      expect(result.outcome).to.equal('not-owner');
      expect(await readLock(core, node)).to.equal(theirs);
    });

    it('is idempotent, and a missing node counts as not locked', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const podA = await createPod(core, namespace, 'pod-a');
      const { locks, events } = newLocks();
      await locks.acquire(node, podA);

      expect((await locks.release(node, podA, 'bind-failure')).outcome).to.equal('released');
      expect((await locks.release(node, podA)).outcome).to.equal('not-locked');
      expect((await locks.release('no-such-node', podA)).outcome).to.equal('not-locked');
      expect(events.filter((event) => event.type === 'released')).to.have.length(1);
      expect(events.find((event) => event.type === 'released')).to.deep.include({
        path: 'bind-failure',
        reason: 'owner-request',
      });
    });
  });

  describe('releaseIfReleasable and inspect', () => {
    it('keeps the lock of a pod bound here and awaiting Allocate while it is deleted gracefully; frees a lock whose owner is gone', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const pod = await createPod(core, namespace, 'leaving', { nodeName: node, bindPhase: 'allocating' });
      // One value: a second call may fall in the next second and stamp another time.
      const held = lockValue(pod);
      await setLock(core, node, held);
      await core.deleteNamespacedPod({ name: 'leaving', namespace }); // only sets deletionTimestamp here
      const { locks, events } = newLocks();

      // Bound here and awaiting Allocate: kubelet may still admit it, so the lock is kept.
      const kept = await locks.releaseIfReleasable(node, 'webhook');
      expect(kept.outcome).to.equal('kept');
      expect(kept.classification).to.deep.include({ state: 'held' });
      expect(await readLock(core, node)).to.equal(held);

      const other = await createPod(core, namespace, 'unbound');
      await setLock(core, node, lockValue(other));
      await core.deleteNamespacedPod({ name: 'unbound', namespace });
      const result = await locks.releaseIfReleasable(node, 'webhook');
      expect(result.outcome).to.equal('released');
      expect(result.classification).to.deep.include({ state: 'releasable', reason: 'owner-not-found' });
      expect(await readLock(core, node)).to.equal(undefined);
      expect(events).to.deep.include.members([
        {
          type: 'released',
          node,
          value: result.value,
          parsed: parseLockValue(result.value ?? ''),
          reason: 'owner-not-found',
          path: 'webhook',
          ageMs: result.classification?.ageMs,
        },
      ]);
    });

    // Found by the chaos suite (seed 1, 30 minutes): a bind that died with its outcome unknown kept
    // its lock, the pod was force-deleted and recreated 12 s later, and the lock, naming the new pod
    // of that name, stayed a whole bind grace. The store proves the order by resourceVersions.
    it('frees at once a lock written before its owner incarnation was created (seen on the watch), but keeps one written after', async () => {
      const { core, namespace, kubeConfig } = testCluster();
      const node = await createGpuNode(core);
      const cache = new ClusterCache({ sources: kubeSources(kubeConfig) });
      try {
        await cache.start();
        const value = lockValue({ namespace, name: 'sts-0' });
        await setLock(core, node, value);
        const pod = await createPod(core, namespace, 'sts-0');
        // The store's own listeners wake the check as the watch delivers the lock and the pod.
        await eventually(
          'the store to have the lock and the pod',
          () =>
            Promise.resolve(
              cache.lockOf(node)?.raw === value && cache.pod(namespace, 'sts-0') !== undefined
                ? true
                : notYet(
                    `store lock ${cache.lockOf(node)?.raw ?? 'none'}, pod sts-0 ${cache.pod(namespace, 'sts-0') === undefined ? 'unseen' : 'seen'}`,
                  ),
            ),
          10_000,
          20,
          (recheck) => {
            const stopLock = cache.onLockChange(node, recheck);
            const stopPod = cache.onPodChange(recheck);
            return () => {
              stopLock();
              stopPod();
            };
          },
        );
        const { locks } = newLocks({ view: cache.lockView });

        const freed = await locks.releaseIfReleasable(node, 'sweeper');

        expect(
          freed.classification,
          "a fresh lock, inside the bind grace, yet provably an earlier incarnation's",
        ).to.deep.include({ state: 'releasable', reason: 'owner-replaced' });
        expect(await readLock(core, node)).to.equal(undefined);

        // The same pod's own bind writes the lock after the pod's creation: a bind in progress.
        const own = lockValue(pod);
        await setLock(core, node, own);
        await eventually(
          'the store to see the new lock',
          () =>
            Promise.resolve(
              cache.lockOf(node)?.raw === own ? true : notYet(`store lock ${cache.lockOf(node)?.raw ?? 'none'}`),
            ),
          10_000,
          20,
          (recheck) => cache.onLockChange(node, recheck),
        );
        const kept = await locks.releaseIfReleasable(node, 'sweeper');
        expect(kept).to.deep.include({ outcome: 'kept' });
        expect(kept.classification).to.deep.include({ state: 'held', reason: 'bind-in-progress' });
        expect(await readLock(core, node)).to.equal(own);
      } finally {
        await cache.stop();
      }
    });

    it('releases a lock left behind after bind-phase success', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const pod = await createPod(core, namespace, 'done', { nodeName: node, bindPhase: 'success' });
      await setLock(core, node, lockValue(pod));

      const result = await newLocks().locks.releaseIfReleasable(node, 'sweeper');

      expect(result.classification).to.deep.include({ reason: 'allocation-finished' });
      expect(await readLock(core, node)).to.equal(undefined);
    });

    it('keeps a held lock and reports it', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const pod = await createPod(core, namespace, 'binding');
      const value = lockValue(pod);
      await setLock(core, node, value);
      const { locks } = newLocks();

      const result = await locks.releaseIfReleasable(node, 'sweeper');
      const inspection = await locks.inspect(node);

      expect(result).to.deep.include({ outcome: 'kept', value });
      expect(inspection).to.deep.include({
        raw: value,
        classification: { state: 'held', reason: 'bind-in-progress', ageMs: inspection.classification?.ageMs },
      });
      expect(inspection.owner).to.deep.include({ phase: 'Pending', deleting: false });
      expect(await readLock(core, node)).to.equal(value);
    });

    it('inspect reports a free node and a missing owner', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const { locks } = newLocks();
      expect(await locks.inspect(node)).to.deep.include({ raw: undefined, classification: undefined });
      await setLock(core, node, lockValue({ namespace, name: 'ghost' }));
      const inspection = await locks.inspect(node);
      expect(inspection.owner).to.equal(null);
      expect(inspection.classification).to.deep.include({ state: 'releasable', reason: 'owner-not-found' });
    });
  });

  describe('stalled locks', () => {
    it('an owner bound with bind-phase=allocating past the expiry is not taken over (stalled)', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const stuck = await createPod(core, namespace, 'stuck', { nodeName: node, bindPhase: 'allocating' });
      const podA = await createPod(core, namespace, 'pod-a');
      const value = lockValue(stuck, 10 * MINUTE);
      await setLock(core, node, value);
      const { locks, events } = newLocks();

      const error = await rejection(locks.acquire(node, podA));
      const sweep = await locks.releaseIfReleasable(node, 'sweeper');

      expect(error).to.be.instanceOf(LockContentionError);
      expect((error as LockContentionError).classification).to.deep.include({ state: 'stalled' });
      expect(sweep.outcome).to.equal('kept');
      expect(await readLock(core, node)).to.equal(value);
      expect(events.filter((event) => event.type === 'stalled')).to.have.length(2);
    });

    it('is taken over after NODELOCK_FORCE_AFTER when that is set', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const stuck = await createPod(core, namespace, 'stuck', { nodeName: node, bindPhase: 'allocating' });
      const podA = await createPod(core, namespace, 'pod-a');
      await setLock(core, node, lockValue(stuck, 10 * MINUTE));
      const { locks: patient } = newLocks({ config: { ...CONFIG, forceAfterMs: 15 * MINUTE } });
      const { locks: forcing } = newLocks({ config: { ...CONFIG, forceAfterMs: 8 * MINUTE } });

      expect(await rejection(patient.acquire(node, podA))).to.be.instanceOf(LockContentionError);
      const result = await forcing.acquire(node, podA);

      expect(result).to.deep.include({ outcome: 'taken-over' });
      expect(result.replaced?.reason).to.equal('forced-after-stall');
    });
  });

  describe('garbage and legacy values', () => {
    const garbage = [
      'lock',
      '',
      'a,b',
      '2026-13-45T99:00:00Z,ns,p',
      '{"json":true}',
      '2026-08-01T06:00:00Z,ns,pod,extra',
    ];
    for (const raw of garbage) {
      it(`never crashes on ${JSON.stringify(raw)}: inspect classifies it, release keeps it, acquire replaces it`, async () => {
        const { core, namespace } = testCluster();
        const node = await createGpuNode(core);
        const podA = await createPod(core, namespace, 'pod-a');
        await setLock(core, node, raw);
        const { locks } = newLocks();

        expect((await locks.inspect(node)).classification).to.deep.equal({
          state: 'releasable',
          reason: 'malformed',
          ageMs: undefined,
        });
        expect((await locks.release(node, podA)).outcome).to.equal('not-owner');
        expect(await readLock(core, node)).to.equal(raw);
        const result = await locks.acquire(node, podA);
        expect(result.replaced).to.deep.equal({ value: raw, reason: 'malformed' });
      });
    }

    it('a fresh legacy lock is held: acquire contends, release and the sweeper keep it', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const podA = await createPod(core, namespace, 'pod-a');
      const legacy = formatRfc3339(new Date(Date.now() - 5000));
      await setLock(core, node, legacy);
      const { locks } = newLocks();

      const error = await rejection(locks.acquire(node, podA));
      expect((error as Error).message).to.include('a legacy lock with no owner');
      expect((await locks.release(node, podA)).outcome).to.equal('not-owner');
      expect((await locks.releaseIfReleasable(node, 'sweeper')).outcome).to.equal('kept');
      expect(await readLock(core, node)).to.equal(legacy);
    });

    it('a legacy lock older than the expiry (with a +08:00 offset) is taken over', async () => {
      const { core, namespace } = testCluster();
      const node = await createGpuNode(core);
      const podA = await createPod(core, namespace, 'pod-a');
      const old = new Date(Date.now() - 6 * MINUTE + 8 * 3600_000).toISOString().replace(/\.\d{3}Z$/, '+08:00');
      await setLock(core, node, old);

      const result = await newLocks().locks.acquire(node, podA);

      expect(result.replaced).to.deep.equal({ value: old, reason: 'legacy-expired' });
    });
  });

  it('acquire on a missing node fails with NodeNotFoundError', async () => {
    const { namespace } = testCluster();
    const error = await rejection(newLocks().locks.acquire('no-such-node', { namespace, name: 'pod-a' }));
    expect(error).to.be.instanceOf(NodeNotFoundError);
  });
});
