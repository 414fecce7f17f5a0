import { expect } from 'chai';
import { formatAge } from '../../../src/base/human-age.js';

const MINUTE = 60;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

describe('formatAge (kubectl HumanDuration)', () => {
  const cases: [number | undefined, string][] = [
    [0, '0s'],
    [45, '45s'],
    [45.9, '45s'],
    [119, '119s'],
    [120, '2m'],
    [3 * MINUTE + 12, '3m12s'],
    [9 * MINUTE + 59, '9m59s'],
    [10 * MINUTE + 30, '10m'],
    [179 * MINUTE, '179m'],
    [3 * HOUR, '3h'],
    [2 * HOUR + 5 * MINUTE, '125m'],
    [4 * HOUR + 5 * MINUTE, '4h5m'],
    [7 * HOUR + 59 * MINUTE, '7h59m'],
    [8 * HOUR + 30 * MINUTE, '8h'],
    [47 * HOUR, '47h'],
    [3 * DAY + 4 * HOUR, '3d4h'],
    [5 * DAY, '5d'],
    [400 * DAY, '400d'],
    [3 * 365 * DAY + 10 * DAY, '3y10d'],
    [9 * 365 * DAY, '9y'],
    [-0.5, '0s'],
    [-1, '0s'],
    [-5, '<invalid>'],
    [undefined, '<unknown>'],
    [Number.NaN, '<unknown>'],
  ];
  for (const [seconds, expected] of cases) {
    it(`prints ${String(seconds)} s as ${expected}`, () => {
      expect(formatAge(seconds)).to.equal(expected);
    });
  }
});
