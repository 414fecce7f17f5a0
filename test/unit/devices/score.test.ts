import { expect } from 'chai';
import { gpuScore } from '../../../src/devices/gpu-order.js';
import type { GpuDevice } from '../../../src/devices/inventory.js';
import type { ContainerGpuRequest } from '../../../src/devices/requests.js';
import { nodeScore, nodeUtilization, policiesFor } from '../../../src/devices/score.js';
import { GPU_POLICY_ANNOTATION, NODE_POLICY_ANNOTATION } from '../../../src/hami/wire.js';
import { DEFAULT_SCORING_WEIGHTS, parseScoringWeights } from '../../../src/devices/scoring-weights.js';
import type { GpuUse } from '../../../src/devices/usage.js';

function gpu(uuid: string, overrides: Partial<GpuDevice> = {}): GpuDevice {
  return {
    uuid,
    index: 0,
    count: 10,
    memoryMiB: 10000,
    cores: 100,
    type: 'NVIDIA-T4',
    numa: 0,
    mode: 'hami-core',
    healthy: true,
    cordoned: false,
    ...overrides,
  };
}
const use = (slots: number, memoryMiB: number, cores: number): GpuUse => ({ slots, memoryMiB, cores });
const req = (overrides: Partial<ContainerGpuRequest> = {}): ContainerGpuRequest => ({
  count: 1,
  memoryMiB: 1000,
  memoryPercentage: undefined,
  cores: 0,
  ...overrides,
});

describe('devices: policies and scores (HAMi §3.4)', () => {
  describe('policiesFor (pkg/util/util.go IsValidGPUSchedulerPolicy, IsValidNodeSchedulerPolicy)', () => {
    const defaults = { node: 'binpack', gpu: 'spread' } as const;
    const chain = (keys: string[], mutex = false, topologyAware = false) => ({ keys, mutex, topologyAware });
    const cases: [Record<string, string>, { node: string; gpu: ReturnType<typeof chain> }][] = [
      [{}, { node: 'binpack', gpu: chain(['spread']) }],
      [
        { [NODE_POLICY_ANNOTATION]: 'spread', [GPU_POLICY_ANNOTATION]: 'binpack' },
        { node: 'spread', gpu: chain(['binpack']) },
      ],
      [{ [NODE_POLICY_ANNOTATION]: ' spread ' }, { node: 'spread', gpu: chain(['spread']) }],
      [{ [GPU_POLICY_ANNOTATION]: 'topology-aware' }, { node: 'binpack', gpu: chain([], false, true) }],
      [{ [GPU_POLICY_ANNOTATION]: 'mutex' }, { node: 'binpack', gpu: chain([], true) }],
      [{ [GPU_POLICY_ANNOTATION]: 'numa' }, { node: 'binpack', gpu: chain(['numa']) }],
      [{ [GPU_POLICY_ANNOTATION]: 'binpack,numa' }, { node: 'binpack', gpu: chain(['binpack', 'numa']) }],
      [{ [GPU_POLICY_ANNOTATION]: 'numa, binpack ,numa' }, { node: 'binpack', gpu: chain(['numa', 'binpack']) }],
      [
        { [GPU_POLICY_ANNOTATION]: 'mutex,topology-aware,spread' },
        { node: 'binpack', gpu: chain(['spread'], true, true) },
      ],
      // Blank names no policy: the default stands, as in HAMi.
      [{ [GPU_POLICY_ANNOTATION]: '' }, { node: 'binpack', gpu: chain(['spread']) }],
      [{ [NODE_POLICY_ANNOTATION]: ' ' }, { node: 'binpack', gpu: chain(['spread']) }],
    ];
    for (const [annotations, want] of cases) {
      it(`${JSON.stringify(annotations)} → ${JSON.stringify(want)}`, () => {
        expect(policiesFor(annotations, defaults)).to.deep.equal(want);
      });
    }

    it('takes whatever defaults are given', () => {
      expect(policiesFor({}, { node: 'spread', gpu: 'binpack' })).to.deep.equal({
        node: 'spread',
        gpu: chain(['binpack']),
      });
    });

    // HAMi logs and ignores these, keeping its default; we refuse the pod, naming the value.
    const refused: [Record<string, string>, RegExp][] = [
      [
        { [GPU_POLICY_ANNOTATION]: 'BINPACK' },
        new RegExp(
          /^unsupported hami\.io\/gpu-scheduler-policy "BINPACK": unknown policy "BINPACK" /.source +
            /\(HAMi's policies: binpack, spread, numa, mutex, topology-aware, comma-separated\)$/.source,
        ),
      ],
      [{ [GPU_POLICY_ANNOTATION]: 'binpack,fastest' }, /unknown policy "fastest"/],
      [{ [GPU_POLICY_ANNOTATION]: 'binpack,' }, /unknown policy ""/],
      [
        { [NODE_POLICY_ANNOTATION]: 'Spread' },
        /^unsupported hami\.io\/node-scheduler-policy "Spread": expected binpack or spread$/,
      ],
      [{ [NODE_POLICY_ANNOTATION]: 'binpack,numa' }, /node-scheduler-policy "binpack,numa"/],
      [
        { [GPU_POLICY_ANNOTATION]: 'x'.repeat(100_000) },
        /^unsupported hami\.io\/gpu-scheduler-policy "x{63}…": unknown policy "x{63}…"/,
      ],
    ];
    for (const [annotations, want] of refused) {
      it(`refuses ${JSON.stringify(annotations).slice(0, 80)}`, () => {
        const result = policiesFor(annotations, defaults);
        if (!('error' in result)) expect.fail(`expected an error, got ${JSON.stringify(result)}`);
        expect(result.error).to.match(want);
      });
    }
  });

  describe('nodeUtilization', () => {
    it('is the mean of slot, core and memory utilisation summed over the GPUs', () => {
      const devices = [gpu('a'), gpu('b', { index: 1 })];
      // slots 5/20, cores 50/200, memory 5000/20000 → 0.25 each.
      expect(nodeUtilization(devices, new Map([['a', use(5, 5000, 50)]]))).to.equal(0.25);
      // slots 2/20 = 0.1, cores 0, memory 12000/20000 = 0.6 → 0.7 / 3.
      expect(
        nodeUtilization(
          devices,
          new Map([
            ['a', use(1, 10000, 0)],
            ['b', use(1, 2000, 0)],
          ]),
        ),
      ).to.be.closeTo(0.7 / 3, 1e-12);
    });

    it('is 0 for an idle node and for a node without GPUs', () => {
      expect(nodeUtilization([gpu('a')], new Map())).to.equal(0);
      expect(nodeUtilization([], new Map([['a', use(1, 1, 1)]]))).to.equal(0);
    });

    it('leaves unhealthy GPUs and unknown UUIDs out', () => {
      const devices = [gpu('a'), gpu('sick', { index: 1, healthy: false })];
      expect(
        nodeUtilization(
          devices,
          new Map([
            ['a', use(10, 10000, 100)],
            ['sick', use(10, 10000, 100)],
            ['ghost', use(9, 9, 9)],
          ]),
        ),
      ).to.equal(1);
    });

    it('counts cordoned GPUs (their pods still run)', () => {
      expect(
        nodeUtilization([gpu('a', { cordoned: true }), gpu('b', { index: 1 })], new Map([['a', use(10, 10000, 100)]])),
      ).to.equal(0.5);
    });

    it('clamps overcommitted usage to 1 and lets a zero-capacity dimension contribute 0', () => {
      expect(nodeUtilization([gpu('a')], new Map([['a', use(30, 30000, 300)]]))).to.equal(1);
      expect(nodeUtilization([gpu('a', { cores: 0 })], new Map([['a', use(10, 10000, 0)]]))).to.be.closeTo(
        2 / 3,
        1e-12,
      );
    });
  });

  describe('nodeScore', () => {
    const devices = [gpu('a'), gpu('b', { index: 1 })];
    const cases: [Map<string, GpuUse>, number, number][] = [
      [new Map<string, GpuUse>(), 0, 10],
      [new Map([['a', use(5, 5000, 50)]]), 3, 7], // 2.5 rounds up
      [new Map([['a', use(2, 2000, 20)]]), 1, 9],
      [
        new Map([
          ['a', use(10, 10000, 100)],
          ['b', use(10, 10000, 100)],
        ]),
        10,
        0,
      ],
      [
        new Map([
          ['a', use(10, 10000, 100)],
          ['b', use(4, 6000, 70)],
        ]),
        8,
        2,
      ],
    ];
    for (const [usage, binpack, spread] of cases) {
      it(`binpack ${binpack}, spread ${spread} for ${JSON.stringify([...usage])}`, () => {
        expect(nodeScore(devices, usage, 'binpack')).to.equal(binpack);
        expect(nodeScore(devices, usage, 'spread')).to.equal(spread);
      });
    }

    it('is always an integer in 0..10', () => {
      for (let used = 0; used <= 12; used++) {
        for (const policy of ['binpack', 'spread'] as const) {
          const score = nodeScore(devices, new Map([['a', use(used, used * 777, used * 9)]]), policy);
          expect(Number.isInteger(score) && score >= 0 && score <= 10, `${policy} ${used}: ${score}`).to.equal(true);
        }
      }
    });
  });

  describe('gpuScore', () => {
    it('is 10 × weighted utilisation including the incoming share', () => {
      // slots (1+1)/10 = 0.2, cores (20+30)/100 = 0.5, memory (4000+1000)/10000 = 0.5.
      expect(gpuScore(gpu('a'), use(1, 4000, 20), req({ cores: 30 }), DEFAULT_SCORING_WEIGHTS)).to.be.closeTo(12, 1e-9);
      expect(gpuScore(gpu('a'), use(1, 4000, 20), req({ cores: 30 }), { slot: 0, core: 0, memory: 2 })).to.be.closeTo(
        10,
        1e-9,
      );
      // Percentage memory counts as its share of this GPU.
      expect(
        gpuScore(gpu('a'), use(0, 0, 0), req({ memoryMiB: 0, memoryPercentage: 50 }), { slot: 0, core: 0, memory: 1 }),
      ).to.be.closeTo(5, 1e-9);
    });

    it('treats a zero-capacity dimension as 0 rather than dividing by zero', () => {
      expect(
        gpuScore(gpu('a', { count: 0, cores: 0, memoryMiB: 0 }), use(1, 1, 1), req(), DEFAULT_SCORING_WEIGHTS),
      ).to.equal(0);
    });
  });

  describe('hami.io/device-scoring-weights', () => {
    it('defaults to 1,1,1 when absent', () => {
      expect(parseScoringWeights({})).to.deep.equal({ slot: 1, core: 1, memory: 1 });
    });

    it('reads three key=int entries in any order, with spaces', () => {
      expect(parseScoringWeights({ 'hami.io/device-scoring-weights': 'slot=1,core=1,memory=3' })).to.deep.equal({
        slot: 1,
        core: 1,
        memory: 3,
      });
      expect(parseScoringWeights({ 'hami.io/device-scoring-weights': ' memory = 0 , slot=2,core=0' })).to.deep.equal({
        slot: 2,
        core: 0,
        memory: 0,
      });
    });

    for (const value of [
      '',
      'slot=1',
      'slot=1,core=1',
      'slot=1,core=1,memory=1,extra=1',
      'slot=1,core=1,mem=1',
      'slot=1,slot=1,memory=1',
      'slot=-1,core=1,memory=1',
      'slot=1.5,core=1,memory=1',
      'slot=a,core=1,memory=1',
      'slot=0,core=0,memory=0',
      'slot=1,core=1,memory',
      'slot=1=2,core=1,memory=1',
    ]) {
      it(`rejects ${JSON.stringify(value)}`, () => {
        const parsed = parseScoringWeights({ 'hami.io/device-scoring-weights': value });
        expect('error' in parsed && parsed.error)
          .to.be.a('string')
          .and.contain('hami.io/device-scoring-weights');
      });
    }
  });
});
