import { expect } from 'chai';
import { resolveLockOwner, type GoneIncarnation, type LockOwnerFacts } from '../../../src/lock/lock-owner.js';
import type { OwnerPod } from '../../../src/lock/owner-pod.js';

const NODE = 'gpu-1';
const live = (overrides: Partial<OwnerPod> = {}): OwnerPod => ({
  uid: 'uid-new',
  phase: 'Pending',
  deleting: false,
  nodeName: undefined,
  bindPhase: undefined,
  createdAt: new Date('2026-12-06T10:00:30Z'),
  ...overrides,
});
const gone = (overrides: Partial<GoneIncarnation> = {}): GoneIncarnation => ({
  uid: 'uid-old',
  boundTo: NODE,
  bindPhase: 'allocating',
  lastVersion: '200',
  final: true,
  vanishedAt: new Date('2026-12-06T10:00:20Z'),
  ...overrides,
});
const facts = (overrides: Partial<LockOwnerFacts>): LockOwnerFacts => ({ named: live(), gone: [], ...overrides });

describe('whom a lock was written for (lock-owner.ts, issue #42)', () => {
  // Issue #42 item 1, measured on a real kubelet: a StatefulSet pod force-deleted while kubelet lagged
  // left its lock; the recreated pod of the same name adopted it, and kubelet then admitted the dead
  // pod through it with the new pod's GPUs (4 of 4 runs).
  it('a later incarnation carrying the name is not the owner when the store saw the earlier one still there after the lock appeared', () => {
    const owner = resolveLockOwner(
      facts({ lockSeenVersion: '150', lockSeenExactly: true, gone: [gone({ lastVersion: '200' })] }),
    );
    expect(owner).to.deep.include({ kind: 'gone', replaced: true });
    expect(owner.kind === 'gone' ? owner.candidates.map((one) => one.uid) : []).to.deep.equal(['uid-old']);
  });

  it("a lock that appeared after the earlier incarnation was gone is the later one's (a bind of the new pod)", () => {
    const owner = resolveLockOwner(
      facts({
        lockSeenVersion: '250',
        lockSeenExactly: true,
        namedSeenVersion: '210',
        gone: [gone({ lastVersion: '200' })],
      }),
    );
    expect(owner).to.deep.include({ kind: 'named', proven: true });
  });

  it('vanished owners are remembered per UID: a create-and-delete of the name in between does not hide the one kubelet may still admit', () => {
    const between = gone({ uid: 'uid-between', boundTo: undefined, bindPhase: undefined, lastVersion: '230' });
    const owner = resolveLockOwner(
      facts({ named: undefined, lockSeenVersion: '150', lockSeenExactly: true, gone: [gone(), between] }),
    );
    expect(owner.kind === 'gone' ? owner.candidates.map((one) => one.uid) : []).to.deep.equal([
      'uid-old',
      'uid-between',
    ]);
  });

  it('our own write decides: the UID it was written for, whatever carries the name', () => {
    expect(resolveLockOwner(facts({ writtenFor: 'uid-new' }))).to.deep.include({ kind: 'named', proven: true });
    const other = resolveLockOwner(facts({ writtenFor: 'uid-old', gone: [gone(), gone({ uid: 'uid-x' })] }));
    expect(other).to.deep.include({ kind: 'gone', replaced: true });
    expect(other.kind === 'gone' ? other.candidates.map((one) => one.uid) : []).to.deep.equal(['uid-old']);
  });

  it('a pod created after the lock was on the node (resourceVersions) is not its owner', () => {
    expect(resolveLockOwner(facts({ lockSeenVersion: '150', namedCreatedVersion: '151' }))).to.deep.include({
      kind: 'gone',
      replaced: true,
    });
    expect(resolveLockOwner(facts({ lockSeenVersion: '150', namedCreatedVersion: '149' }))).to.deep.include({
      kind: 'named',
    });
  });

  // Issue #42 item 8: the lock's stamp is the writer's clock; the apiserver's record of the write
  // (managedFields) and the pod's creationTimestamp are the same clock, cut to whole seconds.
  it("with no versions, the apiserver's whole seconds order the lock's write and the pod's creation; the same second proves nothing", () => {
    expect(resolveLockOwner(facts({ lockWrittenAt: new Date('2026-12-06T10:00:29Z') }))).to.deep.include({
      kind: 'gone',
      replaced: true,
    });
    expect(resolveLockOwner(facts({ lockWrittenAt: new Date('2026-12-06T10:00:30Z') }))).to.deep.include({
      kind: 'named',
      proven: false,
    });
    expect(resolveLockOwner(facts({ lockWrittenAt: new Date('2026-12-06T10:00:31Z') }))).to.deep.include({
      kind: 'named',
      proven: true,
    });
  });

  it('a writer whose clock runs a minute behind or ahead changes nothing: its stamp is not read', () => {
    // The facts carry no stamp at all: only versions and the apiserver's times decide.
    const behind = resolveLockOwner(facts({ lockSeenVersion: '250', lockSeenExactly: true, namedSeenVersion: '210' }));
    expect(behind).to.deep.include({ kind: 'named', proven: true });
  });

  it("a relist's first sight of a lock is only an upper bound of its write: it does not prove the pod existed before it", () => {
    expect(
      resolveLockOwner(facts({ lockSeenVersion: '250', lockSeenExactly: false, namedSeenVersion: '210' })),
    ).to.deep.include({ kind: 'named', proven: false });
  });

  it('nobody carries the name: every incarnation the store saw go is a candidate; none seen leaves the owner unknown', () => {
    expect(resolveLockOwner(facts({ named: undefined }))).to.deep.equal({
      kind: 'gone',
      replaced: false,
      candidates: [],
    });
    const owner = resolveLockOwner(
      facts({ named: undefined, lockSeenVersion: '300', gone: [gone({ lastVersion: '200' })] }),
    );
    expect(owner.kind === 'gone' ? owner.candidates.map((one) => one.uid) : []).to.deep.equal(['uid-old']);
  });
});
