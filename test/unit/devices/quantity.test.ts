import { expect } from 'chai';
import { int32Quantity, integerQuantity, readQuantity, type QuantityValue } from '../../../src/devices/quantity.js';

describe('devices: Kubernetes quantities as integers (Go AsInt64)', () => {
  const integers: [unknown, bigint][] = [
    ['0', 0n],
    ['2', 2n],
    ['+7', 7n],
    ['-3', -3n],
    ['3000', 3000n],
    // The apiserver canonicalises 3000 to "3k": both must read the same.
    ['3k', 3000n],
    ['1M', 1_000_000n],
    ['2G', 2_000_000_000n],
    ['1Ki', 1024n],
    ['2Mi', 2_097_152n],
    ['1Gi', 1_073_741_824n],
    ['1e3', 1000n],
    ['2000m', 2n],
    ['1.5k', 1500n],
    ['0.5Ki', 512n],
    ['.5k', 500n],
    ['3.', 3n],
    ['1E', 1_000_000_000_000_000_000n],
    [5, 5n],
    [' 4 ', 4n],
  ];
  for (const [input, expected] of integers) {
    it(`reads ${JSON.stringify(input)} as ${expected}`, () => {
      expect(integerQuantity(input)).to.equal(expected);
    });
  }

  const notIntegers: unknown[] = [
    '1.5',
    '500m',
    '1500m',
    '15e-1',
    '1Kb',
    '',
    ' ',
    'abc',
    '1 000',
    '--1',
    '0x10',
    '1e999999999',
    '9223372036854775808',
    '16Ei',
    1.5,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    null,
    undefined,
    true,
    {},
    [],
    '1e-999999999',
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

  describe('the grammar of kube-apiserver (resource.ParseQuantity behind UnmarshalJSON)', () => {
    const show = (read: QuantityValue) =>
      read.kind === 'integer'
        ? `integer ${read.value}`
        : read.kind === 'malformed'
          ? 'malformed'
          : `${read.kind}${read.negative ? ' negative' : ''}`;
    const cases: [unknown, string][] = [
      // Go's scanner reads a sign, a point or a suffix without digits as zero; the apiserver accepts them.
      ['-', 'integer 0'],
      ['+', 'integer 0'],
      ['.', 'integer 0'],
      ['k', 'integer 0'],
      ['Ki', 'integer 0'],
      ['e3', 'integer 0'],
      ['-0.0', 'integer 0'],
      ['1.G', 'integer 1000000000'],
      ['1.5Ki', 'integer 1536'],
      ['1000e-3', 'integer 1'],
      ['1000000000n', 'integer 1'],
      ['1e+3', 'integer 1000'],
      ['1E', 'integer 1000000000000000000'],
      // Finer than 1n rounds away from zero, so ten nines after the point are exactly 1 to Go.
      ['0.9999999999', 'integer 1'],
      ['0.999999999', 'fraction'],
      ['1.0000000001', 'fraction'],
      ['5e-10', 'fraction'],
      ['-1500m', 'fraction negative'],
      ['-1', 'integer -1'],
      ['-3Gi', 'integer -3221225472'],
      // JSON numbers are read from their text, as UnmarshalJSON does.
      [1.5, 'fraction'],
      [1e21, 'integer 1000000000000000000000'],
      [-0, 'integer 0'],
      [-7, 'integer -7'],
      ['1e999999999', 'huge'],
      ['-1e999999999', 'huge negative'],
      ['1e4294967296', 'huge'],
      ['1e-4294967296', 'fraction'],
      ['1e9223372036854775808', 'malformed'],
      ['abc', 'malformed'],
      ['1e', 'malformed'],
      ['1EE3', 'malformed'],
      ['1ki', 'malformed'],
      ['1mi', 'malformed'],
      ['1.5.3', 'malformed'],
      ['0x1', 'malformed'],
      ['1 k', 'malformed'],
      ['', 'malformed'],
      ['\t', 'malformed'],
      ['\u00a0 12\n', 'integer 12'],
      [true, 'malformed'],
      [null, 'malformed'],
      [{}, 'malformed'],
      [Number.NaN, 'malformed'],
      // Not Go (see quantity.ts): a text over 64 characters is refused, whatever Go makes of it.
      [`0.${'9'.repeat(70)}`, 'malformed'],
      [`${' '.repeat(60)}1${' '.repeat(60)}`, 'integer 1'],
    ];
    for (const [input, expected] of cases) {
      it(`reads ${typeof input === 'string' ? JSON.stringify(input) : String(input)} as ${expected}`, () => {
        expect(show(readQuantity(input))).to.equal(expected);
      });
    }

    it('reads a hostile megabyte string in linear time', () => {
      for (const text of [
        ' '.repeat(4_000_000),
        `1${'0'.repeat(4_000_000)}`,
        `${' '.repeat(1000)}x${' '.repeat(1000)}`,
      ]) {
        const started = performance.now();
        expect(readQuantity(text).kind).to.equal('malformed');
        expect(performance.now() - started).to.be.below(50);
      }
    });
  });
});
