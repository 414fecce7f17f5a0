import { expect } from 'chai';
import type { V1Pod } from '@kubernetes/client-node';
import {
  containerGpuRequest,
  DEFAULT_REQUEST_DEFAULTS,
  hasGpuRequest,
  memoryOnGpu,
  podGpuRequests,
  type ContainerGpuRequest,
  type RequestDefaults,
} from '../../../src/devices/requests.js';
import { GPU_CORES, GPU_COUNT, GPU_MEMORY, GPU_MEMORY_PERCENTAGE } from '../../../src/hami/wire.js';

type Resources = Record<string, unknown>;

function container(limits?: Resources, requests?: Resources): unknown {
  return { name: 'c', resources: { ...(limits ? { limits } : {}), ...(requests ? { requests } : {}) } };
}

const DEFAULTS = DEFAULT_REQUEST_DEFAULTS;
const request = (overrides: Partial<ContainerGpuRequest>): ContainerGpuRequest => ({
  count: 1,
  memoryMiB: 0,
  memoryPercentage: 100,
  cores: 0,
  ...overrides,
});

describe('devices: GPU requests per container (HAMi §4.3)', () => {
  it('has the HAMi chart defaults and resource names', () => {
    expect(DEFAULT_REQUEST_DEFAULTS).to.deep.equal({ defaultMemoryMiB: 0, defaultCores: 0, memoryFactor: 1 });
    expect([GPU_COUNT, GPU_MEMORY, GPU_MEMORY_PERCENTAGE, GPU_CORES]).to.deep.equal([
      'nvidia.com/gpu',
      'nvidia.com/gpumem',
      'nvidia.com/gpumem-percentage',
      'nvidia.com/gpucores',
    ]);
  });

  const cases: {
    name: string;
    limits?: Resources;
    requests?: Resources;
    defaults?: RequestDefaults;
    want: ContainerGpuRequest | undefined;
  }[] = [
    {
      name: 'count only: whole card memory (percentage 100), default cores',
      limits: { [GPU_COUNT]: '1' },
      want: request({}),
    },
    { name: 'count from requests when limits lack it', requests: { [GPU_COUNT]: '2' }, want: request({ count: 2 }) },
    {
      name: 'limits win over requests',
      limits: { [GPU_COUNT]: '1' },
      requests: { [GPU_COUNT]: '3' },
      want: request({ count: 1 }),
    },
    { name: 'a raw JSON number count', limits: { [GPU_COUNT]: 2 }, want: request({ count: 2 }) },
    { name: 'no count: no request', limits: { [GPU_MEMORY]: '1000', [GPU_CORES]: '30' }, want: undefined },
    { name: 'count 0: no request', limits: { [GPU_COUNT]: '0', [GPU_MEMORY]: '1000' }, want: undefined },
    { name: 'fractional count: no request', limits: { [GPU_COUNT]: '1500m' }, want: undefined },
    { name: 'garbage count: no request', limits: { [GPU_COUNT]: 'two' }, want: undefined },
    {
      name: 'an invalid count in limits does not fall back to requests',
      limits: { [GPU_COUNT]: 'x' },
      requests: { [GPU_COUNT]: '1' },
      want: undefined,
    },
    {
      name: 'gpumem in MiB replaces the percentage',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY]: '3000' },
      want: request({ memoryMiB: 3000, memoryPercentage: undefined }),
    },
    {
      name: 'gpumem canonicalised by the apiserver ("3k")',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY]: '3k' },
      want: request({ memoryMiB: 3000, memoryPercentage: undefined }),
    },
    {
      name: 'gpumem from requests',
      limits: { [GPU_COUNT]: '1' },
      requests: { [GPU_MEMORY]: '2000' },
      want: request({ memoryMiB: 2000, memoryPercentage: undefined }),
    },
    {
      name: 'gpumem × memoryFactor',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY]: '3000' },
      defaults: { ...DEFAULTS, memoryFactor: 4 },
      want: request({ memoryMiB: 12000, memoryPercentage: undefined }),
    },
    {
      name: 'memoryFactor below 1 acts as 1',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY]: '3000' },
      defaults: { ...DEFAULTS, memoryFactor: 0 },
      want: request({ memoryMiB: 3000, memoryPercentage: undefined }),
    },
    {
      name: 'gpumem at int32max/factor is kept',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY]: '1073741823' },
      defaults: { ...DEFAULTS, memoryFactor: 2 },
      want: request({ memoryMiB: 2147483646, memoryPercentage: undefined }),
    },
    {
      name: 'gpumem above int32max/factor drops the whole request',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY]: '1073741824' },
      defaults: { ...DEFAULTS, memoryFactor: 2 },
      want: undefined,
    },
    {
      name: 'fractional gpumem drops the whole request',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY]: '1.5' },
      want: undefined,
    },
    {
      name: 'negative gpumem drops the whole request',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY]: '-1' },
      want: undefined,
    },
    {
      name: 'garbage gpumem drops the whole request',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY]: 'lots' },
      want: undefined,
    },
    {
      name: 'gpumem 0 counts as unset: whole card',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY]: '0' },
      want: request({}),
    },
    {
      name: 'percentage',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY_PERCENTAGE]: '50' },
      want: request({ memoryPercentage: 50 }),
    },
    {
      name: 'percentage above 100 is clamped',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY_PERCENTAGE]: '150' },
      want: request({ memoryPercentage: 100 }),
    },
    {
      name: 'percentage 101 (HAMi sentinel) is clamped to 100',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY_PERCENTAGE]: '101' },
      want: request({ memoryPercentage: 100 }),
    },
    {
      name: 'percentage 0 counts as unset (then defaultMemory)',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY_PERCENTAGE]: '0' },
      defaults: { ...DEFAULTS, defaultMemoryMiB: 1024 },
      want: request({ memoryMiB: 1024, memoryPercentage: undefined }),
    },
    {
      name: 'negative percentage counts as unset',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY_PERCENTAGE]: '-5' },
      want: request({}),
    },
    {
      name: 'unparsable percentage counts as unset',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY_PERCENTAGE]: '50.5' },
      want: request({}),
    },
    {
      name: 'gpumem and percentage: gpumem wins, as in Fit',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY]: '1000', [GPU_MEMORY_PERCENTAGE]: '50' },
      want: request({ memoryMiB: 1000, memoryPercentage: undefined }),
    },
    {
      name: 'neither: defaultMemory when non-zero',
      limits: { [GPU_COUNT]: '1' },
      defaults: { ...DEFAULTS, defaultMemoryMiB: 2048 },
      want: request({ memoryMiB: 2048, memoryPercentage: undefined }),
    },
    {
      name: 'defaultMemory is not multiplied by memoryFactor',
      limits: { [GPU_COUNT]: '1' },
      defaults: { ...DEFAULTS, defaultMemoryMiB: 2048, memoryFactor: 2 },
      want: request({ memoryMiB: 2048, memoryPercentage: undefined }),
    },
    {
      name: 'defaultMemory does not override an explicit percentage',
      limits: { [GPU_COUNT]: '1', [GPU_MEMORY_PERCENTAGE]: '25' },
      defaults: { ...DEFAULTS, defaultMemoryMiB: 2048 },
      want: request({ memoryPercentage: 25 }),
    },
    {
      name: 'cores default',
      limits: { [GPU_COUNT]: '1' },
      defaults: { ...DEFAULTS, defaultCores: 30 },
      want: request({ cores: 30 }),
    },
    {
      name: 'gpucores overrides the default',
      limits: { [GPU_COUNT]: '1', [GPU_CORES]: '20' },
      defaults: { ...DEFAULTS, defaultCores: 30 },
      want: request({ cores: 20 }),
    },
    {
      name: 'gpucores 0 overrides a non-zero default',
      limits: { [GPU_COUNT]: '1', [GPU_CORES]: '0' },
      defaults: { ...DEFAULTS, defaultCores: 30 },
      want: request({ cores: 0 }),
    },
    {
      name: 'gpucores from requests',
      limits: { [GPU_COUNT]: '1' },
      requests: { [GPU_CORES]: '40' },
      want: request({ cores: 40 }),
    },
    {
      name: 'gpucores above 100 is clamped',
      limits: { [GPU_COUNT]: '1', [GPU_CORES]: '150' },
      want: request({ cores: 100 }),
    },
    {
      name: 'negative gpucores is clamped to 0',
      limits: { [GPU_COUNT]: '1', [GPU_CORES]: '-10' },
      want: request({ cores: 0 }),
    },
    {
      name: 'garbage gpucores keeps the default',
      limits: { [GPU_COUNT]: '1', [GPU_CORES]: 'half' },
      defaults: { ...DEFAULTS, defaultCores: 10 },
      want: request({ cores: 10 }),
    },
  ];
  for (const { name, limits, requests, defaults, want } of cases) {
    it(name, () => {
      expect(containerGpuRequest(container(limits, requests), defaults ?? DEFAULTS)).to.deep.equal(want);
    });
  }

  it('gives one slot per container, init containers apart, undefined for GPU-less ones', () => {
    const pod = {
      spec: {
        initContainers: [container({ [GPU_COUNT]: '1', [GPU_MEMORY]: '500' }), { name: 'plain' }],
        containers: [
          { name: 'sidecar', resources: { limits: { cpu: '1' } } },
          container({ [GPU_COUNT]: '2', [GPU_CORES]: '30' }),
        ],
      },
    };
    expect(podGpuRequests(pod, DEFAULTS)).to.deep.equal({
      initContainers: [request({ memoryMiB: 500, memoryPercentage: undefined }), undefined],
      containers: [undefined, request({ count: 2, cores: 30 })],
    });
  });

  it('reads a client-node V1Pod by plain property access', () => {
    const pod: V1Pod = {
      metadata: { name: 'p' },
      spec: { containers: [{ name: 'c', resources: { limits: { [GPU_COUNT]: '1', [GPU_MEMORY]: '4k' } } }] },
    };
    expect(podGpuRequests(pod, DEFAULTS).containers).to.deep.equal([
      request({ memoryMiB: 4000, memoryPercentage: undefined }),
    ]);
  });

  for (const garbage of [
    undefined,
    null,
    'pod',
    42,
    [],
    {},
    { spec: null },
    { spec: { containers: 'x' } },
    { spec: { containers: [null, 1, 'c', { resources: 'x' }, { resources: { limits: [] } }] } },
  ]) {
    it(`never throws, and finds no request, for ${garbage === undefined ? 'undefined' : JSON.stringify(garbage)}`, () => {
      const requests = podGpuRequests(garbage, DEFAULTS);
      expect(hasGpuRequest(requests)).to.equal(false);
      expect(requests.initContainers).to.deep.equal([]);
      expect(requests.containers.every((entry) => entry === undefined)).to.equal(true);
    });
  }

  it('hasGpuRequest looks at init containers and app containers', () => {
    expect(hasGpuRequest({ initContainers: [], containers: [] })).to.equal(false);
    expect(hasGpuRequest({ initContainers: [undefined], containers: [undefined] })).to.equal(false);
    expect(hasGpuRequest({ initContainers: [request({})], containers: [undefined] })).to.equal(true);
    expect(hasGpuRequest({ initContainers: [], containers: [undefined, request({})] })).to.equal(true);
  });

  it('memory on a GPU: gpumem as is, else floor(card memory × percentage / 100)', () => {
    expect(memoryOnGpu(request({ memoryMiB: 3000, memoryPercentage: undefined }), 32768)).to.equal(3000);
    expect(memoryOnGpu(request({ memoryPercentage: 50 }), 32768)).to.equal(16384);
    expect(memoryOnGpu(request({ memoryPercentage: 33 }), 32768)).to.equal(10813);
    expect(memoryOnGpu(request({ memoryPercentage: 100 }), 15360)).to.equal(15360);
    expect(memoryOnGpu(request({ memoryPercentage: undefined }), 15360)).to.equal(0);
  });
});
