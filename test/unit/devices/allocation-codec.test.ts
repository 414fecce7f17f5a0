import { expect } from 'chai';
import {
  ALLOCATED_ANNOTATION, decodeAllocation, encodeAllocation, isDecodeError, MISSING_FIELDS_ERROR, TO_ALLOCATE_ANNOTATION,
  type AllocatedDevice, type PodAllocation,
} from '../../../src/devices/allocation-codec.js';

const device = (uuid: string, memoryMiB: number, cores: number): AllocatedDevice => ({ uuid, type: 'NVIDIA', memoryMiB, cores });
const V100_B = 'GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448';

describe('devices: pod allocation codec (HAMi §4.6)', () => {
  it('uses HAMi annotation keys', () => {
    expect(TO_ALLOCATE_ANNOTATION).to.equal('hami.io/vgpu-devices-to-allocate');
    expect(ALLOCATED_ANNOTATION).to.equal('hami.io/vgpu-devices-allocated');
  });

  // The spec's own examples, both ways.
  const examples: [string, PodAllocation][] = [
    [`${V100_B},NVIDIA,3000,30:;`, [[device(V100_B, 3000, 30)]]],
    [';GPU-a,NVIDIA,2000,0:GPU-b,NVIDIA,2000,0:;', [[], [device('GPU-a', 2000, 0), device('GPU-b', 2000, 0)]]],
    ['GPU-i,NVIDIA,500,10:;;GPU-a,NVIDIA,1000,0:;', [[device('GPU-i', 500, 10)], [], [device('GPU-a', 1000, 0)]]],
    [';;', [[], []]],
    ['', []],
  ];
  for (const [text, allocation] of examples) {
    it(`encodes and decodes ${JSON.stringify(text)}`, () => {
      expect(encodeAllocation(allocation)).to.equal(text);
      expect(decodeAllocation(text)).to.deep.equal(allocation);
    });
  }

  describe('forms the device plugin leaves behind after consuming entries', () => {
    // `;GPU-a,NVIDIA,1000,30:;` → `;;;` and `GPU-a,NVIDIA,1000,0:;` → `;;` (each rewrite keeps HAMi's extra empty entry).
    it('decodes ";;;" to three empty containers', () => {
      expect(decodeAllocation(';;;')).to.deep.equal([[], [], []]);
    });

    it('decodes ";;" to two empty containers', () => {
      expect(decodeAllocation(';;')).to.deep.equal([[], []]);
    });

    it('drops only the final empty entry, not the inner ones', () => {
      expect(decodeAllocation(';GPU-a,NVIDIA,1,2:;;')).to.deep.equal([[], [device('GPU-a', 1, 2)], []]);
    });
  });

  describe('decoding rules', () => {
    it('accepts a value without the terminating ";"', () => {
      expect(decodeAllocation('GPU-a,NVIDIA,1000,20:')).to.deep.equal([[device('GPU-a', 1000, 20)]]);
      expect(decodeAllocation('GPU-a,NVIDIA,1000,20')).to.deep.equal([[device('GPU-a', 1000, 20)]]);
    });

    it('skips pieces without a comma and ignores extra fields', () => {
      expect(decodeAllocation('junk:GPU-a,NVIDIA,1000,20,extra:;')).to.deep.equal([[device('GPU-a', 1000, 20)]]);
    });

    it('keeps the type it reads (other vendors share the format)', () => {
      expect(decodeAllocation('MLU-1,MLU,100,0:;')).to.deep.equal([[{ uuid: 'MLU-1', type: 'MLU', memoryMiB: 100, cores: 0 }]]);
    });

    it('fails with HAMi\'s message when a device has fewer than 4 fields', () => {
      expect(decodeAllocation('GPU-a,NVIDIA,1000:;')).to.deep.equal({ error: MISSING_FIELDS_ERROR });
      expect(MISSING_FIELDS_ERROR).to.equal('pod annotation format error, missing fields, do not use nodeName in task spec');
    });

    for (const [memory, cores] of [['abc', '0'], ['1000', 'x'], ['1.5', '0'], ['-5', '0'], ['1000', '-1'], ['2147483648', '0'], ['', '0'], [' 1', '0']]) {
      it(`fails on memory "${memory}" / cores "${cores}" (non-negative int32 only)`, () => {
        const decoded = decodeAllocation(`;GPU-a,NVIDIA,${memory},${cores}:;`);
        expect(isDecodeError(decoded)).to.equal(true);
        expect(isDecodeError(decoded) && decoded.error).to.contain('GPU-a');
      });
    }

    it('accepts the int32 bounds and a leading +', () => {
      expect(decodeAllocation('GPU-a,NVIDIA,2147483647,+5:;')).to.deep.equal([[device('GPU-a', 2147483647, 5)]]);
    });

    it('never throws on random text and round-trips whatever it accepts', () => {
      const alphabet = 'GPU-ab,;:NVIDIA0123456789 ';
      let seed = 11;
      const next = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
      for (let round = 0; round < 1000; round++) {
        let text = '';
        const length = next() % 40;
        for (let i = 0; i < length; i++) text += alphabet[next() % alphabet.length] ?? '';
        const decoded = decodeAllocation(text);
        if (isDecodeError(decoded)) continue;
        expect(decodeAllocation(encodeAllocation(decoded))).to.deep.equal(decoded, text);
      }
    });
  });
});
