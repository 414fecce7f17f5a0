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

  // Go's time.Parse(time.RFC3339, …) is HAMi's parser; test/unit/lock/go-rfc3339.test.ts holds ours
  // to Go's verdicts on 1,521 strings. These are the cases the issue found wrong.
  describe('timestamps as Go reads them', () => {
    const iso = (text: string): string | undefined => {
      const time = parseRfc3339(text);
      return typeof time === 'string' ? undefined : time.toISOString();
    };

    it('refuses a lower-case t or z (Go does), so such a lock is malformed and freed, not held as a bind', () => {
      expect(iso('2026-08-01t06:00:00Z')).to.equal(undefined);
      expect(iso('2026-08-01T06:00:00z')).to.equal(undefined);
      expect(parseLockValue('2026-08-01t06:00:00Z,ns,pod-a').kind).to.equal('malformed');
      expect(parseLockValue('2026-08-01T06:00:00z').kind).to.equal('malformed');
    });

    it('accepts any number of fraction digits, truncating like Go', () => {
      expect(iso('2026-08-01T06:00:00.1234567891234Z')).to.equal('2026-08-01T06:00:00.123Z');
      expect(iso(`2026-08-01T06:00:00.${'9'.repeat(1000)}Z`)).to.equal('2026-08-01T06:00:00.999Z');
      expect(iso('2026-08-01T06:00:00.5+01:00')).to.equal('2026-08-01T05:00:00.500Z');
    });

    it('reads years 0000-0099 as themselves, not as 1900-1999', () => {
      expect(iso('0001-01-01T00:00:00Z')).to.equal('0001-01-01T00:00:00.000Z');
      expect(iso('0099-12-31T23:59:59Z')).to.equal('0099-12-31T23:59:59.000Z');
      // Proleptic Gregorian, as Go: year 0 is a leap year.
      expect(iso('0000-02-29T00:00:00Z')).to.equal('0000-02-29T00:00:00.000Z');
      expect(iso('9999-12-31T23:59:59Z')).to.equal('9999-12-31T23:59:59.000Z');
    });

    it('keeps Go\'s leniencies: a one-digit hour, "," before the fraction, offsets up to ±24:60', () => {
      expect(iso('2026-08-01T6:00:00Z')).to.equal('2026-08-01T06:00:00.000Z');
      expect(iso('2026-08-01T06:00:00,5Z')).to.equal('2026-08-01T06:00:00.500Z');
      expect(iso('2026-08-01T06:00:00+24:00')).to.equal('2026-07-31T06:00:00.000Z');
      expect(iso('2026-08-01T06:00:00+23:60')).to.equal('2026-07-31T06:00:00.000Z');
    });

    for (const text of [
      '2026-08-01T24:00:00Z',
      '2026-08-01T23:60:00Z',
      '2026-08-01T23:59:60Z',
      '2026-02-29T00:00:00Z',
      '2026-08-01T06:00:00+25:00',
      '2026-08-01T06:00:00+23:61',
      '2026-08-01T06:00:00.Z',
      '2026-08-01T06:00:00+0800',
      '+2026-08-01T06:00:00Z',
      '2026-08-01T06:00:00Z ',
    ]) {
      it(`refuses ${JSON.stringify(text)} as Go does`, () => {
        expect(iso(text)).to.equal(undefined);
      });
    }
  });

  describe("divergences from HAMi's parser (each one on purpose)", () => {
    it('an owner that no pod can have is malformed (HAMi looks any text up, even empty fields)', () => {
      for (const owner of [
        ',',
        'ns,',
        ',pod',
        'NS,pod',
        'ns,Pod',
        'n.s,pod',
        'a..b,pod',
        'ns,a..b',
        'ns,-pod',
        'ns,pod-',
        'ns,p q',
        'ns,p\u00e9',
      ]) {
        const value = parseLockValue(`2026-08-01T06:00:00Z,${owner}`);
        expect(value.kind, owner).to.equal('malformed');
        expect(value.kind === 'malformed' && value.problem, owner).to.match(/^names no possible pod: /);
      }
      // A dot is fine in a pod name (a DNS-1123 subdomain), not in a namespace (a label).
      expect(parseLockValue('2026-08-01T06:00:00Z,ns,web.v1-0').kind).to.equal('owned');
    });

    it('applies the length limits: namespace 63, pod name 253', () => {
      const owned = (namespace: string, name: string) =>
        parseLockValue(`2026-08-01T06:00:00Z,${namespace},${name}`).kind;
      expect(owned('n'.repeat(63), 'p')).to.equal('owned');
      expect(owned('n'.repeat(64), 'p')).to.equal('malformed');
      expect(owned('ns', 'p'.repeat(253))).to.equal('owned');
      expect(owned('ns', 'p'.repeat(254))).to.equal('malformed');
    });

    it('a 250,000-character pod name is malformed at once, with a short problem (no owner lookup can be built from it)', () => {
      const started = performance.now();
      const value = parseLockValue(`2099-01-01T00:00:00Z,ns,${'a'.repeat(250_000)}`);
      expect(performance.now() - started).to.be.below(50);
      expect(value.kind).to.equal('malformed');
      expect(value.kind === 'malformed' && value.problem.length).to.be.below(300);
    });

    it('keeps milliseconds where Go keeps nanoseconds (lock decisions are in seconds)', () => {
      const time = parseRfc3339('2026-08-01T06:00:00.123999999Z');
      expect(time instanceof Date && time.toISOString()).to.equal('2026-08-01T06:00:00.123Z');
    });
  });

  const garbage = [
    '',
    'lock',
    'a,b',
    'a,b,c,d',
    '2026-08-01T06:00:00Z,ns',
    '2026-08-01T06:00:00Z,ns,pod,extra',
    '2026-13-01T06:00:00Z,ns,p',
    '2026-02-30T06:00:00Z,ns,p',
    '2026-08-01T24:00:00Z,ns,p',
    '2026-08-01 06:00:00Z,ns,p',
    '2026-08-01T06:00:00,ns,p',
    '2026-08-01T06:00:00Z,,p',
    '2026-08-01T06:00:00Z,ns,',
    '2026-08-01T06:00:00Z,NS,p',
    '2026-08-01T06:00:00Z,ns,p q',
    '2026-08-01T06:00:00+25:00',
    'null',
    '\u0000',
  ];
  for (const raw of garbage) {
    it(`returns a typed parse problem, never a throw, for ${JSON.stringify(raw)}`, () => {
      const value = parseLockValue(raw);
      expect(value.kind).to.equal('malformed');
      expect(value.kind === 'malformed' && value.problem)
        .to.be.a('string')
        .and.not.equal('');
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
