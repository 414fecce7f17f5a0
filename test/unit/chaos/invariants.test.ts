import { expect } from 'chai';
import {
  checkAllBound,
  checkCapacity,
  checkForeignDevices,
  LockTracker,
  type AllocationDecoder,
} from '../../chaos/invariants.js';
import type { ObservedNode, ObservedPod, Snapshot } from '../../chaos/observed-state.js';

// A minimal decoder for the tests: "uuid,NVIDIA,mem,cores:" entries, ";" per container.
const decode: AllocationDecoder = (encoded) =>
  encoded
    .split(';')
    .filter(Boolean)
    .map((container) =>
      container
        .split(':')
        .filter(Boolean)
        .map((entry) => {
          const [uuid = '', , memory = '0', cores = '0'] = entry.split(',');
          return { uuid, memoryMiB: Number(memory), cores: Number(cores) };
        }),
    );

const node = (name: string, lock?: string): ObservedNode => ({
  name,
  lock,
  gpus: [{ uuid: `${name}-gpu0`, memoryMiB: 10_000, cores: 100, slots: 2 }],
});
const pod = (name: string, extra: Partial<ObservedPod> = {}): ObservedPod => ({
  namespace: 'ns',
  name,
  uid: `uid-${name}`,
  nodeName: undefined,
  phase: 'Pending',
  deleting: false,
  annotations: {},
  gpuCount: 1,
  ...extra,
});
const at = (time: number, pods: ObservedPod[], nodes: ObservedNode[]): Snapshot => ({ at: time, pods, nodes });
const allocated = (gpu: string, memory: number, cores = 0) => ({
  'hami.io/vgpu-devices-allocated': `${gpu},NVIDIA,${memory},${cores}:;`,
});

describe('chaos invariants', () => {
  it('capacity: flags a GPU over memory, cores or slots, and ignores terminal pods', () => {
    const fine = at(
      0,
      [
        pod('a', { nodeName: 'n1', annotations: allocated('n1-gpu0', 6000) }),
        pod('b', { nodeName: 'n1', annotations: allocated('n1-gpu0', 9000), phase: 'Failed' }),
      ],
      [node('n1')],
    );
    expect(checkCapacity(fine, decode)).to.deep.equal([]);
    const over = at(
      0,
      [
        pod('a', { nodeName: 'n1', annotations: allocated('n1-gpu0', 6000) }),
        pod('b', { nodeName: 'n1', annotations: allocated('n1-gpu0', 6000, 50) }),
      ],
      [node('n1')],
    );
    const violations = checkCapacity(over, decode);
    expect(violations).to.have.length(1);
    expect(violations[0]?.message).to.include('memory 12000/10000 MiB');
    const slots = at(
      0,
      ['a', 'b', 'c'].map((name) => pod(name, { nodeName: 'n1', annotations: allocated('n1-gpu0', 100) })),
      [node('n1')],
    );
    expect(checkCapacity(slots, decode)[0]?.message).to.include('slots 3/2');
    const elsewhere = at(
      0,
      [pod('a', { nodeName: 'n2', annotations: allocated('n1-gpu0', 100) })],
      [node('n1'), node('n2')],
    );
    expect(checkCapacity(elsewhere, decode)[0]?.message).to.include('which that node does not have');
  });

  it("foreign devices: an Allocate that handed the admitted pod another pod's devices", () => {
    const admitted = { namespace: 'ns', name: 'x', uid: 'ux' };
    expect(checkForeignDevices([{ node: 'n1', admitted, resolvedTo: admitted, ok: true, at: 0 }])).to.deep.equal([]);
    const wrong = checkForeignDevices([
      { node: 'n1', admitted, resolvedTo: { namespace: 'ns', name: 'p', uid: 'up' }, ok: true, at: 0 },
    ]);
    expect(wrong[0]?.invariant).to.equal('foreign-devices');
    expect(wrong[0]?.subjects).to.include('ns/p');
  });

  it('stale lock: an owner gone for longer than the bound is a violation once; a held lock never is', () => {
    const tracker = new LockTracker({ staleAfterMs: 10_000 });
    const lock = '2026-01-01T00:00:00Z,ns,p';
    expect(tracker.observe(at(0, [pod('p')], [node('n1', lock)]), [])).to.deep.equal([]);
    expect(
      tracker.observe(at(60_000, [pod('p')], [node('n1', lock)]), []),
      'an unbound owner still binding is held',
    ).to.deep.equal([]);
    expect(tracker.observe(at(61_000, [], [node('n1', lock)]), [])).to.deep.equal([]);
    expect(tracker.observe(at(70_000, [], [node('n1', lock)]), []), 'within the bound').to.deep.equal([]);
    expect(
      tracker.observe(at(75_000, [], [node('n1', lock)]), [], () => 5_000),
      'excused time stretches it',
    ).to.deep.equal([]);
    const late = tracker.observe(at(72_000 + 10_000, [], [node('n1', lock)]), []);
    expect(late.map((violation) => violation.invariant)).to.deep.equal(['stale-lock']);
    expect(tracker.observe(at(90_000, [], [node('n1', lock)]), []), 'reported once').to.deep.equal([]);
  });

  it('stale lock: on real nodes an owner that is gone gets goneOwnerExtraMs more (kubelet-may-admit), other reasons do not', () => {
    const tracker = new LockTracker({ staleAfterMs: 10_000, goneOwnerExtraMs: 15_000 });
    const lock = '2026-01-01T00:00:00Z,ns,p';
    tracker.observe(at(0, [], [node('n1', lock)]), []);
    expect(tracker.observe(at(24_000, [], [node('n1', lock)]), []), 'within 10 s + 15 s').to.deep.equal([]);
    expect(
      tracker.observe(at(26_000, [], [node('n1', lock)]), []).map((violation) => violation.invariant),
    ).to.deep.equal(['stale-lock']);
    const terminal = new LockTracker({ staleAfterMs: 10_000, goneOwnerExtraMs: 15_000 });
    terminal.observe(at(0, [pod('p', { phase: 'Failed' })], [node('n1', lock)]), []);
    expect(
      terminal.observe(at(11_000, [pod('p', { phase: 'Failed' })], [node('n1', lock)]), [])[0]?.message,
    ).to.include('Failed');
  });

  it('stale lock: a same-name replacement or an owner bound elsewhere counts as stale', () => {
    const tracker = new LockTracker({ staleAfterMs: 1_000 });
    const lock = '2026-01-01T00:00:00Z,ns,p';
    tracker.observe(at(0, [pod('p')], [node('n1', lock)]), []);
    expect(
      tracker.observe(at(5_000, [pod('p', { uid: 'new' })], [node('n1', lock)]), []).map((v) => v.message),
    ).to.have.length(0);
    expect(tracker.observe(at(7_000, [pod('p', { uid: 'new' })], [node('n1', lock)]), [])[0]?.message).to.include(
      'replaced',
    );
  });

  it('released while awaiting: a lock gone while its owner is bound there, allocating, with no Allocate recorded', () => {
    const lock = '2026-01-01T00:00:00Z,ns,p';
    const bound = pod('p', { nodeName: 'n1', annotations: { 'hami.io/bind-phase': 'allocating' } });
    const tracker = new LockTracker({ staleAfterMs: 10_000 });
    tracker.observe(at(0, [bound], [node('n1', lock)]), []);
    expect(
      tracker.observe(at(1_000, [bound], [node('n1')]), []),
      'the plugin may still be recording its call',
    ).to.deep.equal([]);
    expect(tracker.observe(at(10_999, [bound], [node('n1')]), []), 'within the grace').to.deep.equal([]);
    expect(tracker.observe(at(11_000, [bound], [node('n1')]), []).map((v) => v.invariant)).to.deep.equal([
      'released-while-awaiting',
    ]);
    expect(tracker.observe(at(12_000, [bound], [node('n1')]), []), 'reported once').to.deep.equal([]);
    expect(tracker.finish(), 'nothing left').to.deep.equal([]);

    const fine = new LockTracker({ staleAfterMs: 10_000 });
    fine.observe(at(0, [bound], [node('n1', lock)]), []);
    const record = {
      node: 'n1',
      admitted: { namespace: 'ns', name: 'p', uid: 'uid-p' },
      resolvedTo: { namespace: 'ns', name: 'p', uid: 'uid-p' },
      ok: true,
      at: 500,
    };
    expect(fine.observe(at(1_000, [bound], [node('n1')]), [record]), 'released after its Allocate').to.deep.equal([]);

    const restamp = new LockTracker({ staleAfterMs: 10_000 });
    restamp.observe(at(0, [bound], [node('n1', lock)]), []);
    expect(
      restamp.observe(at(1_000, [bound], [node('n1', '2026-01-01T00:00:05Z,ns,p')]), []),
      'a re-stamp is not a release',
    ).to.deep.equal([]);

    // Found by the 30-minute chaos run on real nodes (seed 7): the old incarnation's lock released and
    // the recreated pod's bind writing its own within one snapshot interval looked like a re-stamp of
    // the old one, and the new lock was reported stale ("replaced") while its bind was in progress.
    const recreated = new LockTracker({ staleAfterMs: 1_000 });
    const unbound = pod('p', { uid: 'uid-old' });
    recreated.observe(at(0, [unbound], [node('n1', lock)]), []);
    const next = pod('p', { uid: 'uid-new' });
    expect(
      recreated.observe(at(500, [next], [node('n1', '2026-01-01T00:00:09Z,ns,p')]), []),
      "the new incarnation's own lock",
    ).to.deep.equal([]);
    expect(
      recreated.observe(at(5_000, [next], [node('n1', '2026-01-01T00:00:09Z,ns,p')]), []),
      'held by its bind, not stale',
    ).to.deep.equal([]);

    const deleting = new LockTracker({ staleAfterMs: 10_000 });
    const boundDeleting = { ...bound, deleting: true };
    deleting.observe(at(0, [boundDeleting], [node('n1', lock)]), []);
    expect(
      deleting.observe(at(60_000, [boundDeleting], [node('n1', lock)]), []),
      'kept while kubelet may still admit it: not stale',
    ).to.deep.equal([]);
    deleting.observe(at(61_000, [boundDeleting], [node('n1')]), []);
    expect(
      deleting.finish().map((v) => v.invariant),
      'and not released early (reported at the end of the run)',
    ).to.deep.equal(['released-while-awaiting']);

    const inFlight = new LockTracker({ staleAfterMs: 10_000, releaseGraceMs: 5_000 });
    inFlight.observe(at(0, [bound], [node('n1', lock)]), []);
    expect(inFlight.observe(at(1_000, [bound], [node('n1')]), [])).to.deep.equal([]);
    const throughLock = { ...record, lock: '2025-12-31T23:59:58Z,ns,p', at: 1_200 };
    expect(
      inFlight.observe(at(2_000, [bound], [node('n1')]), [throughLock]),
      'its Allocate, which read the lock, recorded after the release',
    ).to.deep.equal([]);
    expect(inFlight.finish(), 'cleared').to.deep.equal([]);

    const unexplained = new LockTracker({ staleAfterMs: 10_000, releaseGraceMs: 5_000 });
    unexplained.observe(at(0, [bound], [node('n1', lock)]), []);
    unexplained.observe(at(1_000, [bound], [node('n1')]), []);
    const fallback = { ...record, at: 1_500 };
    const otherNode = { ...record, node: 'n2', lock, at: 1_500 };
    const otherOwner = { ...record, lock: '2026-01-01T00:00:00Z,ns,q', at: 1_500 };
    const otherIncarnation = {
      ...record,
      resolvedTo: { namespace: 'ns', name: 'p', uid: 'uid-other' },
      lock,
      at: 1_500,
    };
    expect(
      unexplained
        .observe(at(6_000, [bound], [node('n1')]), [fallback, otherNode, otherOwner, otherIncarnation])
        .map((v) => v.invariant),
      'only a call that resolved this incarnation on this node through its lock explains it',
    ).to.deep.equal(['released-while-awaiting']);

    const endOfRun = new LockTracker({ staleAfterMs: 10_000 });
    endOfRun.observe(at(0, [bound], [node('n1', lock)]), []);
    endOfRun.observe(at(1_000, [bound], [node('n1')]), []);
    expect(
      endOfRun.finish().map((v) => v.invariant),
      'a suspect still open when the run ends',
    ).to.deep.equal(['released-while-awaiting']);

    const forced = new LockTracker({ staleAfterMs: 10_000, forceAfterMs: 5_000 });
    forced.observe(at(0, [bound], [node('n1', lock)]), []);
    expect(forced.observe(at(6_000, [bound], [node('n1')]), []), 'NODELOCK_FORCE_AFTER allows it').to.deep.equal([]);
  });

  it('all bound: pending GPU pods after quiesce, not deleting or terminal ones', () => {
    const snapshot = at(
      0,
      [
        pod('pending'),
        pod('plain', { gpuCount: 0 }),
        pod('going', { deleting: true }),
        pod('bound', { nodeName: 'n1' }),
      ],
      [node('n1')],
    );
    expect(checkAllBound(snapshot).map((violation) => violation.subjects[0])).to.deep.equal(['ns/pending']);
  });
});
