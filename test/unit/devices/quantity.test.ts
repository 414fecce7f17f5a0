import { expect } from 'chai';
import { int32Quantity, integerQuantity } from '../../../src/devices/quantity.js';

describe('devices: Kubernetes quantities as integers (Go AsInt64)', () => {
  const integers: [unknown, bigint][] = [
    ['0', 0n], ['2', 2n], ['+7', 7n], ['-3', -3n], ['3000', 3000n],
    // The apiserver canonicalises 3000 to "3k": both must read the same.
    ['3k', 3000n], ['1M', 1_000_000n], ['2G', 2_000_000_000n], ['1Ki', 1024n], ['2Mi', 2_097_152n], ['1Gi', 1_073_741_824n],
    ['1e3', 1000n], ['2000m', 2n], ['1.5k', 1500n], ['0.5Ki', 512n], ['.5k', 500n], ['3.', 3n],
    ['1E', 1_000_000_000_000_000_000n], [5, 5n], [' 4 ', 4n],
  ];
  for (const [input, expected] of integers) {
    it(`reads ${JSON.stringify(input)} as ${expected}`, () => {
      expect(integerQuantity(input)).to.equal(expected);
    });
  }

  const notIntegers: unknown[] = [
    '1.5', '500m', '1500m', '15e-1', '1Kb', 'k', '', ' ', 'abc', '1 000', '--1', '0x10', '1e999999999', '9223372036854775808', '16Ei',
    1.5, Number.NaN, Number.POSITIVE_INFINITY, null, undefined, true, {}, [], '1e-999999999',
  ];
  for (const input of notIntegers) {
    it(`rejects ${typeof input === 'string' ? JSON.stringify(input) : Array.isArray(input) ? '[]' : String(input)}`, () => {
      expect(integerQuantity(input)).to.equal(undefined);
    });
  }

  it('keeps int32 values and rejects what does not fit', () => {
    expect(int32Quantity('2147483647')).to.equal(2147483647);
    expect(int32Quantity('-2147483648')).to.equal(-2147483648);
    expect(int32Quantity('2147483648')).to.equal(undefined);
    expect(int32Quantity('2Gi')).to.equal(undefined);
    expect(int32Quantity('1Gi')).to.equal(1_073_741_824);
  });
});
