import { expect } from 'chai';
import { deletionFence, deletionTimestampOf } from '../../../src/lock/deletion-fence.js';

const T = (iso: string) => new Date(iso);

describe('deletion fence (releases on behalf of a deleted pod)', () => {
  const view = (seenAt: Date | undefined, live: string | undefined) => ({ lockSeenAt: () => seenAt, liveIncarnationUid: () => live });
  const deleted = { uid: 'old', deletionTimestamp: T('2026-12-01T10:00:05Z'), observedAt: T('2026-12-01T10:00:05.300Z') };

  it('passes a lock stamped and first seen before the deletion', () => {
    expect(deletionFence(deleted, view(T('2026-12-01T10:00:01.100Z'), undefined))('n', '2026-12-01T10:00:01Z,ns,p')).to.equal(true);
  });

  it('never touches a lock stamped after the deletion', () => {
    expect(deletionFence(deleted, view(undefined, undefined))('n', '2026-12-01T10:00:06Z,ns,p')).to.equal(false);
  });

  it('never touches a same-second lock this process first saw after it saw the deletion', () => {
    expect(deletionFence(deleted, view(T('2026-12-01T10:00:05.900Z'), undefined))('n', '2026-12-01T10:00:05Z,ns,p')).to.equal(false);
  });

  it('keeps the lock while another live incarnation of the name exists (the lock may be its)', () => {
    expect(deletionFence(deleted, view(T('2026-12-01T10:00:01Z'), 'new'))('n', '2026-12-01T10:00:01Z,ns,p')).to.equal(false);
    expect(deletionFence(deleted, view(T('2026-12-01T10:00:01Z'), 'old'))('n', '2026-12-01T10:00:01Z,ns,p')).to.equal(true);
  });

  it('uses the time the delete was seen when the object has no deletionTimestamp', () => {
    const fence = deletionFence({ uid: 'old', deletionTimestamp: undefined, observedAt: T('2026-12-01T10:00:05Z') }, view(undefined, undefined));
    expect(fence('n', '2026-12-01T10:00:04Z,ns,p')).to.equal(true);
    expect(fence('n', '2026-12-01T10:00:07Z,ns,p')).to.equal(false);
  });

  it('reads deletionTimestamp from Dates and strings, and ignores garbage', () => {
    expect(deletionTimestampOf({ deletionTimestamp: '2026-12-01T10:00:05Z' })?.toISOString()).to.equal('2026-12-01T10:00:05.000Z');
    expect(deletionTimestampOf({ deletionTimestamp: T('2026-12-01T10:00:05Z') })).to.be.instanceOf(Date);
    expect(deletionTimestampOf({ deletionTimestamp: 'soon' })).to.equal(undefined);
    expect(deletionTimestampOf(undefined)).to.equal(undefined);
  });
});
