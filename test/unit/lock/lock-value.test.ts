import { expect } from 'chai';
import { formatLockValue, isOwnedBy, parseLockValue, parseRfc3339 } from '../../../src/lock/lock-value.js';

describe('lock value codec', () => {
  it('parses the current format <RFC3339>,<ns>,<name>', () => {
    const value = parseLockValue('2026-08-01T06:00:00Z,ns,pod-a');
    expect(value).to.deep.include({ kind: 'owned', owner: { namespace: 'ns', name: 'pod-a' } });
    expect(value.kind === 'owned' && value.time.toISOString()).to.equal('2026-08-01T06:00:00.000Z');
  });

  it('parses offsets such as +08:00 to the right instant', () => {
    const value = parseLockValue('2026-07-03T15:35:10+08:00,default,train-0');
    expect(value.kind === 'owned' && value.time.toISOString()).to.equal('2026-07-03T07:35:10.000Z');
    expect(parseLockValue('2026-07-03T01:00:00-05:30,a,b').kind === 'owned').to.equal(true);
    const negative = parseLockValue('2026-07-03T01:00:00-05:30,a,b');
    expect(negative.kind === 'owned' && negative.time.toISOString()).to.equal('2026-07-03T06:30:00.000Z');
  });

  it('parses the legacy bare RFC3339 value with no owner', () => {
    const value = parseLockValue('2026-07-03T15:35:10+08:00');
    expect(value.kind).to.equal('legacy');
    expect(value.kind === 'legacy' && value.time.toISOString()).to.equal('2026-07-03T07:35:10.000Z');
  });

  it('accepts fractional seconds as Go does', () => {
    const time = parseRfc3339('2026-08-01T06:00:00.123456789Z');
    expect(time instanceof Date && time.toISOString()).to.equal('2026-08-01T06:00:00.123Z');
  });

  const garbage = [
    '', 'lock', 'a,b', 'a,b,c,d', '2026-08-01T06:00:00Z,ns', '2026-08-01T06:00:00Z,ns,pod,extra',
    '2026-13-01T06:00:00Z,ns,p', '2026-02-30T06:00:00Z,ns,p', '2026-08-01T24:00:00Z,ns,p', '2026-08-01 06:00:00Z,ns,p',
    '2026-08-01T06:00:00,ns,p', '2026-08-01T06:00:00Z,,p', '2026-08-01T06:00:00Z,ns,', '2026-08-01T06:00:00Z,NS,p',
    '2026-08-01T06:00:00Z,ns,p q', '2026-08-01T06:00:00+25:00', 'null', '\u0000',
  ];
  for (const raw of garbage) {
    it(`returns a typed parse problem, never a throw, for ${JSON.stringify(raw)}`, () => {
      const value = parseLockValue(raw);
      expect(value.kind).to.equal('malformed');
      expect(value.kind === 'malformed' && value.problem).to.be.a('string').and.not.equal('');
    });
  }

  it('writes UTC with Z at second precision, which parses back to the same owner and time', () => {
    const time = new Date('2026-11-30T05:39:00.987Z');
    const raw = formatLockValue(time, { namespace: 'gpu', name: 'job-1' });
    expect(raw).to.equal('2026-11-30T05:39:00Z,gpu,job-1');
    const parsed = parseLockValue(raw);
    expect(parsed.kind === 'owned' && parsed.time.toISOString()).to.equal('2026-11-30T05:39:00.000Z');
  });

  it('matches the owner exactly on namespace and name (HAMi #1433)', () => {
    const value = parseLockValue('2026-08-01T06:00:00Z,ns,abc-123');
    expect(isOwnedBy(value, { namespace: 'ns', name: 'abc-123' })).to.equal(true);
    expect(isOwnedBy(value, { namespace: 'ns', name: 'abc' })).to.equal(false);
    expect(isOwnedBy(value, { namespace: 'ns', name: '123' })).to.equal(false);
    expect(isOwnedBy(value, { namespace: 'other', name: 'abc-123' })).to.equal(false);
    expect(isOwnedBy(parseLockValue('2026-08-01T06:00:00Z'), { namespace: '', name: '' })).to.equal(false);
  });
});
