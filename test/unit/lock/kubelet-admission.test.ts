import { expect } from 'chai';
import {
  admissibleCandidates,
  KubeletAdmission,
  type GoneOwnerLock,
  type KubeletEvidenceApi,
} from '../../../src/lock/kubelet-admission.js';
import { mayBeAdmittedOn, type GoneIncarnation } from '../../../src/lock/lock-owner.js';

const NODE = 'gpu-1';
const OWNER = { namespace: 'ns', name: 'victim' };
const LOCK = '2026-12-02T10:00:00Z,ns,victim';
/** The question about OWNER's lock LOCK on NODE, its owner gone: `candidates` and what differs. */
const gone = (candidates: GoneIncarnation[], differs: Partial<GoneOwnerLock> = {}): GoneOwnerLock => ({
  node: NODE,
  owner: OWNER,
  lockValue: LOCK,
  candidates,
  ...differs,
});
const incarnation = (overrides: Partial<GoneIncarnation> = {}): GoneIncarnation => ({
  uid: 'uid-victim',
  boundTo: NODE,
  bindPhase: 'allocating',
  lastVersion: '100',
  final: true,
  vanishedAt: new Date('2026-12-02T10:00:01Z'),
  ...overrides,
});
/** The gone incarnations a lock may have been written for: here the one victim. */
const vanished = (overrides: Partial<GoneIncarnation> = {}): GoneIncarnation[] => [incarnation(overrides)];

/** The kubelet's traces as a test sets them: the node Lease's version (undefined: none) and Events by uid. */
class Evidence implements KubeletEvidenceApi {
  lease: string | undefined = '100';
  /** The apiserver's record of the Lease's last write. */
  renewedAt: Date | undefined;
  /** The apiserver's clock when it answered (Date header); undefined: it sent none. */
  readAt: Date | undefined;
  registered = true;
  reportedUids = new Set<string>();
  calls: string[] = [];
  nodeLease(node: string) {
    this.calls.push(`lease ${node}`);
    return Promise.resolve(
      this.lease === undefined
        ? undefined
        : { resourceVersion: this.lease, renewedAt: this.renewedAt, readAt: this.readAt },
    );
  }
  kubeletRegistered(node: string) {
    this.calls.push(`node ${node}`);
    return Promise.resolve(this.registered);
  }
  kubeletReportedOn(node: string, pod: { namespace: string; name: string; uid: string }) {
    this.calls.push(`events ${node} ${pod.namespace}/${pod.name} ${pod.uid}`);
    return Promise.resolve(this.reportedUids.has(pod.uid));
  }
  /** Pods on the node kubelet has not acknowledged. */
  waiting: { namespace: string; name: string }[] = [];
  awaitingAcknowledgement(node: string) {
    this.calls.push(`pods ${node}`);
    return Promise.resolve(this.waiting);
  }
}

function setup() {
  const evidence = new Evidence();
  let now = Date.parse('2026-12-02T10:00:02Z');
  const check = new KubeletAdmission({ api: evidence, clock: () => now, aliveMarginMs: 5_000 });
  return {
    evidence,
    check,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe('kubelet admission of a lock owner that is gone', () => {
  it('a last state that leaves kubelet nothing to admit here decides at once, with no API call', async () => {
    const { evidence, check } = setup();
    for (const last of [
      vanished({ boundTo: undefined }),
      vanished({ boundTo: 'gpu-2' }),
      vanished({ bindPhase: 'success' }),
      vanished({ bindPhase: 'failed' }),
      vanished({ bindPhase: undefined }),
    ]) {
      expect(admissibleCandidates(last, NODE)).to.deep.equal([]);
      expect(await check.mayStillAdmit(gone(last))).to.equal(false);
    }
    expect(evidence.calls).to.deep.equal([]);
    expect(admissibleCandidates(vanished(), NODE)).to.have.length(1);
    expect(admissibleCandidates([], NODE), 'an unknown last state may be anything').to.equal(undefined);
  });

  // Issue #42: the store kept one record per name, so a StatefulSet pod recreated and deleted again
  // (never bound) overwrote the record of the incarnation kubelet may still admit.
  it('an earlier incarnation left allocating here is not hidden by a later one of the same name that never got bound', async () => {
    const { check } = setup();
    const both = [
      incarnation(),
      incarnation({ uid: 'uid-second', boundTo: undefined, bindPhase: undefined, lastVersion: '120' }),
    ];
    expect(admissibleCandidates(both, NODE)?.map((one) => one.uid)).to.deep.equal(['uid-victim']);
    expect(await check.mayStillAdmit(gone(both))).to.equal(true);
  });

  it('kubelet reporting on one incarnation does not vouch for another that it may still admit', async () => {
    const { evidence, check } = setup();
    const both = [incarnation(), incarnation({ uid: 'uid-second', lastVersion: '120' })];
    evidence.reportedUids.add('uid-second');
    expect(await check.mayStillAdmit(gone(both))).to.equal(true);
    evidence.reportedUids.add('uid-victim');
    expect(await check.mayStillAdmit(gone(both))).to.equal(false);
  });

  // Issue #42 item 3: a relist's synthesized delete carries a stale copy of the pod.
  it('a pod that only vanished from a relist may have been bound here in the gap: its stale copy proves nothing but what cannot change', () => {
    expect(
      mayBeAdmittedOn(incarnation({ final: false, boundTo: undefined, bindPhase: undefined }), NODE),
      'unbound in the stale copy',
    ).to.equal(true);
    expect(
      mayBeAdmittedOn(incarnation({ final: true, boundTo: undefined, bindPhase: undefined }), NODE),
      'unbound in its last state',
    ).to.equal(false);
    expect(
      mayBeAdmittedOn(incarnation({ final: false, boundTo: 'gpu-2' }), NODE),
      'bound elsewhere: nodeName never changes',
    ).to.equal(false);
    expect(mayBeAdmittedOn(incarnation({ final: false, bindPhase: 'success' }), NODE), 'allocated here').to.equal(
      false,
    );
    expect(mayBeAdmittedOn(incarnation({ final: false }), NODE), 'allocating here').to.equal(true);
  });

  it('a node without a kubelet Lease and without a kubelet version has no kubelet to admit anything (a simulated node)', async () => {
    const { evidence, check } = setup();
    evidence.lease = undefined;
    evidence.registered = false;
    expect(await check.mayStillAdmit(gone(vanished()))).to.equal(false);
  });

  it('a registered kubelet without a Lease yet (it creates it seconds after registering) may still admit; the Lease appearing counts as a renewal', async () => {
    const { evidence, check, advance } = setup();
    evidence.lease = undefined;
    expect(await check.mayStillAdmit(gone(vanished()))).to.equal(true);
    advance(10_000);
    expect(await check.mayStillAdmit(gone(vanished()))).to.equal(true);
    evidence.lease = '7';
    expect(await check.mayStillAdmit(gone(vanished()))).to.equal(true);
    advance(5_000);
    expect(await check.mayStillAdmit(gone(vanished()))).to.equal(false);
  });

  it('kubelet may admit it until it records an Event about that incarnation (its Allocate was refused), then not', async () => {
    const { evidence, check, advance } = setup();
    expect(await check.mayStillAdmit(gone(vanished()))).to.equal(true);
    advance(60_000);
    expect(await check.mayStillAdmit(gone(vanished())), 'time alone proves nothing: kubelet may be frozen').to.equal(
      true,
    );
    evidence.reportedUids.add('another-incarnation');
    expect(
      await check.mayStillAdmit(gone(vanished())),
      'an Event about another pod of that name does not count',
    ).to.equal(true);
    evidence.reportedUids.add('uid-victim');
    expect(await check.mayStillAdmit(gone(vanished()))).to.equal(false);
    expect(evidence.calls).to.include('events gpu-1 ns/victim uid-victim');
  });

  it('a Lease renewed after the owner was gone, plus the margin without such an Event, means kubelet is past it', async () => {
    const { evidence, check, advance } = setup();
    expect(await check.mayStillAdmit(gone(vanished()))).to.equal(true);
    advance(9_000);
    expect(await check.mayStillAdmit(gone(vanished())), 'no renewal yet').to.equal(true);
    evidence.lease = '101';
    expect(
      await check.mayStillAdmit(gone(vanished())),
      'renewal just seen: kubelet gets the margin to drain its queue',
    ).to.equal(true);
    advance(4_999);
    expect(await check.mayStillAdmit(gone(vanished()))).to.equal(true);
    advance(1);
    expect(await check.mayStillAdmit(gone(vanished()))).to.equal(false);
  });

  it('without a last state (this process restarted) only the Lease can tell, and a new lock value starts over', async () => {
    const { evidence, check, advance } = setup();
    expect(await check.mayStillAdmit(gone([]))).to.equal(true);
    expect(
      evidence.calls.some((call) => call.startsWith('events')),
      'no uid, no Event to match',
    ).to.equal(false);
    evidence.lease = '101';
    expect(await check.mayStillAdmit(gone([]))).to.equal(true);
    const other = '2026-12-02T10:00:09Z,ns,victim';
    advance(6_000);
    expect(
      await check.mayStillAdmit(gone([], { lockValue: other })),
      'a renewal seen for the old value proves nothing about a newer one',
    ).to.equal(true);
    advance(6_000);
    expect(
      await check.mayStillAdmit(gone([], { lockValue: other })),
      'no renewal since this value was first seen',
    ).to.equal(true);
    evidence.lease = '102';
    await check.mayStillAdmit(gone([], { lockValue: other }));
    advance(5_000);
    expect(await check.mayStillAdmit(gone([], { lockValue: other }))).to.equal(false);
  });

  it('remembers at most maxTracked nodes', async () => {
    const evidence = new Evidence();
    const check = new KubeletAdmission({ api: evidence, maxTracked: 2, aliveMarginMs: 0 });
    await check.mayStillAdmit(gone([], { node: 'n1' }));
    await check.mayStillAdmit(gone([], { node: 'n2' }));
    await check.mayStillAdmit(gone([], { node: 'n3' }));
    evidence.lease = '101';
    expect(await check.mayStillAdmit(gone([], { node: 'n3' })), 'still tracked: the renewal counts').to.equal(false);
    expect(await check.mayStillAdmit(gone([], { node: 'n1' })), 'dropped: starts over, so it is kept').to.equal(true);
  });

  describe("without a last state, from the apiserver's records (a restart of ours does not start the wait over)", () => {
    // The lock written at 10:00:00 by the apiserver's clock; our clock reads 10:00:02 at first.
    const written = new Date('2026-12-02T10:00:00Z');

    it('a Lease written more than the margin after the lock, at least the margin ago, means kubelet is past it on the first look', async () => {
      const { evidence, check, advance } = setup();
      evidence.renewedAt = new Date('2026-12-02T10:00:07Z');
      advance(10_999);
      expect(
        await check.mayStillAdmit(gone([], { lockWrittenAt: written })),
        'renewed 7 s after the lock, under 6 s ago (its record cuts to the second)',
      ).to.equal(true);
      advance(1);
      expect(await check.mayStillAdmit(gone([], { lockWrittenAt: written }))).to.equal(false);
      // A fresh process (no tracks) decides the same at once.
      const fresh = new KubeletAdmission({
        api: evidence,
        clock: () => Date.parse('2026-12-02T10:00:13Z'),
        aliveMarginMs: 5_000,
      });
      expect(await fresh.mayStillAdmit(gone([], { lockWrittenAt: written }))).to.equal(false);
    });

    it('a renewal within the margin (plus a second of rounding) after the lock proves nothing: kubelet may have been frozen until then', async () => {
      const { evidence, check, advance } = setup();
      evidence.renewedAt = new Date('2026-12-02T10:00:06Z');
      advance(60_000);
      expect(await check.mayStillAdmit(gone([], { lockWrittenAt: written }))).to.equal(true);
      evidence.renewedAt = undefined;
      expect(
        await check.mayStillAdmit(gone([], { lockWrittenAt: written })),
        'no managedFields time on the Lease',
      ).to.equal(true);
      evidence.renewedAt = new Date('2026-12-02T10:00:30Z');
      expect(await check.mayStillAdmit(gone([], { lockWrittenAt: undefined })), 'no record of the lock write').to.equal(
        true,
      );
    });

    // Issue #42 item 8: our clock compared with the apiserver's managedFields time let a replica whose
    // clock ran a minute ahead skip kubelet's margin altogether.
    it("a replica whose clock is a minute off judges how long ago the renewal was on the apiserver's clock (its Date header)", async () => {
      for (const skewMs of [60_000, -60_000]) {
        const evidence = new Evidence();
        evidence.renewedAt = new Date('2026-12-02T10:00:07Z');
        const ours = (apiserverMs: number) => apiserverMs + skewMs;
        let apiserverNow = Date.parse('2026-12-02T10:00:08Z');
        const check = new KubeletAdmission({ api: evidence, clock: () => ours(apiserverNow), aliveMarginMs: 5_000 });
        evidence.readAt = new Date(apiserverNow);
        expect(
          await check.mayStillAdmit(gone([], { lockWrittenAt: written })),
          `clock ${skewMs / 1000} s off: renewed 1 s ago`,
        ).to.equal(true);
        apiserverNow = Date.parse('2026-12-02T10:00:13Z');
        evidence.readAt = new Date(apiserverNow);
        expect(
          await check.mayStillAdmit(gone([], { lockWrittenAt: written })),
          `clock ${skewMs / 1000} s off: renewed 6 s ago by the apiserver's clock`,
        ).to.equal(false);
      }
    });

    it("is not used when the pod's last state is known: then the renewal must follow its disappearance", async () => {
      const { evidence, check, advance } = setup();
      evidence.renewedAt = new Date('2026-12-02T10:00:07Z');
      advance(60_000);
      expect(await check.mayStillAdmit(gone(vanished(), { lockWrittenAt: written }))).to.equal(true);
    });
  });

  describe('mayForce (before NODELOCK_FORCE_AFTER frees a stalled lock)', () => {
    const lockWritten = new Date('2026-12-02T10:00:00Z');

    it('yes once the Lease was renewed more than the margin (plus a second of rounding) after the lock was written, and that renewal is the margin old', async () => {
      const { evidence, check } = setup();
      evidence.readAt = new Date('2026-12-02T10:00:30Z');
      evidence.renewedAt = new Date('2026-12-02T10:00:06Z');
      expect(
        await check.mayForce(NODE, OWNER, lockWritten),
        'within margin + 1 s: may have been frozen until just after the write',
      ).to.equal(false);
      evidence.renewedAt = new Date('2026-12-02T10:00:07Z');
      expect(await check.mayForce(NODE, OWNER, lockWritten)).to.equal(true);
    });

    // Found beside a chaos run: a frozen kubelet renews its Lease first thing when it runs again,
    // before it admits the pods it queued; a force at that moment let the next pod take the lock.
    it("no while the renewal that proves kubelet runs again is younger than the margin (by the apiserver's clock): it may not have admitted its queue yet", async () => {
      const { evidence, check } = setup();
      evidence.renewedAt = new Date('2026-12-02T10:00:30Z');
      evidence.readAt = new Date('2026-12-02T10:00:35Z');
      expect(await check.mayForce(NODE, OWNER, lockWritten)).to.equal(false);
      evidence.readAt = new Date('2026-12-02T10:00:36Z');
      expect(await check.mayForce(NODE, OWNER, lockWritten)).to.equal(true);
    });

    it("no while the Lease was last renewed before the lock (a frozen kubelet), or its time or the lock's is unknown", async () => {
      const { evidence, check } = setup();
      evidence.renewedAt = new Date('2026-12-02T09:59:55Z');
      expect(await check.mayForce(NODE, OWNER, lockWritten)).to.equal(false);
      evidence.renewedAt = undefined;
      expect(await check.mayForce(NODE, OWNER, lockWritten)).to.equal(false);
      evidence.renewedAt = new Date('2026-12-02T10:01:00Z');
      expect(await check.mayForce(NODE, OWNER, undefined)).to.equal(false);
    });

    it("no while another pod placed on the node awaits kubelet's acknowledgement: the owner is queued behind that pod's stuck Allocate", async () => {
      const { evidence, check } = setup();
      evidence.renewedAt = new Date('2026-12-02T10:00:30Z');
      evidence.readAt = new Date('2026-12-02T10:01:00Z');
      evidence.waiting = [OWNER];
      expect(
        await check.mayForce(NODE, OWNER, lockWritten),
        'only the owner itself waits: it is the one inside the stuck call',
      ).to.equal(true);
      evidence.waiting = [{ namespace: 'ns', name: 'earlier' }, OWNER];
      expect(await check.mayForce(NODE, OWNER, lockWritten)).to.equal(false);
      evidence.waiting = [{ namespace: 'other', name: 'victim' }];
      expect(await check.mayForce(NODE, OWNER, lockWritten), 'same name, other namespace').to.equal(false);
    });

    it('a node no kubelet ever ran on counts as running (nothing to admit the pod later); one with a kubelet but no Lease yet does not', async () => {
      const { evidence, check } = setup();
      evidence.lease = undefined;
      evidence.registered = false;
      expect(await check.mayForce(NODE, OWNER, lockWritten)).to.equal(true);
      evidence.registered = true;
      expect(await check.mayForce(NODE, OWNER, lockWritten)).to.equal(false);
    });
  });
});
