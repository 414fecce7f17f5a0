import { expect } from 'chai';
import {
  failedLockRow,
  formatLockJson,
  formatLockTable,
  lockRowOf,
  type LockRow,
} from '../../../src/lock/lock-report.js';
import { formatTable } from '../../../src/base/table.js';
import { parseLockValue } from '../../../src/lock/lock-value.js';
import type { LockInspection } from '../../../src/lock/lock-events.js';

function row(overrides: Partial<LockRow>): LockRow {
  return {
    node: 'gpu-node-1',
    value: '2026-11-30T12:00:00Z,team-a,trainer-0',
    holder: { namespace: 'team-a', name: 'trainer-0' },
    kind: 'owned',
    ageSeconds: 45,
    state: 'held',
    reason: 'bind-in-progress',
    owner: { exists: true, phase: 'Pending', node: null, bindPhase: null, deleting: false },
    ...overrides,
  };
}

describe('lock table', () => {
  it('says so in one line when no node is locked', () => {
    expect(formatLockTable([])).to.deep.equal(['No locked nodes.']);
  });

  it('prints NODE, HOLDER, AGE, STATE, REASON padded like kubectl (3 spaces, last column unpadded)', () => {
    const lines = formatLockTable([
      row({}),
      row({
        node: 'gpu-node-12',
        holder: { namespace: 'ml', name: 'job' },
        ageSeconds: 192,
        state: 'stalled',
        reason: 'awaiting-allocation-past-expiry',
      }),
      row({
        node: 'n3',
        holder: null,
        kind: 'malformed',
        ageSeconds: null,
        state: 'releasable',
        reason: 'malformed',
        owner: null,
      }),
      row({
        node: 'n4',
        holder: null,
        kind: 'legacy',
        ageSeconds: 7500,
        state: 'releasable',
        reason: 'legacy-expired',
        owner: null,
      }),
    ]);
    expect(lines).to.deep.equal([
      'NODE          HOLDER             AGE         STATE        REASON',
      'gpu-node-1    team-a/trainer-0   45s         held         bind-in-progress',
      'gpu-node-12   ml/job             3m12s       stalled      awaiting-allocation-past-expiry',
      'n3            <malformed>        <unknown>   releasable   malformed',
      'n4            <legacy>           125m        releasable   legacy-expired',
    ]);
  });

  it('shows how far a stamp lies in the future next to the age, and a node that could not be inspected as unknown', () => {
    const lines = formatLockTable([
      row({
        node: 'n1',
        holder: null,
        kind: 'legacy',
        ageSeconds: 40,
        stampAheadSeconds: 73 * 365 * 86_400,
        state: 'held',
        reason: 'legacy-fresh',
        owner: null,
      }),
      failedLockRow(
        'n2',
        '2026-11-30T12:00:00Z,team-a,trainer-0',
        parseLockValue('2026-11-30T12:00:00Z,team-a,trainer-0'),
        'could not inspect: timeout',
      ),
    ]);
    expect(lines).to.deep.equal([
      'NODE   HOLDER             AGE                STATE     REASON',
      'n1     <legacy>           40s (stamp +73y)   held      legacy-fresh',
      'n2     team-a/trainer-0   <unknown>          unknown   inspect-failed',
    ]);
  });

  it('keeps every column at least 6 wide (kubectl tabwriter minimum)', () => {
    expect(formatTable(['A', 'B'], [['x', 'y']])).to.deep.equal(['A     B', 'x     y']);
  });

  it('prints json as a list with the raw value, holder, age in seconds, state, reason and owner', () => {
    const text = formatLockJson([
      row({
        owner: { exists: false, phase: null, node: null, bindPhase: null, deleting: false },
        state: 'releasable',
        reason: 'owner-not-found',
      }),
    ]);
    expect(JSON.parse(text)).to.deep.equal({
      items: [
        {
          node: 'gpu-node-1',
          value: '2026-11-30T12:00:00Z,team-a,trainer-0',
          holder: { namespace: 'team-a', name: 'trainer-0' },
          kind: 'owned',
          ageSeconds: 45,
          state: 'releasable',
          reason: 'owner-not-found',
          owner: { exists: false, phase: null, node: null, bindPhase: null, deleting: false },
        },
      ],
    });
    expect(JSON.parse(formatLockJson([]))).to.deep.equal({ items: [] });
  });

  describe('rows from inspections', () => {
    const base = { node: 'gpu-1', resourceVersion: '7' };

    it('carry the owner as found, with whole seconds of age', () => {
      const raw = '2026-11-30T12:00:00Z,team-a,trainer-0';
      const inspection: LockInspection = {
        ...base,
        raw,
        value: parseLockValue(raw),
        owner: { uid: 'u', phase: 'Pending', deleting: false, nodeName: 'gpu-1', bindPhase: 'allocating' },
        classification: { state: 'held', reason: 'awaiting-allocation', ageMs: 90_999 },
      };
      expect(lockRowOf(inspection)).to.deep.equal({
        node: 'gpu-1',
        value: raw,
        holder: { namespace: 'team-a', name: 'trainer-0' },
        kind: 'owned',
        ageSeconds: 90,
        state: 'held',
        reason: 'awaiting-allocation',
        owner: { exists: true, phase: 'Pending', node: 'gpu-1', bindPhase: 'allocating', deleting: false },
      });
    });

    it('say when the owner does not exist', () => {
      const raw = '2026-11-30T12:00:00Z,team-a,gone';
      const row = lockRowOf({
        ...base,
        raw,
        value: parseLockValue(raw),
        owner: null,
        classification: { state: 'releasable', reason: 'owner-not-found', ageMs: 5000 },
      });
      expect(row?.owner).to.deep.equal({ exists: false, phase: null, node: null, bindPhase: null, deleting: false });
    });

    it('keep the problem of a malformed value and no holder or age', () => {
      const row = lockRowOf({
        ...base,
        raw: 'junk',
        value: parseLockValue('junk'),
        owner: undefined,
        classification: { state: 'releasable', reason: 'malformed', ageMs: undefined },
      });
      expect(row).to.deep.include({
        holder: null,
        kind: 'malformed',
        ageSeconds: null,
        owner: null,
        reason: 'malformed',
      });
      expect(row?.problem).to.include('not an RFC3339 time');
    });

    it('carry how far the stamp lies ahead of this clock, from 2 s on', () => {
      const raw = '2099-01-01T00:00:00Z';
      const ahead = lockRowOf({
        ...base,
        raw,
        value: parseLockValue(raw),
        owner: undefined,
        classification: { state: 'held', reason: 'legacy-fresh', ageMs: 40_500, clockSkewMs: 2_300_000_000_999 },
      });
      expect(ahead).to.deep.include({ ageSeconds: 40, stampAheadSeconds: 2_300_000_000 });
      const skewed = lockRowOf({
        ...base,
        raw,
        value: parseLockValue(raw),
        owner: undefined,
        classification: { state: 'held', reason: 'legacy-fresh', ageMs: 0, clockSkewMs: 1500 },
      });
      expect(skewed).to.not.have.property('stampAheadSeconds');
    });

    it('for a node that could not be inspected, say what the value itself says and why', () => {
      const raw = `2026-11-30T12:00:00Z,ns,${'a'.repeat(300)}`;
      expect(failedLockRow('gpu-1', raw, parseLockValue(raw), 'boom')).to.deep.include({
        node: 'gpu-1',
        value: raw,
        holder: null,
        kind: 'malformed',
        ageSeconds: null,
        state: 'unknown',
        reason: 'inspect-failed',
        error: 'boom',
        owner: null,
      });
    });

    it('are skipped for a node without a lock', () => {
      expect(
        lockRowOf({ ...base, raw: undefined, value: undefined, owner: undefined, classification: undefined }),
      ).to.equal(undefined);
    });
  });
});
