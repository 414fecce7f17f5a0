import { expect } from 'chai';
import type { AllocatedDevice } from '../../../src/devices/allocation-codec.js';
import { fitPod, formatReasons, type FitInput, type FitResult, type GpuPolicy } from '../../../src/devices/fit.js';
import type { GpuDevice } from '../../../src/devices/inventory.js';
import type { ContainerGpuRequest, PodGpuRequests } from '../../../src/devices/requests.js';
import { addUsage, copyUsage, podDeviceUsage, type GpuUse } from '../../../src/devices/usage.js';

const V100 = 'NVIDIA-Tesla V100-PCIE-32GB';
const T4 = 'NVIDIA-Tesla T4';

function gpu(uuid: string, overrides: Partial<GpuDevice> = {}): GpuDevice {
  return {
    uuid,
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
const req = (overrides: Partial<ContainerGpuRequest> = {}): ContainerGpuRequest => ({
  count: 1,
  memoryMiB: 1000,
  memoryPercentage: undefined,
  cores: 0,
  ...overrides,
});
const use = (slots: number, memoryMiB: number, cores: number): GpuUse => ({ slots, memoryMiB, cores });
const nvidia = (uuid: string, memoryMiB: number, cores: number): AllocatedDevice => ({
  uuid,
  type: 'NVIDIA',
  memoryMiB,
  cores,
});
const app = (...containers: (ContainerGpuRequest | undefined)[]): PodGpuRequests => ({
  initContainers: [],
  containers,
});

function fit(overrides: Partial<FitInput> & Pick<FitInput, 'devices'>): FitResult {
  return fitPod({ usage: new Map(), requests: app(req()), podAnnotations: {}, gpuPolicy: 'spread', ...overrides });
}

function expectFits(result: FitResult): Extract<FitResult, { fits: true }> {
  if (!result.fits) expect.fail(`expected a fit, got: ${result.reason}`);
  return result;
}

function expectFails(result: FitResult, reason: string): Extract<FitResult, { fits: false }> {
  if (result.fits) expect.fail(`expected "${reason}", got a fit: ${JSON.stringify(result.allocation)}`);
  expect(result.reason).to.equal(reason);
  return result;
}

const chosen = (result: FitResult): string[][] =>
  expectFits(result).allocation.map((container) => container.map((device) => device.uuid));

describe('devices: fit (HAMi §3.3 step 6, §4.4, hami-core)', () => {
  describe('placement', () => {
    it('takes one GPU for a one-GPU request and adds its share to usageAfter', () => {
      const usage = new Map([['a', use(1, 2000, 10)]]);
      const result = expectFits(
        fit({ devices: [gpu('a')], usage, requests: app(req({ memoryMiB: 3000, cores: 30 })) }),
      );
      expect(result.allocation).to.deep.equal([[nvidia('a', 3000, 30)]]);
      expect([...result.usageAfter]).to.deep.equal([['a', use(2, 5000, 40)]]);
    });

    it('writes one entry per container, init containers first, [] for GPU-less ones', () => {
      const requests: PodGpuRequests = {
        initContainers: [undefined, req({ memoryMiB: 500 })],
        containers: [undefined, req({ memoryMiB: 700 })],
      };
      expect(expectFits(fit({ devices: [gpu('a')], requests })).allocation).to.deep.equal([
        [],
        [nvidia('a', 500, 0)],
        [],
        [nvidia('a', 700, 0)],
      ]);
    });

    it('fits a pod with no GPU request trivially, usage unchanged', () => {
      const usage = new Map([['a', use(1, 1, 1)]]);
      const result = expectFits(
        fit({ devices: [], usage, requests: { initContainers: [undefined], containers: [undefined] } }),
      );
      expect(result.allocation).to.deep.equal([[], []]);
      expect([...result.usageAfter]).to.deep.equal([['a', use(1, 1, 1)]]);
    });

    it('takes N distinct GPUs for a count-N request, even when one GPU has room for all N shares', () => {
      const result = fit({
        devices: [gpu('a', { index: 0 }), gpu('b', { index: 1 }), gpu('c', { index: 2 })],
        requests: app(req({ count: 2 })),
        usage: new Map([['c', use(5, 30000, 0)]]),
      });
      expect(chosen(result)).to.deep.equal([['a', 'b']]);
    });

    it('fails a count-2 request on a node where only one GPU has room', () => {
      const result = fit({
        devices: [gpu('a', { index: 0 }), gpu('b', { index: 1 })],
        requests: app(req({ count: 2, memoryMiB: 20000 })),
        usage: new Map([['b', use(1, 20000, 0)]]),
      });
      expectFails(result, '1/2 AllocatedCardsInsufficientRequest, 1/2 CardInsufficientMemory');
    });

    it('takes percentage memory as floor(card memory × pct / 100) on each chosen GPU', () => {
      const devices = [gpu('big', { index: 0, memoryMiB: 32768 }), gpu('small', { index: 1, memoryMiB: 15109 })];
      const result = expectFits(
        fit({ devices, requests: app(req({ count: 2, memoryMiB: 0, memoryPercentage: 33, cores: 5 })) }),
      );
      expect(result.allocation[0]).to.have.deep.members([nvidia('big', 10813, 5), nvidia('small', 4985, 5)]);
    });

    it('accumulates app containers: the second one lands elsewhere when the first filled a GPU', () => {
      const devices = [gpu('a', { index: 0, memoryMiB: 10000 }), gpu('b', { index: 1, memoryMiB: 10000 })];
      const result = fit({
        devices,
        requests: app(req({ memoryMiB: 6000 }), req({ memoryMiB: 6000 })),
        gpuPolicy: 'binpack',
      });
      expect(chosen(result)).to.deep.equal([['a'], ['b']]);
    });

    it('fails the second app container when the first took the only room', () => {
      const result = fit({
        devices: [gpu('a', { memoryMiB: 10000 })],
        requests: app(req({ memoryMiB: 6000 }), req({ memoryMiB: 6000 })),
      });
      expectFails(result, '1/1 CardInsufficientMemory');
    });

    it('fits init containers each against the node as it is (they run one after another), usageAfter takes the peak', () => {
      const requests: PodGpuRequests = {
        initContainers: [req({ memoryMiB: 8000 }), req({ memoryMiB: 9000, cores: 20 })],
        containers: [req({ memoryMiB: 8000, cores: 10 })],
      };
      const usage = new Map([['a', use(1, 1000, 0)]]);
      const result = expectFits(fit({ devices: [gpu('a', { memoryMiB: 10000 })], requests, usage }));
      expect(result.allocation).to.deep.equal([
        [nvidia('a', 8000, 0)],
        [nvidia('a', 9000, 20)],
        [nvidia('a', 8000, 10)],
      ]);
      expect([...result.usageAfter]).to.deep.equal([['a', use(2, 10000, 20)]]);
    });

    it("reports the failing init container's reasons", () => {
      const requests: PodGpuRequests = {
        initContainers: [req({ memoryMiB: 11000 })],
        containers: [req({ memoryMiB: 100 })],
      };
      expectFails(fit({ devices: [gpu('a', { memoryMiB: 10000 })], requests }), '1/1 CardInsufficientMemory');
    });

    it("usageAfter = usage + the collapsed pod usage, and the caller's usage is untouched", () => {
      const usage = new Map([
        ['a', use(2, 3000, 20)],
        ['gone', use(1, 1, 1)],
      ]);
      const before = JSON.stringify([...usage]);
      const requests: PodGpuRequests = {
        initContainers: [req({ memoryMiB: 5000, count: 2 })],
        containers: [req({ memoryMiB: 1000 }), req({ memoryMiB: 2000, cores: 10 })],
      };
      const result = expectFits(fit({ devices: [gpu('a', { index: 0 }), gpu('b', { index: 1 })], usage, requests }));
      const expected = copyUsage(usage);
      addUsage(expected, podDeviceUsage(result.allocation, 1));
      expect([...result.usageAfter].sort()).to.deep.equal([...expected].sort());
      expect(JSON.stringify([...usage])).to.equal(before);
    });

    it("only considers GPUs whose model contains NVIDIA (case-insensitive), like HAMi's type match", () => {
      const devices = [gpu('amd', { type: 'AMD-MI300', index: 0 }), gpu('lower', { type: 'nvidia-a10', index: 1 })];
      expect(chosen(fit({ devices }))).to.deep.equal([['lower']]);
      expectFails(fit({ devices, requests: app(req({ count: 2 })) }), 'NodeInsufficientDevice');
    });
  });

  describe('reasons (each GPU counted once, under its first failing check)', () => {
    const cases: {
      name: string;
      device: GpuDevice;
      usage?: GpuUse;
      request?: ContainerGpuRequest;
      annotations?: Record<string, string>;
      reason: string;
    }[] = [
      { name: 'CardNotHealth', device: gpu('a', { healthy: false }), reason: '1/1 CardNotHealth' },
      {
        name: 'CardNotHealth before CardCordoned',
        device: gpu('a', { healthy: false, cordoned: true }),
        reason: '1/1 CardNotHealth',
      },
      { name: 'CardCordoned', device: gpu('a', { cordoned: true }), reason: '1/1 CardCordoned' },
      {
        name: 'CardCordoned before CardInsufficientMemory',
        device: gpu('a', { cordoned: true, memoryMiB: 10 }),
        reason: '1/1 CardCordoned',
      },
      {
        name: 'CardTypeMismatch: use-gputype not matching',
        device: gpu('a'),
        annotations: { 'nvidia.com/use-gputype': 'A100,H100' },
        reason: '1/1 CardTypeMismatch',
      },
      {
        name: 'CardTypeMismatch: nouse-gputype, case-insensitive substring',
        device: gpu('a'),
        annotations: { 'nvidia.com/nouse-gputype': 'v100' },
        reason: '1/1 CardTypeMismatch',
      },
      {
        name: 'CardTypeMismatch: vgpu-mode not containing the GPU mode',
        device: gpu('a'),
        annotations: { 'nvidia.com/vgpu-mode': 'mps' },
        reason: '1/1 CardTypeMismatch',
      },
      {
        name: 'CardMigModeUnsupported: MIG-mode GPUs are named, never placed on',
        device: gpu('a', { mode: 'mig' }),
        reason: '1/1 CardMigModeUnsupported',
      },
      {
        name: 'CardUuidMismatch before CardMigModeUnsupported',
        device: gpu('a', { mode: 'mig' }),
        annotations: { 'nvidia.com/use-gpuuuid': 'b' },
        reason: '1/1 CardUuidMismatch',
      },
      {
        name: 'CardTypeMismatch before CardUuidMismatch',
        device: gpu('a'),
        annotations: { 'nvidia.com/use-gputype': 'A100', 'nvidia.com/use-gpuuuid': 'b' },
        reason: '1/1 CardTypeMismatch',
      },
      {
        name: 'CardUuidMismatch: use-gpuuuid names another GPU',
        device: gpu('a'),
        annotations: { 'nvidia.com/use-gpuuuid': 'b,c' },
        reason: '1/1 CardUuidMismatch',
      },
      {
        name: 'CardUuidMismatch: nouse-gpuuuid names it (trimmed)',
        device: gpu('a'),
        annotations: { 'nvidia.com/nouse-gpuuuid': 'x, a ' },
        reason: '1/1 CardUuidMismatch',
      },
      {
        name: 'CardUuidMismatch: exact match only, no substring',
        device: gpu('GPU-abc'),
        annotations: { 'nvidia.com/use-gpuuuid': 'GPU-ab' },
        reason: '1/1 CardUuidMismatch',
      },
      {
        name: 'CardTimeSlicingExhausted',
        device: gpu('a', { count: 2 }),
        usage: use(2, 0, 0),
        reason: '1/1 CardTimeSlicingExhausted',
      },
      {
        name: 'CardTimeSlicingExhausted before CardInsufficientMemory',
        device: gpu('a', { count: 2 }),
        usage: use(2, 32768, 0),
        reason: '1/1 CardTimeSlicingExhausted',
      },
      {
        name: 'CardInsufficientMemory',
        device: gpu('a', { memoryMiB: 4000 }),
        usage: use(1, 3500, 0),
        request: req({ memoryMiB: 501 }),
        reason: '1/1 CardInsufficientMemory',
      },
      {
        name: 'CardInsufficientMemory (percentage of a partly used GPU)',
        device: gpu('a', { memoryMiB: 4000 }),
        usage: use(1, 1, 0),
        request: req({ memoryMiB: 0, memoryPercentage: 100 }),
        reason: '1/1 CardInsufficientMemory',
      },
      {
        name: 'CardInsufficientCore',
        device: gpu('a'),
        usage: use(1, 0, 80),
        request: req({ cores: 21 }),
        reason: '1/1 CardInsufficientCore',
      },
      {
        name: 'ExclusiveDeviceAllocateConflict: cores=100 on a GPU already shared',
        device: gpu('a'),
        usage: use(1, 100, 0),
        request: req({ cores: 100 }),
        reason: '1/1 ExclusiveDeviceAllocateConflict',
      },
      {
        name: 'CardComputeUnitsExhausted: cores=0 on a GPU whose cores are all promised',
        device: gpu('a'),
        usage: use(1, 100, 100),
        request: req({ cores: 0 }),
        reason: '1/1 CardComputeUnitsExhausted',
      },
    ];
    for (const { name, device, usage, request, annotations, reason } of cases) {
      it(name, () => {
        const result = expectFails(
          fit({
            devices: [device],
            usage: new Map(usage ? [[device.uuid, usage]] : []),
            requests: app(request ?? req()),
            podAnnotations: annotations ?? {},
          }),
          reason,
        );
        expect(Object.values(result.reasonCounts).reduce((sum, count) => sum + count, 0)).to.equal(1);
      });
    }

    it('NodeInsufficientDevice when the request names more GPUs than the node has', () => {
      const result = expectFails(
        fit({ devices: [gpu('a'), gpu('b', { index: 1 })], requests: app(req({ count: 3 })) }),
        'NodeInsufficientDevice',
      );
      expect(result.reasonCounts).to.deep.equal({ NodeInsufficientDevice: 1 });
    });

    it('AllocatedCardsInsufficientRequest counts the GPUs taken before running out', () => {
      const devices = [gpu('a', { index: 0 }), gpu('b', { index: 1 }), gpu('c', { index: 2, healthy: false })];
      const result = expectFails(
        fit({ devices, requests: app(req({ count: 3 })) }),
        '2/3 AllocatedCardsInsufficientRequest, 1/3 CardNotHealth',
      );
      expect(result.reasonCounts).to.deep.equal({ AllocatedCardsInsufficientRequest: 2, CardNotHealth: 1 });
    });

    it('words the spec example: 1/4 CardInsufficientMemory, 3/4 CardUuidMismatch', () => {
      const devices = ['a', 'b', 'c', 'd'].map((uuid, index) => gpu(uuid, { index }));
      const result = expectFails(
        fit({ devices, usage: new Map([['a', use(1, 32000, 0)]]), podAnnotations: { 'nvidia.com/use-gpuuuid': 'a' } }),
        '1/4 CardInsufficientMemory, 3/4 CardUuidMismatch',
      );
      expect(result.reasonCounts).to.deep.equal({ CardInsufficientMemory: 1, CardUuidMismatch: 3 });
    });

    it('cores=100 on a GPU with 200 cores (core scaling 2) is not an exclusive request, as in HAMi', () => {
      expect(
        chosen(
          fit({
            devices: [gpu('a', { cores: 200 })],
            usage: new Map([['a', use(1, 0, 50)]]),
            requests: app(req({ cores: 100 })),
          }),
        ),
      ).to.deep.equal([['a']]);
    });

    it('cores=100 on an idle GPU is fine, and then blocks every further share', () => {
      const first = expectFits(fit({ devices: [gpu('a')], requests: app(req({ cores: 100 })) }));
      expectFails(
        fit({ devices: [gpu('a')], usage: first.usageAfter, requests: app(req({ cores: 0 })) }),
        '1/1 CardComputeUnitsExhausted',
      );
      expectFails(
        fit({ devices: [gpu('a')], usage: first.usageAfter, requests: app(req({ cores: 100 })) }),
        '1/1 CardInsufficientCore',
      );
    });

    it('sorts reasons by name and formats them as HAMi does', () => {
      expect(formatReasons({ CardUuidMismatch: 3, CardInsufficientMemory: 10 }, 13)).to.equal(
        '10/13 CardInsufficientMemory, 3/13 CardUuidMismatch',
      );
    });
  });

  describe('use/nouse annotations', () => {
    const devices = [
      gpu('GPU-a', { index: 0, type: V100 }),
      gpu('GPU-b', { index: 1, type: T4 }),
      gpu('GPU-c', { index: 2, type: T4 }),
    ];

    const cases: { annotations: Record<string, string>; want: string }[] = [
      { annotations: { 'nvidia.com/use-gpuuuid': 'GPU-c' }, want: 'GPU-c' },
      { annotations: { 'nvidia.com/use-gpuuuid': ' GPU-b , GPU-c' }, want: 'GPU-b' },
      { annotations: { 'nvidia.com/nouse-gpuuuid': 'GPU-a,GPU-b' }, want: 'GPU-c' },
      // Both lists apply (HAMi ≥ v2.9).
      { annotations: { 'nvidia.com/use-gpuuuid': 'GPU-a,GPU-c', 'nvidia.com/nouse-gpuuuid': 'GPU-a' }, want: 'GPU-c' },
      { annotations: { 'nvidia.com/use-gputype': 't4' }, want: 'GPU-b' },
      { annotations: { 'nvidia.com/use-gputype': 'A100, Tesla V100' }, want: 'GPU-a' },
      { annotations: { 'nvidia.com/nouse-gputype': 'V100' }, want: 'GPU-b' },
      { annotations: { 'nvidia.com/use-gputype': 'tesla', 'nvidia.com/nouse-gputype': 'T4' }, want: 'GPU-a' },
      { annotations: { 'nvidia.com/use-gputype': 'T4', 'nvidia.com/nouse-gpuuuid': 'GPU-b' }, want: 'GPU-c' },
      // A blank list is no constraint (HAMi would match every model with the blank entry).
      { annotations: { 'nvidia.com/nouse-gputype': '', 'nvidia.com/use-gpuuuid': ' , ' }, want: 'GPU-a' },
      { annotations: { 'nvidia.com/vgpu-mode': 'hami-core,mps' }, want: 'GPU-a' },
    ];
    for (const { annotations, want } of cases) {
      it(`${JSON.stringify(annotations)} → ${want}`, () => {
        expect(chosen(fit({ devices, podAnnotations: annotations }))).to.deep.equal([[want]]);
      });
    }

    it('fails with the counts when nothing is allowed', () => {
      expectFails(
        fit({ devices, podAnnotations: { 'nvidia.com/use-gputype': 'T4', 'nvidia.com/use-gpuuuid': 'GPU-a' } }),
        '1/3 CardTypeMismatch, 2/3 CardUuidMismatch',
      );
    });
  });

  describe('GPU policy order (score counts the incoming share; ties by index)', () => {
    const policies: GpuPolicy[] = ['binpack', 'spread'];

    it('binpack tries the most-used GPU first, spread the least-used', () => {
      const devices = [gpu('idle', { index: 0 }), gpu('busy', { index: 1 }), gpu('half', { index: 2 })];
      const usage = new Map([
        ['busy', use(3, 20000, 60)],
        ['half', use(1, 10000, 30)],
      ]);
      expect(chosen(fit({ devices, usage, gpuPolicy: 'binpack' }))).to.deep.equal([['busy']]);
      expect(chosen(fit({ devices, usage, gpuPolicy: 'spread' }))).to.deep.equal([['idle']]);
      expect(chosen(fit({ devices, usage, gpuPolicy: 'binpack', requests: app(req({ count: 2 })) }))).to.deep.equal([
        ['busy', 'half'],
      ]);
      expect(chosen(fit({ devices, usage, gpuPolicy: 'spread', requests: app(req({ count: 2 })) }))).to.deep.equal([
        ['idle', 'half'],
      ]);
    });

    for (const policy of policies) {
      it(`${policy}: ties go to the lowest index, whatever the inventory order`, () => {
        const devices = [gpu('c', { index: 2 }), gpu('a', { index: 0 }), gpu('b', { index: 1 })];
        expect(chosen(fit({ devices, gpuPolicy: policy }))).to.deep.equal([['a']]);
        expect(chosen(fit({ devices, gpuPolicy: policy, requests: app(req({ count: 2 })) }))).to.deep.equal([
          ['a', 'b'],
        ]);
        expect(
          chosen(fit({ devices: [...devices].reverse(), gpuPolicy: policy, requests: app(req({ count: 3 })) })),
        ).to.deep.equal([['a', 'b', 'c']]);
      });

      it(`${policy}: same index (malformed inventory) falls back to the UUID`, () => {
        expect(chosen(fit({ devices: [gpu('y'), gpu('x')], gpuPolicy: policy }))).to.deep.equal([['x']]);
      });

      it(`${policy}: a GPU that fails its checks is skipped, the next in order is taken`, () => {
        const devices = [gpu('a', { index: 0, memoryMiB: 500 }), gpu('b', { index: 1 })];
        expect(chosen(fit({ devices, gpuPolicy: policy }))).to.deep.equal([['b']]);
      });
    }

    it("counts the incoming share: binpack prefers the GPU it fills most, where HAMi's score would tie and pick index 0", () => {
      // Both idle. Without the request in the score both are 0 and index 0 (big) wins.
      const devices = [gpu('big', { index: 0, memoryMiB: 32768 }), gpu('small', { index: 1, memoryMiB: 8192 })];
      expect(chosen(fit({ devices, gpuPolicy: 'binpack', requests: app(req({ memoryMiB: 4096 })) }))).to.deep.equal([
        ['small'],
      ]);
    });

    it('counts the incoming share: spread prefers the GPU it fills least', () => {
      const devices = [gpu('small', { index: 0, memoryMiB: 8192 }), gpu('big', { index: 1, memoryMiB: 32768 })];
      expect(chosen(fit({ devices, gpuPolicy: 'spread', requests: app(req({ memoryMiB: 4096 })) }))).to.deep.equal([
        ['big'],
      ]);
    });

    it('honours hami.io/device-scoring-weights', () => {
      // slots-heavy: 5/10 slots used, little memory; memory-heavy: 1/10 slots, 75 % memory.
      const devices = [gpu('slots', { index: 0 }), gpu('memory', { index: 1 })];
      const usage = new Map([
        ['slots', use(5, 1000, 0)],
        ['memory', use(1, 24576, 0)],
      ]);
      const weighted = (weights: string): string[][] =>
        chosen(
          fit({ devices, usage, gpuPolicy: 'binpack', podAnnotations: { 'hami.io/device-scoring-weights': weights } }),
        );
      expect(weighted('slot=1,core=0,memory=0')).to.deep.equal([['slots']]);
      expect(weighted('slot=0,core=0,memory=1')).to.deep.equal([['memory']]);
      expect(weighted('slot=1,core=1,memory=3')).to.deep.equal([['memory']]);
      expect(weighted('memory=0, slot=5, core=0')).to.deep.equal([['slots']]);
    });

    it('fails the pod on invalid hami.io/device-scoring-weights, as HAMi fails the Filter', () => {
      const result = fit({ devices: [gpu('a')], podAnnotations: { 'hami.io/device-scoring-weights': 'slot=1' } });
      if (result.fits) expect.fail('expected a failure');
      expect(result.reason).to.contain('hami.io/device-scoring-weights');
      expect(result.reasonCounts).to.deep.equal({ InvalidDeviceScoringWeights: 1 });
    });
  });
});
