import { expect } from 'chai';
import {
  encodeLinkScores,
  encodeNodeInventory,
  INVENTORY_ANNOTATIONS,
  parseNodeInventory,
  type GpuDevice,
} from '../../../src/devices/inventory.js';
import { simulatedGpuAnnotations } from '../../../src/local/simulated-gpu-node.js';
import { DEVICE_CORDON_ANNOTATION, NODE_REGISTER_ANNOTATION, NODE_SCORE_ANNOTATION } from '../../../src/hami/wire.js';

const V100 = 'NVIDIA-Tesla V100-PCIE-32GB';
const A = 'GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec';
const B = 'GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448';
// hami-wire-contract.md §4.2: 2× V100, the second on NUMA 1 and unhealthy (health omitted).
const SPEC_EXAMPLE =
  `[{"id":"${A}","count":10,"devmem":32768,"devcore":100,"type":"${V100}","mode":"hami-core","health":true},` +
  `{"id":"${B}","index":1,"count":10,"devmem":32768,"devcore":100,"type":"${V100}","numa":1,"mode":"hami-core"}]`;

function gpu(overrides: Partial<GpuDevice>): GpuDevice {
  return {
    uuid: A,
    index: 0,
    count: 10,
    memoryMiB: 32768,
    cores: 100,
    type: V100,
    numa: 0,
    mode: 'hami-core',
    healthy: true,
    cordoned: false,
    ...overrides,
  };
}

const inventoryOf = (value: string, extra: Record<string, string> = {}) =>
  parseNodeInventory({ [NODE_REGISTER_ANNOTATION]: value, ...extra });

describe('devices: node inventory codec (HAMi §4.2)', () => {
  describe('JSON form (v2.8+)', () => {
    it('reads the spec example: omitted index/numa are 0, omitted health is false (unhealthy, kept)', () => {
      expect(inventoryOf(SPEC_EXAMPLE)).to.deep.equal({
        devices: [gpu({}), gpu({ uuid: B, index: 1, numa: 1, healthy: false })],
        problems: [`${B} unhealthy`],
      });
    });

    it('gives every omitted field its Go zero value', () => {
      expect(inventoryOf('[{"id":"GPU-x"}]').devices).to.deep.equal([
        {
          uuid: 'GPU-x',
          index: 0,
          count: 0,
          memoryMiB: 0,
          cores: 0,
          type: '',
          numa: 0,
          mode: '',
          healthy: false,
          cordoned: false,
        },
      ]);
    });

    it('ignores fields it does not model (migProfiles) and tolerates null as absent', () => {
      const value = `[{"id":"GPU-m","index":2,"count":7,"devmem":40960,"devcore":100,"type":"NVIDIA-A100","mode":"mig","migProfiles":[{"name":"1g.5gb"}],"health":true,"numa":null}]`;
      expect(inventoryOf(value)).to.deep.equal({
        devices: [gpu({ uuid: 'GPU-m', index: 2, count: 7, memoryMiB: 40960, type: 'NVIDIA-A100', mode: 'mig' })],
        problems: [],
      });
    });

    it('drops and reports malformed entries by position, keeping the good ones', () => {
      const value = JSON.stringify([
        { id: 'GPU-ok', count: 4, health: true },
        { count: 4 },
        { id: '', count: 4 },
        'GPU-str',
        { id: 'GPU-badcount', count: '10' },
        { id: 'GPU-neg', devmem: -1 },
        { id: 'GPU-frac', devcore: 1.5 },
        { id: 'GPU-type', type: 7 },
        { id: 'GPU-health', health: 'true' },
        { id: 'GPU-ok', count: 2, health: true },
      ]);
      const inventory = inventoryOf(value);
      expect(inventory.devices.map((device) => device.uuid)).to.deep.equal(['GPU-ok']);
      expect(inventory.problems).to.deep.equal([
        'device #1 has no id',
        'device #2 has no id',
        'device #3 is not an object',
        'device #4 (GPU-badcount) has an invalid count: "10"',
        'device #5 (GPU-neg) has an invalid devmem: -1',
        'device #6 (GPU-frac) has an invalid devcore: 1.5',
        'device #7 (GPU-type) has a non-string type or mode',
        'device #8 (GPU-health) has an invalid health: "true"',
        'device #9 repeats id GPU-ok',
      ]);
    });

    it('reports an empty array as "no gpu found on node"', () => {
      expect(inventoryOf('[]')).to.deep.equal({ devices: [], problems: ['no gpu found on node'] });
    });
  });

  describe('legacy form (≤ v2.7)', () => {
    it('reads 9-field entries (index and mode)', () => {
      expect(
        inventoryOf(`${A},10,32768,100,${V100},0,true,0,hami-core:${B},10,32768,100,${V100},1,false,1,mps:`),
      ).to.deep.equal({
        devices: [gpu({}), gpu({ uuid: B, numa: 1, healthy: false, index: 1, mode: 'mps' })],
        problems: [`${B} unhealthy`],
      });
    });

    it('reads 7-field entries as index 0, mode hami-core', () => {
      expect(inventoryOf(`${A},10,32768,100,${V100},0,true:`).devices).to.deep.equal([gpu({})]);
    });

    it('accepts Go ParseBool spellings of health', () => {
      const value = ['1', 't', 'TRUE', 'True', '0', 'f', 'FALSE']
        .map((health, i) => `GPU-${i},1,100,100,NVIDIA-T4,0,${health}:`)
        .join('');
      expect(inventoryOf(value).devices.map((device) => device.healthy)).to.deep.equal([
        true,
        true,
        true,
        true,
        false,
        false,
        false,
      ]);
    });

    it('drops and reports entries with the wrong field count or non-integer numbers', () => {
      const value = `GPU-a,10,32768,100,${V100},0,true:GPU-b,10,32768:GPU-c,ten,32768,100,${V100},0,true:GPU-d,10,1,100,${V100},0,maybe:,1,1,1,T,0,true:`;
      const inventory = inventoryOf(value);
      expect(inventory.devices.map((device) => device.uuid)).to.deep.equal(['GPU-a']);
      expect(inventory.problems).to.deep.equal([
        'device #1 has 3 fields, expected 7 or 9',
        'device #2 (GPU-c) has a non-integer count, devmem, devcore, numa or index',
        'device #3 (GPU-d) has an invalid health: "maybe"',
        'device #4 has no id',
      ]);
    });
  });

  describe('unhealthy and cordoned GPUs', () => {
    it('keeps cordoned GPUs with the flag set, trims the list, and reports cordons naming unknown GPUs', () => {
      const value = `[{"id":"GPU-a","count":10,"health":true},{"id":"GPU-b","index":1,"count":10,"health":true}]`;
      const inventory = inventoryOf(value, { [DEVICE_CORDON_ANNOTATION]: ' GPU-b , ,GPU-zz' });
      expect(inventory.devices.map((device) => [device.uuid, device.cordoned])).to.deep.equal([
        ['GPU-a', false],
        ['GPU-b', true],
      ]);
      expect(inventory.problems).to.deep.equal([
        'GPU-b cordoned',
        `${DEVICE_CORDON_ANNOTATION} names unknown GPU GPU-zz`,
      ]);
    });

    it('reports a GPU that is both unhealthy and cordoned twice, and keeps it', () => {
      const inventory = inventoryOf('[{"id":"GPU-a"}]', { [DEVICE_CORDON_ANNOTATION]: 'GPU-a' });
      expect(inventory.devices).to.have.length(1);
      expect(inventory.devices[0]).to.deep.include({ healthy: false, cordoned: true });
      expect(inventory.problems).to.deep.equal(['GPU-a unhealthy', 'GPU-a cordoned']);
    });
  });

  describe('garbage', () => {
    it('reports a missing annotation', () => {
      expect(parseNodeInventory(undefined)).to.deep.equal({ devices: [], problems: ['annotation missing'] });
      expect(parseNodeInventory({})).to.deep.equal({ devices: [], problems: ['annotation missing'] });
      expect(parseNodeInventory({ [DEVICE_CORDON_ANNOTATION]: 'GPU-a' })).to.deep.equal({
        devices: [],
        problems: ['annotation missing'],
      });
    });

    const garbage = [
      '',
      ' ',
      'null',
      '{}',
      '{"id":"GPU-a"}',
      '[',
      '[{"id":"GPU-a"},',
      'GPU-a',
      'true',
      '42',
      '"[]"',
      '[1, 2]',
    ];
    for (const value of garbage) {
      it(`returns no devices and a problem, never a throw, for ${JSON.stringify(value)}`, () => {
        const inventory = inventoryOf(value);
        expect(inventory.devices).to.deep.equal([]);
        expect(inventory.problems).to.have.length.greaterThan(0);
        for (const problem of inventory.problems) expect(problem).to.be.a('string').and.not.equal('');
      });
    }

    it('never throws on random text', () => {
      const alphabet = '[]{}":,0123456789abcdefGPU-truefalsenull \\';
      let seed = 7;
      const next = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
      for (let round = 0; round < 500; round++) {
        let value = round % 2 === 0 ? '[' : '';
        const length = next() % 60;
        for (let i = 0; i < length; i++) value += alphabet[next() % alphabet.length] ?? '';
        const inventory = inventoryOf(value);
        expect(inventory.devices.length + inventory.problems.length).to.be.greaterThan(0, value);
      }
    });
  });

  describe('encoding', () => {
    it('writes the spec example byte for byte (field order, omitempty)', () => {
      expect(encodeNodeInventory(inventoryOf(SPEC_EXAMPLE).devices)).to.equal(SPEC_EXAMPLE);
    });

    it('omits zero, empty and false fields, and never writes the cordon flag', () => {
      expect(
        encodeNodeInventory([
          {
            uuid: 'GPU-z',
            index: 0,
            count: 0,
            memoryMiB: 0,
            cores: 0,
            type: '',
            numa: 0,
            mode: '',
            healthy: false,
            cordoned: true,
          },
        ]),
      ).to.equal('[{"id":"GPU-z"}]');
      expect(encodeNodeInventory([])).to.equal('[]');
    });

    it('escapes like Go encoding/json (<, >, & as \\u00XX)', () => {
      expect(encodeNodeInventory([gpu({ uuid: 'GPU-1', type: 'NVIDIA <A&B>' })])).to.equal(
        '[{"id":"GPU-1","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA \\u003cA\\u0026B\\u003e","mode":"hami-core","health":true}]',
      );
    });

    it('round-trips through parse', () => {
      const devices = [
        gpu({ uuid: 'GPU-1', index: 3, numa: 1 }),
        gpu({ uuid: 'GPU-2', healthy: false, mode: 'mps', count: 4 }),
      ];
      expect(inventoryOf(encodeNodeInventory(devices)).devices).to.deep.equal(devices);
    });
  });

  describe('link scores (hami.io/node-nvidia-score, for topology-aware)', () => {
    // The shape pkg/device/devices.go DecodePairScores reads: [{"uuid", "score": {peer: int}}].
    const scores = `[{"uuid":"${A}","score":{"${B}":100}},{"uuid":"${B}","score":{"${A}":100}}]`;

    it('reads the scores beside the devices', () => {
      const inventory = inventoryOf(SPEC_EXAMPLE, { [NODE_SCORE_ANNOTATION]: scores });
      expect(inventory.linkScores?.get(A)?.get(B)).to.equal(100);
      expect(inventory.linkScores?.get(B)?.get(A)).to.equal(100);
      expect(inventory.problems).to.deep.equal([`${B} unhealthy`]);
    });

    it('leaves linkScores out when the plugin writes none, so topology-aware can say so', () => {
      expect(inventoryOf(SPEC_EXAMPLE)).not.to.have.property('linkScores');
    });

    it('accepts a GPU without peers (omitempty drops "score")', () => {
      expect(
        inventoryOf(SPEC_EXAMPLE, { [NODE_SCORE_ANNOTATION]: `[{"uuid":"${A}"}]` }).linkScores?.get(A)?.size,
      ).to.equal(0);
    });

    const broken: [string, RegExp][] = [
      ['{not json', /hami\.io\/node-nvidia-score is not valid JSON/],
      ['{"uuid":"x"}', /is not a JSON array/],
      ['[{"score":{}}]', /entry #0 has no uuid/],
      [`[{"uuid":"${A}","score":{"${B}":"high"}}]`, /non-integer score for/],
      [`[{"uuid":"${A}","score":[1]}]`, /score that is not an object/],
    ];
    for (const [value, problem] of broken) {
      it(`names an unreadable value (${value.slice(0, 30)}) and drops what it cannot read`, () => {
        const inventory = inventoryOf(SPEC_EXAMPLE, { [NODE_SCORE_ANNOTATION]: value });
        expect(
          inventory.problems.some((text) => problem.test(text)),
          inventory.problems.join('; '),
        ).to.equal(true);
        expect(inventory.linkScores?.get(A)?.get(B)).to.equal(undefined);
        expect(inventory.devices).to.have.length(2);
      });
    }

    it('round-trips through encodeLinkScores', () => {
      const map = new Map([
        [A, new Map([[B, 40]])],
        [B, new Map([[A, 40]])],
      ]);
      expect(inventoryOf(SPEC_EXAMPLE, { [NODE_SCORE_ANNOTATION]: encodeLinkScores(map) }).linkScores).to.deep.equal(
        map,
      );
    });

    it('INVENTORY_ANNOTATIONS lists every annotation parseNodeInventory reads', () => {
      expect(INVENTORY_ANNOTATIONS).to.have.members([
        NODE_REGISTER_ANNOTATION,
        DEVICE_CORDON_ANNOTATION,
        NODE_SCORE_ANNOTATION,
      ]);
    });

    it('a simulated node can carry NUMA nodes and link scores', () => {
      const inventory = parseNodeInventory(
        simulatedGpuAnnotations({
          name: 'n',
          gpus: 4,
          numaNodes: 2,
          linkScore: (a, b) => (Math.floor(a / 2) === Math.floor(b / 2) ? 100 : 10),
        }),
      );
      expect(inventory.devices.map((device) => device.numa)).to.deep.equal([0, 0, 1, 1]);
      expect(inventory.linkScores?.get('GPU-n-0')?.get('GPU-n-1')).to.equal(100);
      expect(inventory.linkScores?.get('GPU-n-0')?.get('GPU-n-2')).to.equal(10);
      expect(
        parseNodeInventory(simulatedGpuAnnotations({ name: 'n', gpus: 2 })).devices.map((device) => device.numa),
      ).to.deep.equal([0, 0]);
    });
  });
});
