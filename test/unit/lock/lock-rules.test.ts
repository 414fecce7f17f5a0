import { expect } from 'chai';
import { classifyLock, type LockRulesConfig } from '../../../src/lock/lock-rules.js';
import { formatRfc3339, parseLockValue } from '../../../src/lock/lock-value.js';
import { ownerPodFrom, type OwnerPod } from '../../../src/lock/owner-pod.js';

const NODE = 'gpu-node-1';
const NOW = new Date('2026-11-30T12:00:00Z');
const CONFIG: LockRulesConfig = { bindGraceMs: 60_000, expireMs: 300_000 };
const SECOND = 1000;

function lockAged(ageMs: number, owner = 'ns,pod-a'): ReturnType<typeof parseLockValue> {
  return parseLockValue(`${formatRfc3339(new Date(NOW.getTime() - ageMs))},${owner}`);
}

function pod(overrides: Partial<OwnerPod> = {}): OwnerPod {
  return { uid: 'uid-1', phase: 'Pending', deleting: false, nodeName: undefined, bindPhase: undefined, ...overrides };
}

const boundAllocating = (overrides: Partial<OwnerPod> = {}) =>
  pod({ nodeName: NODE, bindPhase: 'allocating', ...overrides });

describe('lock rules (ARCHITECTURE.md §5)', () => {
  describe('held', () => {
    it('held: P exists, not terminal, not being deleted, and the lock is younger than the bind grace (bind in progress)', () => {
      expect(
        classifyLock({ lock: lockAged(5 * SECOND), owner: pod(), node: NODE, now: NOW, config: CONFIG }),
      ).to.deep.equal({ state: 'held', reason: 'bind-in-progress', ageMs: 5000 });
    });

    it('held: P is bound to N with bind-phase=allocating, past the bind grace and within the expiry', () => {
      expect(
        classifyLock({
          lock: lockAged(4 * 60 * SECOND),
          owner: boundAllocating(),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }),
      ).to.deep.equal({ state: 'held', reason: 'awaiting-allocation', ageMs: 240_000 });
    });

    it('held: a fresh lock counts as a bind in progress even for a pod not yet bound (recreated owner inside the grace)', () => {
      expect(
        classifyLock({
          lock: lockAged(59 * SECOND),
          owner: pod({ uid: 'new-incarnation' }),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }).state,
      ).to.equal('held');
    });

    it('held: P is gone but the kubelet of N may still admit it (vanished while bound here and allocating), like a lock awaiting allocation', () => {
      expect(
        classifyLock({
          lock: lockAged(2 * SECOND),
          owner: undefined,
          node: NODE,
          now: NOW,
          config: CONFIG,
          goneOwnerMayBeAdmitted: true,
        }),
      ).to.deep.equal({ state: 'held', reason: 'kubelet-may-admit', ageMs: 2000 });
      expect(
        classifyLock({
          lock: lockAged(4 * 60 * SECOND),
          owner: undefined,
          node: NODE,
          now: NOW,
          config: CONFIG,
          goneOwnerMayBeAdmitted: true,
        }).reason,
      ).to.equal('kubelet-may-admit');
      expect(
        classifyLock({
          lock: lockAged(6 * 60 * SECOND),
          owner: undefined,
          node: NODE,
          now: NOW,
          config: CONFIG,
          goneOwnerMayBeAdmitted: true,
        }),
        'past the expiry it stalls, it is not taken over',
      ).to.deep.include({ state: 'stalled', reason: 'awaiting-allocation-past-expiry' });
      expect(
        classifyLock({
          lock: lockAged(11 * 60 * SECOND),
          owner: undefined,
          node: NODE,
          now: NOW,
          config: { ...CONFIG, forceAfterMs: 600_000 },
          goneOwnerMayBeAdmitted: true,
        }),
      ).to.deep.include({ state: 'releasable', reason: 'forced-after-stall' });
      expect(
        classifyLock({ lock: lockAged(2 * SECOND), owner: undefined, node: NODE, now: NOW, config: CONFIG }),
        'once kubelet is past it',
      ).to.deep.include({ state: 'releasable', reason: 'owner-not-found' });
    });

    it('held: a legacy value younger than the expiry (no owner to check)', () => {
      expect(
        classifyLock({
          lock: parseLockValue(formatRfc3339(new Date(NOW.getTime() - 10 * SECOND))),
          owner: undefined,
          node: NODE,
          now: NOW,
          config: CONFIG,
        }),
      ).to.deep.equal({ state: 'held', reason: 'legacy-fresh', ageMs: 10_000 });
    });
  });

  describe('releasable', () => {
    it('releasable: P not found', () => {
      expect(
        classifyLock({ lock: lockAged(1 * SECOND), owner: undefined, node: NODE, now: NOW, config: CONFIG }),
      ).to.deep.include({ state: 'releasable', reason: 'owner-not-found' });
    });

    it('releasable: P is another incarnation (owner recreated under the same name, not bound to N, past the bind grace)', () => {
      expect(
        classifyLock({
          lock: lockAged(61 * SECOND),
          owner: pod({ uid: 'recreated' }),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }),
      ).to.deep.include({ state: 'releasable', reason: 'owner-replaced' });
    });

    it('releasable at once: P bound to another node, even inside the bind grace (re-placed after a bind died)', () => {
      expect(
        classifyLock({
          lock: lockAged(61 * SECOND),
          owner: boundAllocating({ nodeName: 'gpu-node-2' }),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }),
      ).to.deep.include({ state: 'releasable', reason: 'owner-bound-elsewhere' });
      expect(
        classifyLock({
          lock: lockAged(1 * SECOND),
          owner: pod({ nodeName: 'gpu-node-2' }),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }),
      ).to.deep.include({ state: 'releasable', reason: 'owner-bound-elsewhere' });
    });

    it('releasable at once: an owner name that is not a valid pod name', () => {
      expect(
        classifyLock({
          lock: parseLockValue(`${formatRfc3339(NOW)},ns,Not_A_Pod`),
          owner: pod(),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }),
      ).to.deep.include({ state: 'releasable', reason: 'malformed' });
    });

    for (const phase of ['Succeeded', 'Failed']) {
      it(`releasable: P terminal (${phase}), even inside the bind grace`, () => {
        expect(
          classifyLock({
            lock: lockAged(1 * SECOND),
            owner: boundAllocating({ phase }),
            node: NODE,
            now: NOW,
            config: CONFIG,
          }),
        ).to.deep.include({ state: 'releasable', reason: 'owner-terminal' });
      });
    }

    it('releasable: P being deleted (deletionTimestamp set) before it is bound here, even inside the bind grace', () => {
      expect(
        classifyLock({
          lock: lockAged(1 * SECOND),
          owner: pod({ deleting: true }),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }),
      ).to.deep.include({ state: 'releasable', reason: 'owner-deleting' });
      expect(
        classifyLock({
          lock: lockAged(1 * SECOND),
          owner: pod({ deleting: true, nodeName: NODE, bindPhase: 'success' }),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }),
      ).to.deep.include({ state: 'releasable', reason: 'owner-deleting' });
    });

    // Whose the lock is (an earlier incarnation's, by UID and resourceVersion) is decided before the
    // rules, in lock-owner.ts (test/unit/lock/lock-owner.test.ts); the rules then see the owner gone.
    it('releasable: the owner the lock was written for is gone and a later incarnation carries the name (owner-replaced), unless kubelet may still admit it', () => {
      expect(
        classifyLock({
          lock: lockAged(12 * SECOND),
          owner: undefined,
          node: NODE,
          now: NOW,
          config: CONFIG,
          seenAt: NOW,
          ownerReplaced: true,
        }),
      ).to.deep.include({ state: 'releasable', reason: 'owner-replaced' });
      expect(
        classifyLock({
          lock: lockAged(12 * SECOND),
          owner: undefined,
          node: NODE,
          now: NOW,
          config: CONFIG,
          seenAt: NOW,
          ownerReplaced: true,
          goneOwnerMayBeAdmitted: true,
        }),
      ).to.deep.include({ state: 'held', reason: 'kubelet-may-admit' });
    });

    // Found by the chaos suite (seed 1): kubelet admits a pod that arrives with a deletionTimestamp,
    // and the plugin resolves it through the lock; freed at the delete, the lock named the next pod
    // by then, and the deleted pod got that pod's GPUs.
    it('held: P being deleted gracefully while bound here and awaiting allocation (kubelet may still admit it)', () => {
      expect(
        classifyLock({
          lock: lockAged(1 * SECOND),
          owner: boundAllocating({ deleting: true }),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }),
      ).to.deep.include({ state: 'held', reason: 'bind-in-progress' });
      expect(
        classifyLock({
          lock: lockAged(120 * SECOND),
          owner: boundAllocating({ deleting: true }),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }),
      ).to.deep.include({ state: 'held', reason: 'awaiting-allocation' });
      expect(
        classifyLock({
          lock: lockAged(600 * SECOND),
          owner: boundAllocating({ deleting: true }),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }),
      ).to.deep.include({ state: 'stalled' });
    });

    for (const bindPhase of ['success', 'failed']) {
      it(`releasable: bind-phase ${bindPhase} left behind (allocation over), even inside the bind grace`, () => {
        expect(
          classifyLock({
            lock: lockAged(1 * SECOND),
            owner: pod({ nodeName: NODE, bindPhase }),
            node: NODE,
            now: NOW,
            config: CONFIG,
          }),
        ).to.deep.include({ state: 'releasable', reason: 'allocation-finished' });
      });
    }

    // Issue #42 item 4: HAMi v2.10's Allocate returns early when its re-read of the pod fails, after
    // answering kubelet: bind-phase stays allocating and the lock would be held until the pod ends.
    it('releasable: bound here, still allocating, but kubelet has admitted it (its Allocate was answered), even inside the grace', () => {
      expect(
        classifyLock({
          lock: lockAged(1 * SECOND),
          owner: boundAllocating({ admitted: true }),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }),
      ).to.deep.include({ state: 'releasable', reason: 'owner-admitted' });
      expect(
        classifyLock({
          lock: lockAged(1 * SECOND),
          owner: boundAllocating({ admitted: false }),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }).state,
        'not admitted yet',
      ).to.equal('held');
      expect(
        classifyLock({
          lock: lockAged(1 * SECOND),
          owner: pod({ admitted: true }),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }).state,
        'not bound here: a bind in progress',
      ).to.equal('held');
    });

    it('ownerPodFrom: kubelet admitted the pod once it reports status.startTime or a started container', () => {
      const base = { metadata: { uid: 'u' }, spec: { nodeName: NODE } };
      expect(ownerPodFrom({ ...base, status: { phase: 'Pending' } }).admitted).to.equal(false);
      expect(
        ownerPodFrom({ ...base, status: { phase: 'Pending', startTime: '2026-12-06T10:00:00Z' } }).admitted,
      ).to.equal(true);
      expect(
        ownerPodFrom({
          ...base,
          status: { phase: 'Pending', containerStatuses: [{ started: false, state: { running: {} } }] },
        }).admitted,
      ).to.equal(true);
      expect(
        ownerPodFrom({ ...base, status: { phase: 'Pending', containerStatuses: [{ started: false, state: {} }] } })
          .admitted,
      ).to.equal(false);
    });

    it('bind-phase success from an earlier attempt does not release the lock of a pod not yet bound inside the grace', () => {
      expect(
        classifyLock({
          lock: lockAged(1 * SECOND),
          owner: pod({ bindPhase: 'success' }),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }).state,
      ).to.equal('held');
    });

    it('releasable: P bound to N without bind-phase=allocating past the bind grace', () => {
      expect(
        classifyLock({
          lock: lockAged(61 * SECOND),
          owner: pod({ nodeName: NODE }),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }),
      ).to.deep.include({ state: 'releasable', reason: 'owner-not-allocating' });
    });

    it('releasable: legacy value older than the expiry', () => {
      expect(
        classifyLock({
          lock: parseLockValue(formatRfc3339(new Date(NOW.getTime() - 301 * SECOND))),
          owner: undefined,
          node: NODE,
          now: NOW,
          config: CONFIG,
        }),
      ).to.deep.equal({ state: 'releasable', reason: 'legacy-expired', ageMs: 301_000 });
    });

    it('releasable: a value no HAMi component can read', () => {
      expect(
        classifyLock({ lock: parseLockValue('lock'), owner: undefined, node: NODE, now: NOW, config: CONFIG }),
      ).to.deep.equal({ state: 'releasable', reason: 'malformed', ageMs: undefined });
    });
  });

  describe('stalled', () => {
    it('stalled: held (bound, allocating) and older than the expiry is never taken over by default (HAMi #3096)', () => {
      expect(
        classifyLock({ lock: lockAged(301 * SECOND), owner: boundAllocating(), node: NODE, now: NOW, config: CONFIG }),
      ).to.deep.equal({ state: 'stalled', reason: 'awaiting-allocation-past-expiry', ageMs: 301_000 });
      expect(
        classifyLock({
          lock: lockAged(24 * 3600 * SECOND),
          owner: boundAllocating(),
          node: NODE,
          now: NOW,
          config: CONFIG,
        }).state,
      ).to.equal('stalled');
    });

    it('stalled until NODELOCK_FORCE_AFTER, releasable (forced-after-stall) after it', () => {
      const config = { ...CONFIG, forceAfterMs: 900_000 };
      expect(
        classifyLock({ lock: lockAged(899 * SECOND), owner: boundAllocating(), node: NODE, now: NOW, config }).state,
      ).to.equal('stalled');
      expect(
        classifyLock({ lock: lockAged(901 * SECOND), owner: boundAllocating(), node: NODE, now: NOW, config }),
      ).to.deep.include({ state: 'releasable', reason: 'forced-after-stall' });
    });

    it("NODELOCK_FORCE_AFTER is withheld while the node's kubelet has not run since the lock was written (frozen: it still admits the owner)", () => {
      const config = { ...CONFIG, forceAfterMs: 900_000 };
      expect(
        classifyLock({
          lock: lockAged(901 * SECOND),
          owner: boundAllocating(),
          node: NODE,
          now: NOW,
          config,
          kubeletMayAdmitLater: true,
        }),
      ).to.deep.equal({
        state: 'stalled',
        reason: 'awaiting-allocation-past-expiry',
        ageMs: 901_000,
        forceWithheld: 'kubelet-queue',
      });
      expect(
        classifyLock({
          lock: lockAged(901 * SECOND),
          owner: undefined,
          node: NODE,
          now: NOW,
          config,
          goneOwnerMayBeAdmitted: true,
          kubeletMayAdmitLater: true,
        }),
        'a gone owner kubelet may still admit',
      ).to.deep.equal({
        state: 'stalled',
        reason: 'awaiting-allocation-past-expiry',
        ageMs: 901_000,
        forceWithheld: 'kubelet-queue',
      });
      expect(
        classifyLock({
          lock: lockAged(899 * SECOND),
          owner: boundAllocating(),
          node: NODE,
          now: NOW,
          config,
          kubeletMayAdmitLater: true,
        }),
        'before FORCE_AFTER nothing is withheld',
      ).to.deep.equal({ state: 'stalled', reason: 'awaiting-allocation-past-expiry', ageMs: 899_000 });
      expect(
        classifyLock({
          lock: lockAged(2 * SECOND),
          owner: undefined,
          node: NODE,
          now: NOW,
          config,
          kubeletMayAdmitLater: true,
        }),
        'a silent kubelet does not keep a lock nobody will use',
      ).to.deep.include({ state: 'releasable', reason: 'owner-not-found' });
    });

    it('a configured expiry (NODELOCK_EXPIRE) moves the stall point', () => {
      const config = { ...CONFIG, expireMs: 120_000 };
      expect(
        classifyLock({ lock: lockAged(119 * SECOND), owner: boundAllocating(), node: NODE, now: NOW, config }).state,
      ).to.equal('held');
      expect(
        classifyLock({ lock: lockAged(121 * SECOND), owner: boundAllocating(), node: NODE, now: NOW, config }).state,
      ).to.equal('stalled');
    });
  });

  describe("age by this process's clock (first seen)", () => {
    it("judges age from when the value was first seen, not from the writer's stamp", () => {
      // The writer's clock runs 10 minutes behind: by its stamp the lock would be stalled at once.
      const behind = lockAged(600 * SECOND);
      const seenAt = new Date(NOW.getTime() - 5 * SECOND);
      expect(
        classifyLock({ lock: behind, owner: boundAllocating(), node: NODE, now: NOW, config: CONFIG, seenAt: seenAt }),
      ).to.deep.equal({ state: 'held', reason: 'bind-in-progress', ageMs: 5000 });
      expect(
        classifyLock({ lock: behind, owner: boundAllocating(), node: NODE, now: NOW, config: CONFIG }).state,
      ).to.equal('stalled');
    });

    it('a value first seen long ago expires by that time even if its stamp is in the future', () => {
      const ahead = lockAged(-600 * SECOND);
      const seenAt = new Date(NOW.getTime() - 301 * SECOND);
      expect(
        classifyLock({ lock: ahead, owner: boundAllocating(), node: NODE, now: NOW, config: CONFIG, seenAt: seenAt }),
      ).to.deep.equal({
        state: 'stalled',
        reason: 'awaiting-allocation-past-expiry',
        ageMs: 301_000,
        clockSkewMs: 600_000,
      });
    });
  });

  describe('planted far-future stamps (2099) are judged from first sight, never held forever', () => {
    const planted = (owner?: string) =>
      parseLockValue(owner === undefined ? '2099-01-01T00:00:00Z' : `2099-01-01T00:00:00Z,${owner}`);

    it('a legacy one is held for NODELOCK_EXPIRE after it was first seen, then released', () => {
      expect(
        classifyLock({
          lock: planted(),
          owner: undefined,
          node: NODE,
          now: NOW,
          config: CONFIG,
          seenAt: new Date(NOW.getTime() - 299 * SECOND),
        }).state,
      ).to.equal('held');
      expect(
        classifyLock({
          lock: planted(),
          owner: undefined,
          node: NODE,
          now: NOW,
          config: CONFIG,
          seenAt: new Date(NOW.getTime() - 301 * SECOND),
        }),
      ).to.deep.include({ state: 'releasable', reason: 'legacy-expired', ageMs: 301_000 });
    });

    it('one naming an existing pod not bound here is held for the bind grace after it was first seen, then released', () => {
      expect(
        classifyLock({
          lock: planted('ns,pod-a'),
          owner: pod(),
          node: NODE,
          now: NOW,
          config: CONFIG,
          seenAt: new Date(NOW.getTime() - 59 * SECOND),
        }).state,
      ).to.equal('held');
      expect(
        classifyLock({
          lock: planted('ns,pod-a'),
          owner: pod(),
          node: NODE,
          now: NOW,
          config: CONFIG,
          seenAt: new Date(NOW.getTime() - 61 * SECOND),
        }),
      ).to.deep.include({ state: 'releasable', reason: 'owner-replaced', ageMs: 61_000 });
    });

    it('one naming a pod bound elsewhere is released at once', () => {
      expect(
        classifyLock({
          lock: planted('ns,pod-a'),
          owner: pod({ nodeName: 'gpu-node-2' }),
          node: NODE,
          now: NOW,
          config: CONFIG,
          seenAt: NOW,
        }),
      ).to.deep.include({ state: 'releasable', reason: 'owner-bound-elsewhere' });
    });
  });

  it('an ancient stamp (year 0001) is read as year 1, not 1901, and judged from first sight when there is one', () => {
    const ancient = parseLockValue('0001-01-01T00:00:00Z,ns,pod-a');
    expect(ancient.kind === 'owned' && ancient.time.getUTCFullYear()).to.equal(1);
    expect(
      classifyLock({
        lock: ancient,
        owner: pod(),
        node: NODE,
        now: NOW,
        config: CONFIG,
        seenAt: new Date(NOW.getTime() - 10 * SECOND),
      }),
    ).to.deep.equal({ state: 'held', reason: 'bind-in-progress', ageMs: 10_000 });
  });

  describe('clock skew', () => {
    it('treats a lock stamped in the future as just written and reports the skew', () => {
      expect(
        classifyLock({ lock: lockAged(-90 * SECOND), owner: pod(), node: NODE, now: NOW, config: CONFIG }),
      ).to.deep.equal({ state: 'held', reason: 'bind-in-progress', ageMs: 0, clockSkewMs: 90_000 });
    });

    it('still releases a future-stamped lock whose owner is gone', () => {
      expect(
        classifyLock({ lock: lockAged(-3600 * SECOND), owner: undefined, node: NODE, now: NOW, config: CONFIG }),
      ).to.deep.include({ state: 'releasable', reason: 'owner-not-found', clockSkewMs: 3_600_000 });
    });

    it('does not expire a future-stamped legacy lock early', () => {
      expect(
        classifyLock({
          lock: parseLockValue(formatRfc3339(new Date(NOW.getTime() + 600 * SECOND))),
          owner: undefined,
          node: NODE,
          now: NOW,
          config: CONFIG,
        }).state,
      ).to.equal('held');
    });
  });

  it('uses the node name exactly: a pod bound to a node with a longer name is not bound here', () => {
    expect(
      classifyLock({
        lock: lockAged(61 * SECOND),
        owner: boundAllocating({ nodeName: `${NODE}0` }),
        node: NODE,
        now: NOW,
        config: CONFIG,
      }),
    ).to.deep.include({ state: 'releasable', reason: 'owner-bound-elsewhere' });
  });
});
