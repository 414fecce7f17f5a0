import { CoordinationV1Api } from '@kubernetes/client-node';
import { expect } from 'chai';
import { KubeNodeLockApi } from '../../src/lock/kube-node-lock-api.js';
import { formatLockValue } from '../../src/lock/lock-value.js';
import { NodeLocks } from '../../src/lock/node-locks.js';
import { LeaderElector } from '../../src/sweeper/leader-election.js';
import { SweepSchedule } from '../../src/sweeper/sweep-schedule.js';
import { Lifecycle } from '../../src/lifecycle/lifecycle.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { createGpuNode, readLock, setLock } from '../support/lock-helpers.js';
import { eventually, notYet, sharedControlPlane, testCluster, uniqueName } from '../support/test-cluster.js';
import type { ConditionalReleaseResult, ReleasePath } from '../../src/lock/lock-events.js';

/** Who holds the Lease as the apiserver has it: what a wait for a takeover saw last. */
async function describeLease(coordination: CoordinationV1Api, namespace: string, name: string): Promise<string> {
  try {
    const spec = (await coordination.readNamespacedLease({ name, namespace })).spec;
    const renewed =
      spec?.renewTime === undefined
        ? 'never renewed'
        : `renewed ${Date.now() - new Date(spec.renewTime).getTime()} ms ago`;
    return `Lease held by ${spec?.holderIdentity || 'nobody'}, ${renewed}, ${spec?.leaseTransitions ?? 0} transitions`;
  } catch {
    return 'no Lease';
  }
}

/** Why an elector is not leading yet: its own problem() and the Lease's holder. */
async function notLeading(who: string, elector: LeaderElector, lease: () => Promise<string>): Promise<string> {
  return `${who} not leading (${elector.problem() ?? 'no problem reported'}); ${await lease()}`;
}

interface Replica {
  elector: LeaderElector;
  sweeper: SweepSchedule;
  /** Runs the sweeper while its elector leads. */
  lifecycle: Lifecycle;
  releasedBy: string[];
}

describe('leader-elected sweeper with two replicas', function () {
  this.timeout(90_000);

  it('only the leader sweeps; when the leader dies mid-sweep the follower takes over within the lease duration', async () => {
    const { core, kubeConfig, namespace } = testCluster();
    const coordination = kubeConfig.makeApiClient(CoordinationV1Api);
    const leaseName = uniqueName('sweeper');
    const nodes = await Promise.all(Array.from({ length: 6 }, () => createGpuNode(core)));
    // Owners that do not exist: every lock is releasable.
    for (const node of nodes)
      await setLock(core, node, formatLockValue(new Date(), { namespace, name: `gone-${node}` }));
    const lockApi = new KubeNodeLockApi(core);
    const replicas: Replica[] = ['a', 'b'].map((name) => {
      const releasedBy: string[] = [];
      const locks = new NodeLocks({ api: lockApi, config: { bindGraceMs: 60_000, expireMs: 300_000 } });
      const elector = new LeaderElector({
        api: coordination,
        namespace,
        name: leaseName,
        identity: `replica-${name}_${uniqueName('id')}`,
      });
      // Slow releases (1 s each) so that a pass is still running when the leader is killed.
      const slow = {
        releaseIfReleasable: async (node: string, path: ReleasePath): Promise<ConditionalReleaseResult> => {
          await new Promise((resolve) => setTimeout(resolve, 1000));
          const result = await locks.releaseIfReleasable(node, path);
          if (result.outcome === 'released') releasedBy.push(node);
          return result;
        },
      };
      const sweeper = new SweepSchedule({
        schedule: '* * * * * *',
        targets: { lockedNodes: () => nodes },
        locks: slow,
        concurrency: 1,
      });
      return { elector, sweeper, lifecycle: new Lifecycle({ leadership: elector }), releasedBy };
    });
    const [first, second] = replicas as [Replica, Replica];
    const leaseNow = () => describeLease(coordination, namespace, leaseName);
    first.elector.start();
    await eventually(
      'replica a to lead',
      async () => (first.elector.isLeader() ? true : notYet(await notLeading('a', first.elector, leaseNow))),
      10_000,
      50,
    );
    second.elector.start();
    first.lifecycle.run(first.sweeper);
    second.lifecycle.run(second.sweeper);
    try {
      await eventually(
        'the leader to release its first lock',
        () =>
          Promise.resolve(
            first.releasedBy.length >= 1
              ? true
              : notYet(
                  `a released none yet, a leading ${first.elector.isLeader()}, b released ${second.releasedBy.length}`,
                ),
          ),
        10_000,
        50,
      );
      expect(second.elector.isLeader()).to.equal(false);
      expect(second.releasedBy).to.deep.equal([]);

      // Kill the leader mid-sweep: no lease release, no more renewals, its pass stops at once.
      const killedAt = Date.now();
      await first.elector.stop({ release: false });
      await first.lifecycle.stopAll();
      const releasedByLeader = first.releasedBy.length;

      await eventually(
        'the follower to take over',
        async () => (second.elector.isLeader() ? true : notYet(await notLeading('b', second.elector, leaseNow))),
        30_000,
        100,
      );
      const takeoverMs = Date.now() - killedAt;
      console.log(`        follower took over ${takeoverMs} ms after the leader died (lease 15 s)`);
      expect(takeoverMs).to.be.below(15_000 + 2_000 * 1.2 + 1000);
      await eventually(
        'every lock released',
        async () => {
          const locks = await Promise.all(nodes.map((node) => readLock(core, node)));
          const held = nodes.flatMap((node, index) =>
            locks[index] === undefined ? [] : [`${node} locked ${locks[index]}`],
          );
          return held.length === 0
            ? true
            : notYet(
                `${held.length} of ${nodes.length} still locked (first: ${held[0]}); released by a ${first.releasedBy.length}, by b ${second.releasedBy.length}, b leading ${second.elector.isLeader()}`,
              );
        },
        30_000,
        250,
      );
      expect(first.releasedBy.length).to.equal(releasedByLeader);
      expect(first.releasedBy.length + second.releasedBy.length).to.equal(nodes.length);
      expect(new Set([...first.releasedBy, ...second.releasedBy]).size).to.equal(nodes.length);
    } finally {
      await Promise.all(
        replicas.map(async (replica) => {
          await replica.lifecycle.stopAll();
          await replica.elector.stop({ release: true });
        }),
      );
    }
  });

  it('a leader that stops cleanly hands the lease over at once', async () => {
    const { kubeConfig, namespace } = testCluster();
    const coordination = kubeConfig.makeApiClient(CoordinationV1Api);
    const name = uniqueName('handover');
    const a = new LeaderElector({ api: coordination, namespace, name, identity: 'a_1', retryPeriodMs: 200 });
    const b = new LeaderElector({ api: coordination, namespace, name, identity: 'b_1', retryPeriodMs: 200 });
    const leaseNow = () => describeLease(coordination, namespace, name);
    a.start();
    await eventually(
      'a to lead',
      async () => (a.isLeader() ? true : notYet(await notLeading('a', a, leaseNow))),
      10_000,
      20,
    );
    b.start();
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(b.isLeader()).to.equal(false);
    const stopped = Date.now();
    await a.stop({ release: true });
    await eventually(
      'b to lead',
      async () => (b.isLeader() ? true : notYet(await notLeading('b', b, leaseNow))),
      10_000,
      20,
    );
    expect(Date.now() - stopped).to.be.below(3000);
    const lease = await coordination.readNamespacedLease({ name, namespace });
    expect(lease.spec?.holderIdentity).to.equal('b_1');
    expect(lease.spec?.leaseTransitions).to.equal(1);
    await b.stop({ release: true });
  });

  it('a follower whose Lease request never answers gives up on it and takes over from a dead leader', async () => {
    // Found by the chaos suite: the leader was SIGKILLed and the follower's Lease request hung
    // (apiserver restarting under it); with no deadline its loop waited 80 s and nobody swept.
    const { kubeConfig, namespace } = testCluster();
    const coordination = kubeConfig.makeApiClient(CoordinationV1Api);
    const proxy = await FaultProxy.start({ upstream: sharedControlPlane() });
    try {
      const name = uniqueName('hung');
      const timing = { leaseDurationMs: 2000, renewDeadlineMs: 1500, retryPeriodMs: 200 };
      const a = new LeaderElector({ api: coordination, namespace, name, identity: 'a_1', ...timing });
      const b = new LeaderElector({
        api: proxy.kubeConfig().makeApiClient(CoordinationV1Api),
        namespace,
        name,
        identity: 'b_1',
        ...timing,
      });
      const leaseNow = () => describeLease(coordination, namespace, name);
      a.start();
      await eventually(
        'a to lead',
        async () => (a.isLeader() ? true : notYet(await notLeading('a', a, leaseNow))),
        10_000,
        20,
      );
      // b's next Lease read never answers.
      const hang = proxy.addRule({
        match: { method: 'GET', path: new RegExp(`/leases/${name}$`) },
        action: { kind: 'hang' },
        times: 1,
      });
      b.start();
      await hang.whenHit();
      // a dies without handing the Lease back.
      await a.stop({ release: false });
      const died = Date.now();
      await eventually(
        'b to lead',
        async () => (b.isLeader() ? true : notYet(await notLeading('b', b, leaseNow))),
        20_000,
        50,
      );
      const hung = proxy.requestsWhere().filter((request) => request.fault === 'hang');
      expect(hung, 'one hung read').to.have.length(1);
      // b closed it (the round's deadline aborts the request), the proxy did not.
      expect(hung[0]?.endedAt, 'the hung read was given up by b').to.be.a('number');
      expect(proxy.hungRequests).to.equal(0);
      expect((await coordination.readNamespacedLease({ name, namespace })).spec?.holderIdentity).to.equal('b_1');
      console.log(
        `        b led ${Date.now() - died} ms after a died (lease ${timing.leaseDurationMs} ms, round deadline ${timing.renewDeadlineMs / 2} ms)`,
      );
      await b.stop({ release: true });
    } finally {
      await proxy.stop();
    }
  });
});
