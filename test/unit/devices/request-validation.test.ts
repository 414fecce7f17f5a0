import { expect } from 'chai';
import { readQuantity } from '../../../src/devices/quantity.js';
import {
  containerGpuRequest,
  DEFAULT_REQUEST_DEFAULTS,
  describeProblems,
  gpuRequestBounds,
  gpuRequestProblems,
  podGpuRequests,
  type RequestDefaults,
} from '../../../src/devices/requests.js';
import { Prng } from '../../chaos/prng.js';
import { GPU_CORES, GPU_COUNT, GPU_MEMORY, GPU_MEMORY_PERCENTAGE } from '../../../src/hami/wire.js';

type Resources = Record<string, unknown>;
const pod = (containers: unknown[], initContainers: unknown[] = []) => ({
  metadata: { name: 'p' },
  spec: { containers, initContainers },
});
const ctr = (name: unknown, limits?: Resources, requests?: Resources) => ({
  name,
  resources: { ...(limits ? { limits } : {}), ...(requests ? { requests } : {}) },
});

describe('devices: the one validation of GPU requests (webhook, filter and bind)', () => {
  const refused: [Resources, string][] = [
    // What kube-apiserver itself refuses to decode or calls "must be an integer".
    [
      { [GPU_COUNT]: 'abc' },
      'invalid nvidia.com/gpu value "abc" in container main: not a Kubernetes quantity; must be an integer between 0 and 2147483647',
    ],
    [
      { [GPU_COUNT]: '1', [GPU_MEMORY]: '1.5' },
      'invalid nvidia.com/gpumem value "1.5" in container main: not a whole number; must be an integer between 0 and 2147483647',
    ],
    [
      { [GPU_COUNT]: '1500m' },
      'invalid nvidia.com/gpu value "1500m" in container main: not a whole number; must be an integer between 0 and 2147483647',
    ],
    // What the apiserver admits (it refuses negatives only for native resources) and no card holds.
    [
      { [GPU_COUNT]: '1', [GPU_MEMORY]: '-1' },
      'invalid nvidia.com/gpumem value "-1" in container main: must be an integer between 0 and 2147483647',
    ],
    [
      { [GPU_COUNT]: '1', [GPU_MEMORY]: '3Gi' },
      'invalid nvidia.com/gpumem value "3Gi" in container main: must be an integer between 0 and 2147483647',
    ],
    [
      { [GPU_COUNT]: '1', [GPU_MEMORY]: '1e999999999' },
      'invalid nvidia.com/gpumem value "1e999999999" in container main: must be an integer between 0 and 2147483647',
    ],
    [
      { [GPU_COUNT]: '2147483648' },
      'invalid nvidia.com/gpu value "2147483648" in container main: must be an integer between 0 and 2147483647',
    ],
    [
      { [GPU_COUNT]: '-1' },
      'invalid nvidia.com/gpu value "-1" in container main: must be an integer between 0 and 2147483647',
    ],
    [
      { [GPU_COUNT]: '1', [GPU_MEMORY_PERCENTAGE]: '101' },
      'invalid nvidia.com/gpumem-percentage value "101" in container main: must be an integer between 0 and 100',
    ],
    [
      { [GPU_COUNT]: '1', [GPU_CORES]: '150' },
      'invalid nvidia.com/gpucores value "150" in container main: must be an integer between 0 and 100',
    ],
    [
      { [GPU_COUNT]: '1', [GPU_CORES]: '-10' },
      'invalid nvidia.com/gpucores value "-10" in container main: must be an integer between 0 and 100',
    ],
    [
      { [GPU_COUNT]: 1.5 },
      'invalid nvidia.com/gpu value 1.5 in container main: not a whole number; must be an integer between 0 and 2147483647',
    ],
    [
      { [GPU_COUNT]: true },
      'invalid nvidia.com/gpu value true in container main: not a Kubernetes quantity; must be an integer between 0 and 2147483647',
    ],
    [
      { [GPU_COUNT]: ['1'] },
      'invalid nvidia.com/gpu value a list in container main: not a Kubernetes quantity; must be an integer between 0 and 2147483647',
    ],
  ];
  for (const [limits, message] of refused) {
    it(`refuses ${JSON.stringify(limits)}, naming the container and resource`, () => {
      expect(gpuRequestProblems(pod([ctr('main', limits)]))).to.deep.equal([message]);
    });
  }

  const readable: Resources[] = [
    { [GPU_COUNT]: '1' },
    { [GPU_COUNT]: '0', [GPU_MEMORY]: '1000' },
    { [GPU_COUNT]: '2', [GPU_MEMORY]: '3k' },
    { [GPU_COUNT]: '1', [GPU_MEMORY]: '1Ki' },
    { [GPU_COUNT]: '1', [GPU_MEMORY]: '2147483647' },
    { [GPU_COUNT]: '1', [GPU_MEMORY_PERCENTAGE]: '0' },
    { [GPU_COUNT]: '1', [GPU_MEMORY_PERCENTAGE]: '100', [GPU_CORES]: '100' },
    { [GPU_COUNT]: 2, [GPU_CORES]: 0 },
    { [GPU_COUNT]: '1', [GPU_MEMORY]: null },
    { cpu: 'lots', memory: '-1' },
  ];
  for (const limits of readable) {
    it(`reads ${JSON.stringify(limits)}`, () => {
      expect(gpuRequestProblems(pod([ctr('main', limits)]))).to.deep.equal([]);
    });
  }

  it('bounds gpumem by int32 divided by memoryFactor, the most HAMi multiplies without dropping it', () => {
    const defaults: RequestDefaults = { ...DEFAULT_REQUEST_DEFAULTS, memoryFactor: 2 };
    expect(gpuRequestBounds(defaults)[GPU_MEMORY]).to.deep.equal({ min: 0, max: 1073741823 });
    expect(
      gpuRequestProblems(pod([ctr('main', { [GPU_COUNT]: '1', [GPU_MEMORY]: '1073741823' })]), defaults),
    ).to.deep.equal([]);
    expect(
      gpuRequestProblems(pod([ctr('main', { [GPU_COUNT]: '1', [GPU_MEMORY]: '1073741824' })]), defaults),
    ).to.deep.equal([
      'invalid nvidia.com/gpumem value "1073741824" in container main: must be an integer between 0 and 1073741823',
    ]);
  });

  it('checks limits and requests, init containers first, and says which', () => {
    const problems = gpuRequestProblems(
      pod(
        [ctr('app', { [GPU_COUNT]: '1' }, { [GPU_COUNT]: '1', [GPU_CORES]: '101' })],
        [ctr('prep', { [GPU_MEMORY]: 'x' }), ctr(undefined, { [GPU_COUNT]: '-2' })],
      ),
    );
    expect(problems).to.deep.equal([
      'invalid nvidia.com/gpumem value "x" in init container prep: not a Kubernetes quantity; must be an integer between 0 and 2147483647',
      'invalid nvidia.com/gpu value "-2" in init container #1: must be an integer between 0 and 2147483647',
      'invalid nvidia.com/gpucores value "101" in container app (requests): must be an integer between 0 and 100',
    ]);
    expect(describeProblems(problems)).to.equal(`${problems[0] ?? ''} (and 2 more)`);
    expect(describeProblems(problems.slice(0, 1))).to.equal(problems[0]);
  });

  it('reports a value once when requests repeat the limits (kube-apiserver copies limits into requests)', () => {
    expect(
      gpuRequestProblems(
        pod([ctr('main', { [GPU_COUNT]: '1', [GPU_CORES]: '101' }, { [GPU_COUNT]: '1', [GPU_CORES]: '101' })]),
      ),
    ).to.deep.equal([
      'invalid nvidia.com/gpucores value "101" in container main: must be an integer between 0 and 100',
    ]);
    expect(
      gpuRequestProblems(
        pod([ctr('main', { [GPU_COUNT]: '1', [GPU_CORES]: '101' }, { [GPU_COUNT]: '1', [GPU_CORES]: '102' })]),
      ),
    ).to.have.length(2);
  });

  it('clips what the pod author wrote: an 8 MiB container name or value never reaches a message', () => {
    const huge = 'x'.repeat(8 * 1024 * 1024);
    const [problem = ''] = gpuRequestProblems(pod([ctr(huge, { [GPU_COUNT]: huge })]));
    expect(problem).to.have.length.below(300);
    expect(problem)
      .to.include(`container ${'x'.repeat(63)}…:`)
      .and.include(`"${'x'.repeat(63)}…"`);
  });

  it('never throws on garbage pods', () => {
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
      expect(gpuRequestProblems(garbage)).to.deep.equal([]);
    }
  });

  /**
   * Property: whatever is written, a pod the validation passes is read exactly as written (the
   * count, the MiB times the factor, the percentage, the cores); a request is never silently
   * dropped or clamped. And a value it refuses is one kube-apiserver refuses or one out of bounds.
   */
  it('property: a pod it passes is read exactly as written, never dropped (2000 random pods)', () => {
    const values = [
      '0',
      '1',
      '2',
      '7',
      '100',
      '101',
      '-1',
      '1.5',
      '500m',
      '3k',
      '1Ki',
      '2Gi',
      '2147483647',
      '2147483648',
      'abc',
      '',
      '1e3',
      '1e-3',
      '.',
      '+',
      '1E',
      ' 5 ',
      3,
      2.5,
      -4,
      null,
      true,
    ];
    for (let seed = 1; seed <= 2000; seed += 1) {
      const random = new Prng(seed);
      const defaults: RequestDefaults = {
        defaultMemoryMiB: random.pick([0, 1024]),
        defaultCores: random.pick([0, 30]),
        memoryFactor: random.pick([1, 2, 1000]),
      };
      const limits: Resources = {};
      for (const name of [GPU_COUNT, GPU_MEMORY, GPU_MEMORY_PERCENTAGE, GPU_CORES])
        if (random.chance(0.6)) limits[name] = random.pick(values);
      const problems = gpuRequestProblems(pod([ctr('main', limits)]), defaults);
      const bounds = gpuRequestBounds(defaults);
      for (const [name, value] of Object.entries(limits)) {
        if (value === null) continue;
        const read = readQuantity(value);
        const bound = bounds[name as keyof typeof bounds];
        const inBounds = read.kind === 'integer' && read.value >= BigInt(bound.min) && read.value <= BigInt(bound.max);
        expect(
          problems.some((problem) => problem.startsWith(`invalid ${name} value`)),
          `seed ${seed}: ${name}=${JSON.stringify(value)}`,
        ).to.equal(!inBounds);
      }
      if (problems.length > 0) continue;
      const integer = (name: string): number | undefined => {
        const read = limits[name] === undefined || limits[name] === null ? undefined : readQuantity(limits[name]);
        return read?.kind === 'integer' ? Number(read.value) : undefined;
      };
      const count = integer(GPU_COUNT) ?? 0;
      const request = podGpuRequests(pod([ctr('main', limits)]), defaults).containers[0];
      expect(request === undefined, `seed ${seed}: ${JSON.stringify(limits)}`).to.equal(count === 0);
      if (request === undefined) continue;
      expect(request.count).to.equal(count);
      const memory = integer(GPU_MEMORY) ?? 0;
      const factor = Math.max(1, Math.floor(defaults.memoryFactor));
      if (memory > 0) expect(request.memoryMiB, `seed ${seed}`).to.equal(memory * factor);
      expect(request.cores, `seed ${seed}`).to.equal(integer(GPU_CORES) ?? defaults.defaultCores);
      const percentage = integer(GPU_MEMORY_PERCENTAGE) ?? 0;
      if (memory === 0 && percentage > 0) expect(request.memoryPercentage, `seed ${seed}`).to.equal(percentage);
      expect(containerGpuRequest(ctr('main', limits), defaults)).to.deep.equal(request);
    }
  });
});
