import { expect } from 'chai';
import {
  decodeAllocation,
  describeOddities,
  encodeAllocation,
  isDecodeError,
  MISSING_FIELDS_ERROR,
  readAllocation,
  type AllocatedDevice,
  type AllocationOddityKind,
  type PodAllocation,
} from '../../../src/devices/allocation-codec.js';
import { ALLOCATED_ANNOTATION, TO_ALLOCATE_ANNOTATION } from '../../../src/hami/wire.js';

const device = (uuid: string, memoryMiB: number, cores: number): AllocatedDevice => ({
  uuid,
  type: 'NVIDIA',
  memoryMiB,
  cores,
});
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
    // `;GPU-a,NVIDIA,1000,30:;` → `;;;` and `GPU-a,NVIDIA,1000,0:;` → `;;` (each rewrite keeps
    // HAMi's extra empty entry).
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
    it('strict: refuses a value whose last container lacks its ";" or whose last device lacks its ":" (a truncated write)', () => {
      expect(decodeAllocation('GPU-a,NVIDIA,1000,20:', 'strict')).to.deep.include({
        container: 0,
        field: 'terminator',
      });
      expect(decodeAllocation(';GPU-a,NVIDIA,1000,20;', 'strict')).to.deep.include({
        container: 1,
        device: 0,
        field: 'terminator',
      });
      expect(decodeAllocation('GPU-a,NVIDIA,1000,20', 'strict')).to.deep.include({ container: 0, field: 'terminator' });
    });

    // HAMi skips pieces without a comma; the strict reading refuses them.
    it('strict: refuses stray text before, between and after devices, naming the container and device', () => {
      const stray = decodeAllocation('garbage:GPU-a,NVIDIA,3000,30:;', 'strict');
      expect(stray).to.deep.include({ container: 0, device: 0, field: 'fields' });
      expect(isDecodeError(stray) && stray.error).to.equal(
        'container 0, device 0: "garbage" is not a device "<uuid>,NVIDIA,<memory MiB>,<cores>"',
      );
      expect(decodeAllocation(';GPU-a,NVIDIA,3000,30::;', 'strict')).to.deep.include({
        container: 1,
        device: 1,
        field: 'fields',
      });
      expect(decodeAllocation('GPU-a,NVIDIA,3000,30:x;', 'strict')).to.deep.include({
        container: 0,
        device: 1,
        field: 'terminator',
      });
    });

    it('strict: refuses a device with more than 4 fields (HAMi ignores the extra ones)', () => {
      expect(decodeAllocation('GPU-a,NVIDIA,1000,20,extra:;', 'strict')).to.deep.include({
        container: 0,
        device: 0,
        field: 'fields',
      });
    });

    // The annotation is the NVIDIA backend's; HAMi's plugin finds its work by searching for NVIDIA.
    it('refuses a device type other than NVIDIA', () => {
      const decoded = decodeAllocation('GPU-a,NVIDIA,100,0:;MLU-1,MLU,100,0:;');
      expect(decoded).to.deep.include({ container: 1, device: 0, field: 'type' });
      expect(isDecodeError(decoded) && decoded.error).to.equal(
        'container 1, device 0: type "MLU" of "MLU-1" is not NVIDIA',
      );
      expect(decodeAllocation('GPU-a,nvidia,100,0:;')).to.deep.include({ field: 'type' });
    });

    for (const uuid of ['', ' ', 'GPU a', 'GPU-\u00e9', 'GPU-\t']) {
      it(`refuses the uuid ${JSON.stringify(uuid)} (usage is keyed by it)`, () => {
        expect(decodeAllocation(`${uuid},NVIDIA,100,0:;`)).to.deep.include({ container: 0, device: 0, field: 'uuid' });
      });
    }

    it("fails with HAMi's message when a device has fewer than 4 fields", () => {
      const decoded = decodeAllocation('GPU-a,NVIDIA,1000:;');
      expect(decoded).to.deep.include({ container: 0, device: 0, field: 'fields' });
      expect(isDecodeError(decoded) && decoded.error).to.include(MISSING_FIELDS_ERROR);
      expect(MISSING_FIELDS_ERROR).to.equal(
        'pod annotation format error, missing fields, do not use nodeName in task spec',
      );
    });

    for (const [cores, verdict] of [
      ['0', 0],
      ['100', 100],
      ['101', undefined],
      ['130', undefined],
      ['-1', undefined],
      ['-0', 0],
      ['+5', 5],
    ] as const) {
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
      expect(isDecodeError(decoded) && decoded.error).to.match(
        /^container 1, device 1: cores "101" of "GPU-b" is not an integer in 0\.\.100$/,
      );
    });

    it('echoes at most a short prefix of a huge value in its error', () => {
      const decoded = decodeAllocation(`${'x'.repeat(300_000)};`, 'strict');
      expect(isDecodeError(decoded) && decoded.error.length).to.be.below(200);
      const missing = decodeAllocation(`${'x'.repeat(300_000)},y;`);
      expect(isDecodeError(missing) && missing.error.length).to.be.below(200);
    });

    for (const [memory, cores] of [
      ['abc', '0'],
      ['1000', 'x'],
      ['1.5', '0'],
      ['-5', '0'],
      ['1000', '-1'],
      ['2147483648', '0'],
      ['', '0'],
      [' 1', '0'],
    ]) {
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

  // HAMi v2.10's DecodePodDevices / DecodeContainerDevices (pkg/device/devices.go): split on ";",
  // every piece a container; split on ":", every piece with a "," a device of >= 4 fields, the
  // 3rd and 4th through strconv.ParseInt(s, 10, 32); pieces without "," skipped, extra fields ignored.
  describe('the HAMi v2.10 reading (the default) and its oddities', () => {
    const kinds = (text: string): AllocationOddityKind[] => {
      const decoded = readAllocation(text);
      if ('error' in decoded) throw new Error(decoded.error);
      return decoded.oddities.map((oddity) => oddity.kind);
    };

    // HAMi's own fixtures (devices_test.go, issue threads #2899, WebUI #98): no oddity, read alike both ways.
    const hamiExamples: [string, PodAllocation][] = [
      [
        'GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76,NVIDIA,500,3:;GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,NVIDIA,500,3:;',
        [
          [device('GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76', 500, 3)],
          [device('GPU-ebe7c3f7-303d-558d-435e-99a160631fe4', 500, 3)],
        ],
      ],
      [
        'GPU-962d9630-a4ef-dc16-a50d-b2effb90239d,NVIDIA,1000,10:;GPU-962d9630-a4ef-dc16-a50d-b2effb90239d,NVIDIA,1000,10:;',
        [
          [device('GPU-962d9630-a4ef-dc16-a50d-b2effb90239d', 1000, 10)],
          [device('GPU-962d9630-a4ef-dc16-a50d-b2effb90239d', 1000, 10)],
        ],
      ],
      [';GPU-A,NVIDIA,2500,25:;GPU-B,NVIDIA,2500,25:;', [[], [device('GPU-A', 2500, 25)], [device('GPU-B', 2500, 25)]]],
      ['GPU-A,NVIDIA,2500,25:;GPU-B,NVIDIA,2500,25:;', [[device('GPU-A', 2500, 25)], [device('GPU-B', 2500, 25)]]],
      [';;GPU-a,NVIDIA,1000,0:GPU-b,NVIDIA,1000,0:;', [[], [], [device('GPU-a', 1000, 0), device('GPU-b', 1000, 0)]]],
    ];
    for (const [text, allocation] of hamiExamples) {
      it(`reads HAMi's ${JSON.stringify(text.slice(0, 40))}… with no oddity, as the strict reading does`, () => {
        expect(readAllocation(text)).to.deep.equal({ containers: allocation, oddities: [] });
        expect(decodeAllocation(text, 'strict')).to.deep.equal(allocation);
      });
    }

    const lenient: [string, PodAllocation, AllocationOddityKind[]][] = [
      // A container without its ";": HAMi's split makes it a container all the same.
      ['GPU-a,NVIDIA,3000,30:', [[device('GPU-a', 3000, 30)]], ['container-terminator']],
      [';GPU-a,NVIDIA,3000,30:', [[], [device('GPU-a', 3000, 30)]], ['container-terminator']],
      // A device without its ":".
      ['GPU-a,NVIDIA,3000,30;', [[device('GPU-a', 3000, 30)]], ['device-terminator']],
      ['GPU-a,NVIDIA,1,2:GPU-b,NVIDIA,3,4;', [[device('GPU-a', 1, 2), device('GPU-b', 3, 4)]], ['device-terminator']],
      // Both: what a hand-written value often looks like.
      ['GPU-a,NVIDIA,3000,30', [[device('GPU-a', 3000, 30)]], ['container-terminator', 'device-terminator']],
      // Fields after the fourth are ignored.
      ['GPU-a,NVIDIA,3000,30,extra:;', [[device('GPU-a', 3000, 30)]], ['extra-fields']],
      [
        'GPU-a,NVIDIA,3000,30,,x,y:GPU-b,NVIDIA,1,0,z:;',
        [[device('GPU-a', 3000, 30), device('GPU-b', 1, 0)]],
        ['extra-fields'],
      ],
      // Pieces without "," are skipped (HAMi after v2.10 refuses them, #2765).
      ['garbage:GPU-a,NVIDIA,3000,30:;', [[device('GPU-a', 3000, 30)]], ['skipped-piece']],
      [';GPU-a,NVIDIA,3000,30::;', [[], [device('GPU-a', 3000, 30)]], ['skipped-piece']],
      ['GPU-a,NVIDIA,3000,30:x;', [[device('GPU-a', 3000, 30)]], ['skipped-piece']],
      [':;', [[]], ['skipped-piece']],
      // Each kind once, in reading order.
      [
        'x:GPU-a,NVIDIA,1,2,e:y:;GPU-b,NVIDIA,1,2',
        [[device('GPU-a', 1, 2)], [device('GPU-b', 1, 2)]],
        ['container-terminator', 'skipped-piece', 'extra-fields', 'device-terminator'],
      ],
    ];
    for (const [text, allocation, expected] of lenient) {
      it(`reads ${JSON.stringify(text)} as HAMi does, naming ${expected.join(', ')}; the strict reading refuses it`, () => {
        expect(decodeAllocation(text)).to.deep.equal(allocation);
        expect(kinds(text)).to.deep.equal(expected);
        expect(isDecodeError(decodeAllocation(text, 'strict'))).to.equal(true);
      });
    }

    it('names where each oddity is, in a bounded note that quotes hostile text only briefly', () => {
      const decoded = readAllocation(
        `${'x'.repeat(100_000)}:GPU-a,NVIDIA,1,2,${'e'.repeat(100_000)}:${':'.repeat(50_000)};GPU-b,NVIDIA,1,2`,
      );
      if ('error' in decoded) throw new Error(decoded.error);
      expect(decoded.oddities.map(({ kind, container, device: at }) => [kind, container, at])).to.deep.equal([
        ['container-terminator', 1, undefined],
        ['skipped-piece', 0, 0],
        ['extra-fields', 0, 1],
        ['device-terminator', 1, 0],
      ]);
      expect(decoded.oddities.length).to.be.at.most(4);
      expect(describeOddities(decoded.oddities).length).to.be.below(600);
      expect(decoded.oddities[1]?.note).to.match(/^container 0, device 0: "x+…?"? \(no ","\) skipped$/u);
    });

    // What HAMi v2.10 refuses stays refused, with its error.
    it("still refuses a device with fewer than 4 fields, with HAMi's message", () => {
      for (const text of ['GPU-a,NVIDIA,1000:;', 'GPU-a,NVIDIA,1000', 'x:GPU-a,NVIDIA:;', 'GPU-a,NVIDIA,1,2:a,b:;']) {
        const decoded = decodeAllocation(text);
        expect(isDecodeError(decoded) && decoded.error, text).to.include(MISSING_FIELDS_ERROR);
      }
    });

    for (const [memory, cores] of [
      ['abc', '0'],
      ['1000', 'x'],
      ['1.5', '0'],
      ['1e3', '0'],
      ['1_000', '0'],
      ['0x10', '0'],
      ['2147483648', '0'],
      ['', '0'],
      [' 1', '0'],
      ['1000', ''],
    ]) {
      it(`still refuses memory "${memory}" / cores "${cores}" (strconv.ParseInt(s, 10, 32) fails on it) without a terminator too`, () => {
        expect(isDecodeError(decodeAllocation(`GPU-a,NVIDIA,${memory},${cores}`))).to.equal(true);
        expect(isDecodeError(decodeAllocation(`GPU-a,NVIDIA,${memory},${cores},extra:;`))).to.equal(true);
      });
    }

    it("reads ParseInt's signs and leading zeros as HAMi does", () => {
      expect(decodeAllocation('GPU-a,NVIDIA,+0100,-0')).to.deep.equal([[device('GPU-a', 100, 0)]]);
    });

    // Stricter than HAMi v2.10 on purpose (both readings): values we could not count safely.
    it('keeps refusing, in both readings, what would make the count unsafe: empty UUID, foreign type, memory 0 or negative, cores beyond 0..100', () => {
      for (const text of [
        ',,0,0:;',
        ',NVIDIA,100,0:;',
        'MLU-1,MLU,100,0:;',
        'GPU-a,NVIDIA,0,0:;',
        'GPU-a,NVIDIA,-5,0:;',
        'GPU-a,NVIDIA,5,-1:;',
        'GPU-a,NVIDIA,5,101:;',
        'GPU-a,NVIDIA,0,0,x',
      ]) {
        expect(isDecodeError(decodeAllocation(text)), text).to.equal(true);
        expect(isDecodeError(decodeAllocation(text, 'strict')), text).to.equal(true);
      }
    });

    // Property: what our encoder writes means the same in both readings, with no oddity.
    it('reads every value our encoder writes the same in the strict and the HAMi reading, with no oddity (seeded)', () => {
      let seed = 26;
      const next = (bound: number): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % bound;
      const uuidChars = 'GPU-abcdef0123456789!#$%&()*+./<=>?@[]^_`{|}~';
      for (let round = 0; round < 2000; round++) {
        const allocation: PodAllocation = Array.from({ length: next(6) }, () =>
          Array.from({ length: next(4) === 0 ? 0 : next(4) }, () => {
            const uuid = Array.from({ length: 1 + next(12) }, () => uuidChars[next(uuidChars.length)] ?? 'G').join('');
            return device(uuid, [1, 2 ** 31 - 1, 1 + next(81_920)][next(3)] ?? 1, [0, 100, next(101)][next(3)] ?? 0);
          }),
        );
        const text = encodeAllocation(allocation);
        expect(readAllocation(text), text).to.deep.equal({ containers: allocation, oddities: [] });
        expect(decodeAllocation(text, 'strict'), text).to.deep.equal(allocation);
      }
    });

    it('never throws on random text, and what the strict reading accepts the HAMi reading reads alike', () => {
      const alphabet = 'GPU-ab,;:NVIDIA0123456789+ ';
      let seed = 7;
      const next = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
      for (let round = 0; round < 3000; round++) {
        let text = '';
        const length = next() % 48;
        for (let i = 0; i < length; i++) text += alphabet[next() % alphabet.length] ?? '';
        const hami = readAllocation(text);
        const strict = decodeAllocation(text, 'strict');
        if (!isDecodeError(strict)) expect(hami, text).to.deep.equal({ containers: strict, oddities: [] });
        if ('error' in hami) continue;
        // A lenient read is canonical once re-encoded: the strict reading takes it back unchanged.
        expect(decodeAllocation(encodeAllocation(hami.containers), 'strict'), text).to.deep.equal(hami.containers);
      }
    });
  });
});
