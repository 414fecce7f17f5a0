import { expect } from 'chai';
import { fitPod, leastQuotaUse, type FitInput, type FitResult } from '../../../src/devices/fit.js';
import { namespaceUseOf, type QuotaBudget, type QuotaLimit } from '../../../src/devices/gpu-quota.js';
import type { GpuDevice } from '../../../src/devices/inventory.js';
import type { ContainerGpuRequest, PodGpuRequests } from '../../../src/devices/requests.js';
import { podDeviceUsage } from '../../../src/devices/usage.js';

function gpu(uuid: string, overrides: Partial<GpuDevice> = {}): GpuDevice {
  return {
    uuid,
    index: 0,
    count: 10,
    memoryMiB: 32768,
    cores: 100,
    type: 'NVIDIA-Tesla V100-PCIE-32GB',
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
const app = (...containers: (ContainerGpuRequest | undefined)[]): PodGpuRequests => ({
  initContainers: [],
  containers,
});
const budget = (used: Partial<QuotaBudget['used']>, ...limits: QuotaLimit[]): QuotaBudget => ({
  namespace: 'team-a',
  used: { gpus: 0, memoryMiB: 0, cores: 0, ...used },
  limits,
});
const memLimit = (limit: number): QuotaLimit => ({ quota: 'gpu-quota', field: 'memoryMiB', limit });

function fit(overrides: Partial<FitInput> & Pick<FitInput, 'devices'>): FitResult {
  return fitPod({ usage: new Map(), requests: app(req()), podAnnotations: {}, gpuPolicy: 'spread', ...overrides });
}

describe('devices: fit under a namespace GPU quota (HAMi fitQuota, ResourceQuotaNotFit)', () => {
  it('fits within the quota, counting what the namespace already uses', () => {
    const result = fit({
      devices: [gpu('a')],
      requests: app(req({ memoryMiB: 2000 })),
      quota: budget({ memoryMiB: 6000 }, memLimit(8000)),
    });
    expect(result.fits).to.equal(true);
  });

  it('refuses a pod over the quota whatever the node, once, naming the quota', () => {
    const result = fit({
      devices: [gpu('a'), gpu('b')],
      requests: app(req({ memoryMiB: 2001 })),
      quota: budget({ memoryMiB: 6000 }, memLimit(8000)),
    });
    expect(result).to.deep.equal({
      fits: false,
      reason:
        'ResourceQuotaNotFit (ResourceQuota team-a/gpu-quota: limits.nvidia.com/gpumem 6000 used + 2001 requested > 8000)',
      reasonCounts: { ResourceQuotaNotFit: 1 },
    });
  });

  it('counts every GPU of a multi-GPU container: two 3000 MiB shares break a 5000 MiB quota', () => {
    const result = fit({
      devices: [gpu('a'), gpu('b')],
      requests: app(req({ count: 2, memoryMiB: 3000 })),
      quota: budget({}, memLimit(5000)),
    });
    expect(result.fits).to.equal(false);
    if (!result.fits) expect(result.reason).to.contain('0 used + 6000 requested > 5000');
  });

  it('checks a percentage request per GPU as HAMi does: skips a GPU whose share breaks the quota and takes a smaller one', () => {
    const big = gpu('big', { memoryMiB: 80_000, index: 0 });
    const small = gpu('small', { memoryMiB: 16_000, index: 1 });
    const requests = app(req({ memoryMiB: 0, memoryPercentage: 50 }));
    const within = fit({ devices: [big, small], requests, quota: budget({}, memLimit(10_000)) });
    expect(within.fits && within.allocation).to.deep.equal([
      [{ uuid: 'small', type: 'NVIDIA', memoryMiB: 8000, cores: 0 }],
    ]);
    const over = fit({ devices: [big, small], requests, quota: budget({}, memLimit(5000)) });
    expect(over.fits).to.equal(false);
    if (!over.fits) {
      expect(over.reasonCounts).to.deep.equal({ ResourceQuotaNotFit: 2 });
      expect(over.reason).to.match(
        new RegExp(
          /^2\/2 ResourceQuotaNotFit \(ResourceQuota team-a\/gpu-quota: /.source +
            /limits\.nvidia\.com\/gpumem 0 used \+ \d+ requested > 5000\)$/.source,
        ),
      );
    }
  });

  it("counts the pod's earlier containers: the second container breaks the quota", () => {
    const result = fit({
      devices: [gpu('a'), gpu('b')],
      requests: app(req({ memoryMiB: 0, memoryPercentage: 25 }), req({ memoryMiB: 0, memoryPercentage: 25 })),
      quota: budget({}, memLimit(10_000)),
    });
    expect(result.fits).to.equal(false);
    if (!result.fits)
      expect(result.reason).to.contain(
        'ResourceQuotaNotFit (ResourceQuota team-a/gpu-quota: limits.nvidia.com/gpumem 0 used + 16384 requested > 10000)',
      );
  });

  it('counts init containers the way usage does: the larger of the biggest init container and the app containers', () => {
    const requests: PodGpuRequests = {
      initContainers: [req({ memoryMiB: 4000 })],
      containers: [req({ memoryMiB: 3000 })],
    };
    expect(leastQuotaUse(requests)).to.deep.equal({ gpus: 1, memoryMiB: 4000, cores: 0 });
    expect(fit({ devices: [gpu('a')], requests, quota: budget({}, memLimit(4000)) }).fits).to.equal(true);
    expect(fit({ devices: [gpu('a')], requests, quota: budget({}, memLimit(3999)) }).fits).to.equal(false);
  });

  it('checks the set numa-bind chooses, all of its GPUs counted', () => {
    const devices = [gpu('a', { numa: 0 }), gpu('b', { numa: 0 }), gpu('c', { numa: 1 })];
    const requests = app(req({ count: 2, memoryMiB: 0, memoryPercentage: 10 }));
    const result = fit({
      devices,
      requests,
      podAnnotations: { 'nvidia.com/numa-bind': 'true' },
      quota: budget({}, memLimit(6000)),
    });
    expect(result.fits).to.equal(false);
    if (!result.fits)
      expect(result.reason).to.equal(
        '2/3 ResourceQuotaNotFit (ResourceQuota team-a/gpu-quota: limits.nvidia.com/gpumem 0 used + 6552 requested > 6000)',
      );
    expect(
      fit({ devices, requests, podAnnotations: { 'nvidia.com/numa-bind': 'true' }, quota: budget({}, memLimit(7000)) })
        .fits,
    ).to.equal(true);
  });

  it('limits GPU shares with limits.nvidia.com/gpu and cores with limits.nvidia.com/gpucores', () => {
    const gpus = budget({ gpus: 1 }, { quota: 'count', field: 'gpus', limit: 2 });
    expect(fit({ devices: [gpu('a'), gpu('b')], requests: app(req()), quota: gpus }).fits).to.equal(true);
    const two = fit({ devices: [gpu('a'), gpu('b')], requests: app(req({ count: 2 })), quota: gpus });
    expect(!two.fits && two.reason).to.equal(
      'ResourceQuotaNotFit (ResourceQuota team-a/count: limits.nvidia.com/gpu 1 used + 2 requested > 2)',
    );
    const cores = fit({
      devices: [gpu('a')],
      requests: app(req({ cores: 60 })),
      quota: budget({ cores: 50 }, { quota: 'c', field: 'cores', limit: 100 }),
    });
    expect(!cores.fits && cores.reason).to.contain('limits.nvidia.com/gpucores 50 used + 60 requested > 100');
  });

  it('for app containers with fixed shares, what any placement adds is exactly the pre-checked use (so no GPU is checked)', () => {
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let round = 0; round < 200; round++) {
      const containers = Array.from({ length: 1 + random(3) }, () =>
        random(4) === 0 ? undefined : req({ count: 1 + random(2), memoryMiB: 1 + random(8000), cores: random(50) }),
      );
      const requests = app(...containers);
      const result = fit({
        devices: [gpu('a'), gpu('b'), gpu('c')],
        requests,
        gpuPolicy: random(2) === 0 ? 'binpack' : 'spread',
      });
      if (!result.fits) continue;
      expect(namespaceUseOf(podDeviceUsage(result.allocation, 0)), JSON.stringify(requests)).to.deep.equal(
        leastQuotaUse(requests),
      );
    }
  });

  it('without a quota nothing changes: the same pod fits', () => {
    expect(fit({ devices: [gpu('a')], requests: app(req({ memoryMiB: 30_000 })) }).fits).to.equal(true);
  });
});
