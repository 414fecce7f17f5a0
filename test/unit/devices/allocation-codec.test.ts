import { expect } from 'chai';
import { decodeAllocation, encodeAllocation, isDecodeError, MISSING_FIELDS_ERROR, type AllocatedDevice, type PodAllocation } from '../../../src/devices/allocation-codec.js';
import { ALLOCATED_ANNOTATION, TO_ALLOCATE_ANNOTATION } from '../../../src/hami/wire.js';

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
    it('refuses a value whose last container lacks its ";" or whose last device lacks its ":" (a truncated write)', () => {
      expect(decodeAllocation('GPU-a,NVIDIA,1000,20:')).to.deep.include({ container: 0, field: 'terminator' });
      expect(decodeAllocation(';GPU-a,NVIDIA,1000,20;')).to.deep.include({ container: 1, device: 0, field: 'terminator' });
      expect(decodeAllocation('GPU-a,NVIDIA,1000,20')).to.deep.include({ container: 0, field: 'terminator' });
    });

    // HAMi skips pieces without a comma, so the stray text below decoded as if it were not there.
    it('refuses stray text before, between and after devices, naming the container and device', () => {
      const stray = decodeAllocation('garbage:GPU-a,NVIDIA,3000,30:;');
      expect(stray).to.deep.include({ container: 0, device: 0, field: 'fields' });
      expect(isDecodeError(stray) && stray.error).to.equal('container 0, device 0: "garbage" is not a device "<uuid>,NVIDIA,<memory MiB>,<cores>"');
      expect(decodeAllocation(';GPU-a,NVIDIA,3000,30::;')).to.deep.include({ container: 1, device: 1, field: 'fields' });
      expect(decodeAllocation('GPU-a,NVIDIA,3000,30:x;')).to.deep.include({ container: 0, device: 1, field: 'terminator' });
    });

    it('refuses a device with more than 4 fields (HAMi ignores the extra ones)', () => {
      expect(decodeAllocation('GPU-a,NVIDIA,1000,20,extra:;')).to.deep.include({ container: 0, device: 0, field: 'fields' });
    });

    // The annotation is the NVIDIA backend's; HAMi's plugin finds its work by searching for NVIDIA.
    it('refuses a device type other than NVIDIA', () => {
      const decoded = decodeAllocation('GPU-a,NVIDIA,100,0:;MLU-1,MLU,100,0:;');
      expect(decoded).to.deep.include({ container: 1, device: 0, field: 'type' });
      expect(isDecodeError(decoded) && decoded.error).to.equal('container 1, device 0: type "MLU" of "MLU-1" is not NVIDIA');
      expect(decodeAllocation('GPU-a,nvidia,100,0:;')).to.deep.include({ field: 'type' });
    });

    for (const uuid of ['', ' ', 'GPU a', 'GPU-\u00e9', 'GPU-\t']) {
      it(`refuses the uuid ${JSON.stringify(uuid)} (usage is keyed by it)`, () => {
        expect(decodeAllocation(`${uuid},NVIDIA,100,0:;`)).to.deep.include({ container: 0, device: 0, field: 'uuid' });
      });
    }

    it('fails with HAMi\'s message when a device has fewer than 4 fields', () => {
      const decoded = decodeAllocation('GPU-a,NVIDIA,1000:;');
      expect(decoded).to.deep.include({ container: 0, device: 0, field: 'fields' });
      expect(isDecodeError(decoded) && decoded.error).to.include(MISSING_FIELDS_ERROR);
      expect(MISSING_FIELDS_ERROR).to.equal('pod annotation format error, missing fields, do not use nodeName in task spec');
    });

    for (const [cores, verdict] of [['0', 0], ['100', 100], ['101', undefined], ['130', undefined], ['-1', undefined], ['-0', 0], ['+5', 5]] as const) {
      it(`reads cores "${cores}" as ${verdict === undefined ? 'an error' : verdict} (0..100)`, () => {
        const decoded = decodeAllocation(`GPU-a,NVIDIA,1000,${cores}:;`);
        if (verdict === undefined) expect(decoded).to.deep.include({ container: 0, device: 0, field: 'cores' });
        else expect(decoded).to.deep.equal([[device('GPU-a', 1000, verdict)]]);
      });
    }

    it('refuses memory 0 (HAMi-core reads a 0 MiB limit as no limit)', () => {
      expect(decodeAllocation('GPU-a,NVIDIA,0,10:;')).to.deep.include({ container: 0, device: 0, field: 'memory' });
    });

    it('names container and device by position: the first bad one wins', () => {
      const decoded = decodeAllocation(';GPU-a,NVIDIA,1000,10:GPU-b,NVIDIA,1000,101:;GPU-c,AMD,1,1:;');
      expect(decoded).to.deep.include({ container: 1, device: 1, field: 'cores' });
      expect(isDecodeError(decoded) && decoded.error).to.match(/^container 1, device 1: cores "101" of "GPU-b" is not an integer in 0\.\.100$/);
    });

    it('echoes at most a short prefix of a huge value in its error', () => {
      const decoded = decodeAllocation(`${'x'.repeat(300_000)};`);
      expect(isDecodeError(decoded) && decoded.error.length).to.be.below(200);
    });

    for (const [memory, cores] of [['abc', '0'], ['1000', 'x'], ['1.5', '0'], ['-5', '0'], ['1000', '-1'], ['2147483648', '0'], ['', '0'], [' 1', '0']]) {
      it(`fails on memory "${memory}" / cores "${cores}"`, () => {
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
