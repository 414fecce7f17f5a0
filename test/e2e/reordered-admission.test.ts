import { EventEmitter } from 'node:events';
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { decodeAllocation } from '../../src/devices/allocation-codec.js';
import { ALLOCATED_ANNOTATION, NODE_LOCK_ANNOTATION } from '../../src/hami/wire.js';
import type { Wake } from '../support/eventually.js';
import { ExtenderFixture, fixtureForSuite, gpuPodSpec, gpuUuids } from '../support/extender-fixture.js';
import type { AllocateRecord } from '@vgpu-warden/stand-ins/hami-plugin';
import { describeNodeLock, describePod, podStory } from '../support/observations.js';
import { eventually, notYet, sharedControlPlane, testCluster, wakeOn } from '../support/test-cluster.js';

/**
 * Two GPU pods bound to one node through the real kube-scheduler and vgpu-warden, and a kubelet
 * that admits them in its own order. HAMi's Allocate carries no pod identity: the plugin hands the
 * admitted pod the devices of whichever pod the node lock names, so the question is when a kubelet
 * can admit a pod while the lock names another.
 *
 * vgpu-warden holds the lock from the first pod's bind until the plugin's Allocate for it, so the
 * second pod cannot even be bound while the first awaits admission: "admit the second first" needs
 * something else to free the first pod's lock. These cases do, and say what happens then. The
 * pods are pinned to different GPUs with different memory, so whose devices a pod got is plain.
 *
 * Simulated nodes: each case needs kubelet to admit in an order the test chooses (latest first, one
 * pod held back while the other is admitted, a force-deleted pod admitted anyway); a real kubelet
 * admits in its own order. What a real kubelet does in the same cases, in its order, is
 * real-reordered-admission.test.ts (and, for the force-deleted pod, real-seed-scenario.test.ts).
 */

// Short lock timings (the telemetry test's): the sweeper every second, expiry after 3 s.
const FAST = {
  BIND_GRACE: '1s',
  BIND_TIMEOUT: '900ms',
  BIND_LOCK_WAIT: '500ms',
  NODELOCK_EXPIRE: '3s',
  SWEEP_SCHEDULE: '* * * * * *',
  LEADER_ELECTION: 'false',
};
const FORCE_AFTER = { ...FAST, NODELOCK_FORCE_AFTER: '5s' };

interface Trail {
  at: number;
  line: string;
}

/** Polls a node's lock and keeps each change, for the time line. */
class LockTrail {
  readonly changes: { at: number; value: string | undefined }[] = [];
  /** Emits 'change' on each change kept, so that a wait on the trail need not poll it. */
  private readonly changed = new EventEmitter();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly core: CoreV1Api,
    private readonly node: string,
  ) {}

  start(): void {
    const poll = async () => {
      const value = (await this.core.readNode({ name: this.node })).metadata?.annotations?.[NODE_LOCK_ANNOTATION];
      if (this.changes.at(-1)?.value !== value || this.changes.length === 0) {
        this.changes.push({ at: Date.now(), value });
        this.changed.emit('change');
      }
    };
    this.timer = setInterval(() => {
      poll().catch(() => undefined);
    }, 50);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Resolves once the polls have seen the lock name `name`'s pod. */
  async names(name: string): Promise<void> {
    await eventually(
      `the lock to name ${name}`,
      () => {
        const last = this.changes.at(-1);
        return Promise.resolve(
          last?.value?.endsWith(`,${name}`) === true
            ? true
            : notYet(
                last === undefined
                  ? 'no poll of the lock answered yet'
                  : `the lock ${last.value ?? 'absent'} for ${Date.now() - last.at} ms (${this.changes.length} changes seen)`,
              ),
        );
      },
      10_000,
      20,
      wakeOn(this.changed, 'change'),
    );
  }

  /** The lock named `name`'s pod from `from` until `to` with no other value in between. */
  heldBy(name: string, from: number, to: number): boolean {
    const within = this.changes.filter((change) => change.at <= to);
    const before = within.filter((change) => change.at <= from).at(-1);
    const during = within.filter((change) => change.at > from);
    return [before, ...during].every((change) => change?.value?.endsWith(`,${name}`) === true);
  }
}

function devicesOf(pod: V1Pod): string[] {
  const allocation = decodeAllocation(pod.metadata?.annotations?.[ALLOCATED_ANNOTATION] ?? '');
  if ('error' in allocation) throw new Error(allocation.error);
  return allocation.flat().map((device) => `${device.uuid}/${device.memoryMiB}MiB`);
}

function handedOut(record: AllocateRecord | undefined): string[] {
  return (record?.devices ?? []).map((device) => `${device.uuid}/${device.usedMem}MiB`);
}

/** What the kubelet, the plugin and the node lock did, in order, relative to `t0`. */
function timeline(title: string, t0: number, fixture: ExtenderFixture, namespace: string, lock: LockTrail): string {
  const lines: Trail[] = [];
  for (const record of fixture.kubelet?.records ?? []) {
    if (record.pod.namespace !== namespace) continue;
    const detail =
      record.kind === 'bound'
        ? ` (admission due ${record.dueInMs === 'never' ? 'when released' : `in ${record.dueInMs ?? 0} ms`})`
        : record.message === undefined
          ? ''
          : `: ${record.message}`;
    lines.push({ at: record.at.getTime(), line: `kubelet   ${record.pod.name} ${record.kind}${detail}` });
  }
  for (const record of fixture.plugin?.records ?? []) {
    if (record.admitted.namespace !== namespace) continue;
    const resolved =
      record.resolvedTo === undefined ? 'no pod' : `${record.resolvedTo.name} (via ${record.via ?? '?'})`;
    const result =
      record.outcome === 'allocated'
        ? `devices ${handedOut(record).join(' ')}`
        : record.outcome === 'failed'
          ? `error "${record.error ?? ''}"`
          : 'stalled';
    lines.push({
      at: record.at.getTime(),
      line: `plugin    Allocate for ${record.admitted.name} -> ${resolved}: ${result}`,
    });
  }
  for (const change of lock.changes)
    lines.push({
      at: change.at,
      line: `node lock ${change.value === undefined ? '(none)' : change.value.split(',').slice(2).join(',')}`,
    });
  lines.sort((a, b) => a.at - b.at);
  return `        ${title}\n${lines.map(({ at, line }) => `          +${String(at - t0).padStart(6)} ms  ${line}`).join('\n')}`;
}

function printTimeline(title: string, t0: number, fixture: ExtenderFixture, namespace: string, lock: LockTrail): void {
  console.log(timeline(title, t0, fixture, namespace, lock));
}

async function pod(core: CoreV1Api, namespace: string, name: string): Promise<V1Pod> {
  return core.readNamespacedPod({ name, namespace });
}

/** Re-runs a wait as soon as the fixture's store sees the pod change; the poll stays as the fallback. */
function onPod(fixture: ExtenderFixture, namespace: string, name: string): Wake {
  return (recheck) =>
    fixture.server!.cache.onPodChange((changed) => {
      if (changed.metadata?.namespace === namespace && changed.metadata.name === name) recheck();
    });
}

async function waitFor(
  fixture: ExtenderFixture,
  namespace: string,
  name: string,
  what: string,
  test: (pod: V1Pod) => boolean,
  timeoutMs = 30_000,
): Promise<V1Pod> {
  return eventually(
    `${name} ${what}`,
    async () => {
      const current = await pod(fixture.core, namespace, name);
      return test(current) ? current : notYet(await podStory(fixture.core, namespace, name, current));
    },
    timeoutMs,
    50,
    onPod(fixture, namespace, name),
  );
}

const bound = (node: string) => (current: V1Pod) => current.spec?.nodeName === node;
const running = (current: V1Pod) => current.status?.phase === 'Running';
const rejected = (current: V1Pod) => current.status?.phase === 'Failed';

describe('a kubelet admitting two GPU pods of one node in its own order', function () {
  this.timeout(120_000);

  /** A node with two GPUs; `first` pinned to GPU 0 with 1000 MiB, `second` to GPU 1 with 2000 MiB. */
  async function setUp(fixture: ExtenderFixture) {
    const { core, namespace } = testCluster();
    const { group, nodes } = await fixture.createNodes(1, 2);
    const node = nodes[0] ?? '';
    const [gpu0 = '', gpu1 = ''] = gpuUuids(node, 2);
    const lock = new LockTrail(core, node);
    lock.start();
    const create = (name: 'first' | 'second') =>
      core.createNamespacedPod({
        namespace,
        body: gpuPodSpec(
          name,
          group,
          { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': name === 'first' ? '1000' : '2000' },
          { 'nvidia.com/use-gpuuuid': name === 'first' ? gpu0 : gpu1 },
        ),
      });
    return {
      fixture,
      core,
      namespace,
      node,
      lock,
      create,
      t0: Date.now(),
      own: { first: [`${gpu0}/1000MiB`], second: [`${gpu1}/2000MiB`] },
    };
  }

  const recordsFor = (fixture: ExtenderFixture, namespace: string, name: string) =>
    (fixture.plugin?.records ?? []).filter(
      (record) =>
        record.admitted.namespace === namespace && record.admitted.name === name && record.outcome !== 'stalled',
    );

  /** first bound and held by the kubelet; the sweeper forces its lock free; second bound. */
  async function secondBoundAfterForcedRelease(setup: Awaited<ReturnType<typeof setUp>>) {
    const { core, namespace, node, create } = setup;
    await create('first');
    await waitFor(setup.fixture, namespace, 'first', 'bound', bound(node));
    await create('second');
    await waitFor(setup.fixture, namespace, 'second', 'bound', bound(node), 60_000);
    // Events are not watched here: polled only.
    const forced = await eventually(
      'NodeLockReleased (forced-after-stall) on the node',
      async () => {
        const onNode = (await core.listEventForAllNamespaces()).items.filter(
          (event) => event.involvedObject.name === node,
        );
        const released = onNode.find((event) => event.reason === 'NodeLockReleased');
        if (released !== undefined) return released;
        const reasons =
          onNode
            .slice(-3)
            .map((event) => event.reason ?? '?')
            .join(', ') || 'none';
        return notYet(
          `${onNode.length} events on ${node} (the last listed: ${reasons}); ${await describeNodeLock(core, node)}`,
        );
      },
      10_000,
      100,
    );
    expect(forced.message).to.include('forced-after-stall').and.include('first');
  }

  describe('default lock rules (no NODELOCK_FORCE_AFTER)', () => {
    let fixture: ExtenderFixture;
    fixtureForSuite(
      () => new ExtenderFixture(sharedControlPlane(), FAST, { kubelet: { order: 'latest-first' } }),
      (started) => {
        fixture = started;
      },
    );

    it('the second pod cannot be bound before the first is allocated, even with the first held past NODELOCK_EXPIRE; each gets its own GPU', async () => {
      const { core, namespace, node, lock, create, t0, own } = await setUp(fixture);
      try {
        // The kubelet would take the later-bound pod first (latest-first) and holds the first one back.
        fixture.admission = (current) => (current.metadata?.name === 'first' ? 'never' : 0);
        await create('first');
        await waitFor(fixture, namespace, 'first', 'bound', bound(node));
        await lock.names('first');
        await create('second');
        const heldFrom = Date.now();
        // Past the 3 s expiry and several sweeps: the lock is stalled, never taken over.
        await new Promise((resolve) => setTimeout(resolve, 6500));
        expect(
          (await pod(core, namespace, 'second')).spec?.nodeName,
          'second bound while first awaited Allocate',
        ).to.equal(undefined);
        expect(lock.heldBy('first', heldFrom, Date.now()), "the lock stayed first's throughout").to.equal(true);

        expect(fixture.kubelet?.admitNow(namespace, 'first')).to.equal(true);
        await waitFor(fixture, namespace, 'first', 'Running', running);
        const second = await waitFor(fixture, namespace, 'second', 'Running', running, 60_000);
        printTimeline('first held 6.5 s by the kubelet, then admitted:', t0, fixture, namespace, lock);

        const [firstAllocate] = recordsFor(fixture, namespace, 'first');
        const [secondAllocate] = recordsFor(fixture, namespace, 'second');
        expect(firstAllocate?.resolvedTo?.name).to.equal('first');
        expect(handedOut(firstAllocate)).to.deep.equal(own.first);
        expect(secondAllocate?.resolvedTo?.name).to.equal('second');
        expect(handedOut(secondAllocate)).to.deep.equal(own.second);
        expect(devicesOf(second)).to.deep.equal(own.second);
        const secondBound = fixture.kubelet?.recordsOf(namespace, 'second').find((record) => record.kind === 'bound');
        expect(secondBound?.at.getTime(), "second bound only after first's Allocate").to.be.greaterThan(
          firstAllocate?.at.getTime() ?? Infinity,
        );
        expect(fixture.plugin?.foreignAllocations()).to.deep.equal([]);
      } finally {
        lock.stop();
      }
    });

    it('a graceful delete keeps the lock of a pod the kubelet has not admitted yet; a lagging kubelet admits it with its own GPU, then the next pod binds', async () => {
      // A kubelet down or lagging from before first's bind, catching up after first's deletion began.
      // kubelet admits (Allocate included) a pod it first sees already terminating: HandlePodAdditions
      // only skips pods whose termination its pod workers already know of.
      const { core, namespace, node, lock, create, t0, own } = await setUp(fixture);
      try {
        fixture.admission = (current) => (current.metadata?.name === 'first' ? 'never' : 0);
        await create('first');
        await waitFor(fixture, namespace, 'first', 'bound', bound(node));
        await lock.names('first');
        await create('second');
        // A plain DELETE: on a kubelet's node it only sets deletionTimestamp until the kubelet is done.
        const deleted = Date.now();
        await core.deleteNamespacedPod({ name: 'first', namespace });
        await new Promise((resolve) => setTimeout(resolve, 2500));
        expect(
          (await pod(core, namespace, 'second')).spec?.nodeName,
          'second bound while the deleting first could still be admitted',
        ).to.equal(undefined);
        expect(lock.heldBy('first', deleted, Date.now()), "the lock stayed first's after its graceful delete").to.equal(
          true,
        );

        expect(fixture.kubelet?.admitNow(namespace, 'first')).to.equal(true);
        await eventually(
          'first to be gone (the kubelet finished its deletion)',
          async () => {
            const first = (await core.listNamespacedPod({ namespace })).items.find(
              (item) => item.metadata?.name === 'first',
            );
            return first === undefined ? true : notYet(`first still listed: ${describePod(first)}`);
          },
          10_000,
          50,
          onPod(fixture, namespace, 'first'),
        );
        const second = await waitFor(fixture, namespace, 'second', 'Running', running, 60_000);
        printTimeline(
          'first deleted gracefully before the kubelet got to it; the kubelet then admits first:',
          t0,
          fixture,
          namespace,
          lock,
        );

        const [firstAllocate] = recordsFor(fixture, namespace, 'first');
        expect(firstAllocate?.resolvedTo?.name, 'first got its own devices').to.equal('first');
        expect(handedOut(firstAllocate)).to.deep.equal(own.first);
        const [secondAllocate] = recordsFor(fixture, namespace, 'second');
        expect(handedOut(secondAllocate)).to.deep.equal(own.second);
        expect(devicesOf(second)).to.deep.equal(own.second);
        expect(fixture.plugin?.foreignAllocations()).to.deep.equal([]);
      } finally {
        lock.stop();
      }
    });
  });

  describe('a kubelet that admits pods already deleted (admitDeleted)', () => {
    // Its own fixture, so that its kube-scheduler is the only one named hami-scheduler while it runs:
    // beside the suite above's, either scheduler could bind the pods (soak, loaded machine).
    // Its plugin tells of each Allocate it records, for the wait on first's below.
    const allocations = new EventEmitter();
    let lagging: ExtenderFixture;
    fixtureForSuite(
      () =>
        new ExtenderFixture(sharedControlPlane(), FAST, {
          kubelet: { admitDeleted: true },
          plugin: {
            onRecord: () => {
              allocations.emit('record');
            },
          },
        }),
      (started) => {
        lagging = started;
      },
    );

    it("DOCUMENTS WHAT THE RULE RELIES ON (invariant 7): on a node whose kubelet leaves no trace in the API, a pod force-deleted before the kubelet handled its bind is still admitted, and handed the next pod's GPU", async () => {
      // kubelet's sync loop handles the pod's ADD before its REMOVE: with the loop busy (say behind a
      // slow Allocate) it can admit a pod that is already gone from the API (admitDeleted). A real
      // kubelet reports its version on the Node, keeps a Lease and records an Event when it rejects
      // the dead pod: vgpu-warden keeps the lock on the dead pod until then (kubelet-may-admit), which
      // closes this gap on real nodes (test/e2e/real-seed-scenario.test.ts, 10 of 10 runs). The
      // simulator does none of the three, so to the rule it is a node without kubelet, where nothing
      // can admit a pod: this case shows what would happen if such a node did.
      const { core, namespace, node, lock, create, t0, own } = await setUp(lagging);
      try {
        lagging.admission = () => 'never';
        await create('first');
        await waitFor(lagging, namespace, 'first', 'bound', bound(node));
        await create('second');
        await core.deleteNamespacedPod({ name: 'first', namespace, gracePeriodSeconds: 0 });
        await waitFor(lagging, namespace, 'second', 'bound', bound(node), 60_000);
        await lock.names('second');

        expect(lagging.kubelet?.admitNow(namespace, 'first')).to.equal(true);
        await eventually(
          "first's Allocate",
          () => {
            const records = (lagging.plugin?.records ?? []).filter((record) => record.admitted.namespace === namespace);
            return Promise.resolve(
              recordsFor(lagging, namespace, 'first').length > 0
                ? true
                : notYet(
                    `Allocate records in the namespace: ${records.map((record) => `${record.admitted.name} ${record.outcome}`).join(', ') || 'none'}`,
                  ),
            );
          },
          10_000,
          50,
          wakeOn(allocations, 'record'),
        );
        expect(lagging.kubelet?.admitNow(namespace, 'second')).to.equal(true);
        const second = await waitFor(lagging, namespace, 'second', 'rejected', rejected);
        printTimeline(
          'first force-deleted before the kubelet handled its bind; the kubelet then admits first, then second:',
          t0,
          lagging,
          namespace,
          lock,
        );

        const [firstAllocate] = recordsFor(lagging, namespace, 'first');
        expect(firstAllocate?.resolvedTo?.name, "first (gone) was handed second's devices").to.equal('second');
        expect(handedOut(firstAllocate)).to.deep.equal(own.second);
        expect(
          lagging.plugin
            ?.foreignAllocations()
            .map((record) => `${record.admitted.name}->${record.resolvedTo?.name ?? ''}`),
        ).to.deep.equal(['first->second']);
        expect(second.status?.reason).to.equal('UnexpectedAdmissionError');
        expect(second.status?.message).to.include('no binding pod found on node');
      } catch (error) {
        console.log(timeline('FAILED; what happened:', t0, lagging, namespace, lock));
        throw error;
      } finally {
        lock.stop();
      }
    });
  });

  describe('NODELOCK_FORCE_AFTER=5s (opt-in): a stalled lock is released', () => {
    let fixture: ExtenderFixture;
    fixtureForSuite(
      () => new ExtenderFixture(sharedControlPlane(), FORCE_AFTER, { kubelet: { order: 'latest-first' } }),
      (started) => {
        fixture = started;
      },
    );

    it('the second pod is bound and admitted first with its own GPU; the first then finds no lock and is rejected: no wrong allocation', async () => {
      const setup = await setUp(fixture);
      const { namespace, lock, t0, own } = setup;
      try {
        fixture.admission = (current) => (current.metadata?.name === 'first' ? 'never' : 0);
        await secondBoundAfterForcedRelease(setup);
        await waitFor(fixture, namespace, 'second', 'Running', running);
        expect(fixture.kubelet?.admitNow(namespace, 'first')).to.equal(true);
        const first = await waitFor(fixture, namespace, 'first', 'rejected', rejected);
        printTimeline(
          'first held by the kubelet past NODELOCK_FORCE_AFTER; second bound and admitted; then first:',
          t0,
          fixture,
          namespace,
          lock,
        );

        const [secondAllocate] = recordsFor(fixture, namespace, 'second');
        expect(secondAllocate?.resolvedTo?.name).to.equal('second');
        expect(handedOut(secondAllocate)).to.deep.equal(own.second);
        const [firstAllocate] = recordsFor(fixture, namespace, 'first');
        expect(firstAllocate).to.deep.include({
          outcome: 'failed',
          error: `no binding pod found on node ${setup.node}`,
        });
        expect(first.status?.reason).to.equal('UnexpectedAdmissionError');
        expect(fixture.plugin?.foreignAllocations()).to.deep.equal([]);
      } finally {
        lock.stop();
      }
    });

    it("DOCUMENTS WHY IT IS OPT-IN (HAMi #3096): admitting the first while the second holds the lock hands the first the second's GPU, and the second is rejected", async () => {
      const setup = await setUp(fixture);
      const { namespace, lock, t0, own } = setup;
      try {
        fixture.admission = () => 'never';
        await secondBoundAfterForcedRelease(setup);
        expect(fixture.kubelet?.admitNow(namespace, 'first')).to.equal(true);
        await waitFor(fixture, namespace, 'first', 'Running', running);
        expect(fixture.kubelet?.admitNow(namespace, 'second')).to.equal(true);
        const second = await waitFor(fixture, namespace, 'second', 'rejected', rejected);
        printTimeline(
          'first held past NODELOCK_FORCE_AFTER, second bound; the kubelet admits first, then second:',
          t0,
          fixture,
          namespace,
          lock,
        );

        const [firstAllocate] = recordsFor(fixture, namespace, 'first');
        expect(firstAllocate?.resolvedTo?.name).to.equal('second');
        expect(handedOut(firstAllocate), "first runs on second's GPU share").to.deep.equal(own.second);
        expect(
          fixture.plugin
            ?.foreignAllocations()
            .map((record) => `${record.admitted.name}->${record.resolvedTo?.name ?? ''}`),
        ).to.deep.equal(['first->second']);
        expect(second.status?.reason).to.equal('UnexpectedAdmissionError');
      } finally {
        lock.stop();
      }
    });
  });

  describe("NODELOCK_FORCE_AFTER=5s, the plugin with HAMi's list fallback", () => {
    // Its own fixture: one kube-scheduler named hami-scheduler at a time (see above).
    let withFallback: ExtenderFixture;
    fixtureForSuite(
      () =>
        new ExtenderFixture(sharedControlPlane(), FORCE_AFTER, {
          kubelet: { order: 'latest-first' },
          plugin: { fallback: true },
        }),
      (started) => {
        withFallback = started;
      },
    );

    it("with HAMi's list fallback on, the first pod admitted after the second finds its own GPU", async () => {
      const setup = await setUp(withFallback);
      const { namespace, lock, t0, own } = setup;
      try {
        withFallback.admission = (current) => (current.metadata?.name === 'first' ? 'never' : 0);
        await secondBoundAfterForcedRelease(setup);
        await waitFor(withFallback, namespace, 'second', 'Running', running);
        expect(withFallback.kubelet?.admitNow(namespace, 'first')).to.equal(true);
        await waitFor(withFallback, namespace, 'first', 'Running', running);
        printTimeline("as above, the plugin with HAMi's list fallback:", t0, withFallback, namespace, lock);

        const [firstAllocate] = recordsFor(withFallback, namespace, 'first');
        expect(firstAllocate).to.deep.include({ outcome: 'allocated', via: 'fallback' });
        expect(firstAllocate?.resolvedTo?.name).to.equal('first');
        expect(handedOut(firstAllocate)).to.deep.equal(own.first);
        expect(withFallback.plugin?.foreignAllocations()).to.deep.equal([]);
      } finally {
        lock.stop();
      }
    });
  });
});
