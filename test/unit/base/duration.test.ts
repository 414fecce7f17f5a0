import { expect } from 'chai';
import { DurationFormatError, formatDuration, parseDuration } from '../../../src/base/duration.js';

describe('duration', () => {
  const valid: [string, number][] = [
    ['0', 0],
    ['500ms', 500],
    ['30s', 30_000],
    ['5m', 300_000],
    ['1h', 3_600_000],
    ['1h30m', 5_400_000],
    ['1m30s', 90_000],
    ['1.5s', 1500],
    [' 2m ', 120_000],
    ['1h2m3s4ms', 3_723_004],
  ];
  for (const [text, ms] of valid) {
    it(`parses ${JSON.stringify(text)} as ${ms} ms`, () => {
      expect(parseDuration(text)).to.equal(ms);
    });
  }

  for (const text of ['', '5', 'm', '5 m', '-5m', '5d', '5m!', 'abc', '1h-30m', '5mm']) {
    it(`rejects ${JSON.stringify(text)} with a message naming the value`, () => {
      expect(() => parseDuration(text)).to.throw(DurationFormatError, JSON.stringify(text));
    });
  }

  it('formats largest units first and round-trips', () => {
    for (const ms of [0, 1, 999, 1000, 90_000, 300_000, 5_400_000, 3_723_004]) {
      expect(parseDuration(formatDuration(ms))).to.equal(ms);
    }
    expect(formatDuration(90_000)).to.equal('1m30s');
    expect(formatDuration(0)).to.equal('0s');
  });
});
