import { expect } from 'chai';
import { fitPod, prepareFit, type FitInput, type FitResult } from '../../../src/devices/fit.js';
import { parseGpuPolicy, type GpuPolicyChain } from '../../../src/devices/gpu-policy.js';
import type { GpuDevice, LinkScores } from '../../../src/devices/inventory.js';
import { parseNumaBind } from '../../../src/devices/numa.js';
import type { ContainerGpuRequest, PodGpuRequests } from '../../../src/devices/requests.js';
import { bestLinkedSet, COMBINATION_LIMIT, leastLinked } from '../../../src/devices/topology.js';
import type { GpuUse } from '../../../src/devices/usage.js';

/**
 * The GPU policies HAMi accepts in hami.io/gpu-scheduler-policy and nvidia.com/numa-bind, against
 * HAMi's reason names (pkg/device/nvidia/device.go Fit, pkg/scheduler/policy/gpu_policy.go).
 */
function gpu(uuid: string, index: number, overrides: Partial<GpuDevice> = {}): GpuDevice {
  return {
    uuid,
    index,
    count: 10,
    memoryMiB: 8192,
    cores: 100,
    type: 'NVIDIA-A10',
    numa: 0,
    mode: 'hami-core',
    healthy: true,
    cordoned: false,
    ...overrides,
  };
}
const req = (overrides: Partial<ContainerGpuRequest> = {}): ContainerGpuRequest => ({
  count: 1,
  memoryMiB: 100,
  memoryPercentage: undefined,
  cores: 10,
  ...overrides,
});
const use = (slots: number, memoryMiB = 100, cores = 0): GpuUse => ({ slots, memoryMiB, cores });
const app = (...containers: ContainerGpuRequest[]): PodGpuRequests => ({ initContainers: [], containers });

function policy(value: string): GpuPolicyChain {
  const parsed = parseGpuPolicy(value);
  if (parsed === undefined || 'error' in parsed) throw new Error(`bad test policy ${value}`);
  return parsed;
}

function fit(overrides: Partial<FitInput> & Pick<FitInput, 'devices'>): FitResult {
  return fitPod({ usage: new Map(), requests: app(req()), podAnnotations: {}, gpuPolicy: 'spread', ...overrides });
}

function chosen(result: FitResult): string[][] {
  if (!result.fits) expect.fail(`expected a fit, got: ${result.reason}`);
  return result.allocation.map((container) => container.map((device) => device.uuid));
}

function reasonOf(result: FitResult): string {
  if (result.fits) expect.fail(`expected a failure, got ${JSON.stringify(result.allocation)}`);
  return result.reason;
}

/** Symmetric link scores from `[a, b, score]` triples. */
function links(...pairs: [string, string, number][]): LinkScores {
  const scores = new Map<string, Map<string, number>>();
  for (const [a, b, score] of pairs) {
    for (const [from, to] of [
      [a, b],
      [b, a],
    ] as const) {
      const peers = scores.get(from) ?? new Map<string, number>();
      peers.set(to, score);
      scores.set(from, peers);
    }
  }
  return scores;
}

describe('devices: GPU scheduling policies (hami.io/gpu-scheduler-policy, nvidia.com/numa-bind)', () => {
  describe('mutex: a GPU with any user is unavailable (ExclusiveDeviceAllocateConflict)', () => {
    const devices = [gpu('used', 0), gpu('idle', 1)];
    const usage = new Map([['used', use(1)]]);

    it('skips the used GPU and takes the idle one (HAMi TestFit mutex case)', () => {
      expect(chosen(fit({ devices, usage, gpuPolicy: policy('mutex') }))).to.deep.equal([['idle']]);
    });

    it('cannot take 2 GPUs when only one is idle, and says why', () => {
      const result = fit({ devices, usage, gpuPolicy: policy('mutex'), requests: app(req({ count: 2 })) });
      expect(reasonOf(result)).to.equal('1/2 AllocatedCardsInsufficientRequest, 1/2 ExclusiveDeviceAllocateConflict');
    });

    it('names every used GPU when none is idle', () => {
      expect(
        reasonOf(
          fit({
            devices,
            usage: new Map([
              ['used', use(1)],
              ['idle', use(3)],
            ]),
            gpuPolicy: policy('mutex'),
          }),
        ),
      ).to.equal('2/2 ExclusiveDeviceAllocateConflict');
    });

    it('checks after the slots, as HAMi does: a full GPU is CardTimeSlicingExhausted', () => {
      expect(
        reasonOf(
          fit({
            devices: [gpu('full', 0, { count: 1 })],
            usage: new Map([['full', use(1)]]),
            gpuPolicy: policy('mutex'),
          }),
        ),
      ).to.equal('1/1 CardTimeSlicingExhausted');
    });

    it('is a filter inside a chain: binpack,mutex would pack onto the used GPU, mutex refuses it', () => {
      expect(chosen(fit({ devices, usage, gpuPolicy: 'binpack' }))).to.deep.equal([['used']]);
      expect(chosen(fit({ devices, usage, gpuPolicy: policy('binpack,mutex') }))).to.deep.equal([['idle']]);
    });

    it("keeps a pod's own containers apart too", () => {
      const result = fit({
        devices: [gpu('a', 0), gpu('b', 1)],
        gpuPolicy: policy('binpack,mutex'),
        requests: app(req(), req()),
      });
      expect(chosen(result)).to.deep.equal([['a'], ['b']]);
      expect(
        reasonOf(fit({ devices: [gpu('a', 0)], gpuPolicy: policy('mutex'), requests: app(req(), req()) })),
      ).to.equal('1/1 ExclusiveDeviceAllocateConflict');
    });

    it('without mutex the used GPU is shared (the control)', () => {
      expect(chosen(fit({ devices, usage, gpuPolicy: 'binpack', requests: app(req({ count: 2 })) }))).to.deep.equal([
        ['used', 'idle'],
      ]);
    });
  });

  describe("nvidia.com/numa-bind: all of a container's GPUs on one NUMA node (NumaNotFit)", () => {
    // NUMA 0: a (busy), b; NUMA 1: c, d.
    const devices = [
      gpu('a', 0, { numa: 0 }),
      gpu('b', 1, { numa: 0 }),
      gpu('c', 2, { numa: 1 }),
      gpu('d', 3, { numa: 1 }),
    ];
    const usage = new Map([['a', use(1, 4000, 50)]]);
    const bind = { 'nvidia.com/numa-bind': 'true' };

    it('takes two GPUs of one NUMA node where spread alone would cross', () => {
      expect(chosen(fit({ devices, usage, requests: app(req({ count: 2 })) }))).to.deep.equal([['b', 'c']]);
      expect(chosen(fit({ devices, usage, requests: app(req({ count: 2 })), podAnnotations: bind }))).to.deep.equal([
        ['c', 'd'],
      ]);
    });

    it('takes the NUMA node the policy likes best: binpack the one with the busy GPU', () => {
      expect(
        chosen(fit({ devices, usage, gpuPolicy: 'binpack', requests: app(req({ count: 2 })), podAnnotations: bind })),
      ).to.deep.equal([['a', 'b']]);
    });

    it('fails with NumaNotFit when enough GPUs fit but no NUMA node has enough', () => {
      expect(reasonOf(fit({ devices, requests: app(req({ count: 3 })), podAnnotations: bind }))).to.equal(
        '4/4 NumaNotFit',
      );
      const full = new Map([
        ['a', use(10)],
        ['d', use(10)],
      ]);
      expect(reasonOf(fit({ devices, usage: full, requests: app(req({ count: 2 })), podAnnotations: bind }))).to.equal(
        '2/4 CardTimeSlicingExhausted, 2/4 NumaNotFit',
      );
    });

    it('keeps AllocatedCardsInsufficientRequest when too few GPUs fit at all', () => {
      const full = new Map([
        ['a', use(10)],
        ['b', use(10)],
        ['c', use(10)],
      ]);
      expect(reasonOf(fit({ devices, usage: full, requests: app(req({ count: 2 })), podAnnotations: bind }))).to.equal(
        '1/4 AllocatedCardsInsufficientRequest, 3/4 CardTimeSlicingExhausted',
      );
    });

    it('treats GPUs of unknown NUMA node (-1, a host without NUMA) as one node', () => {
      const flat = [gpu('x', 0, { numa: -1 }), gpu('y', 1, { numa: -1 })];
      expect(chosen(fit({ devices: flat, requests: app(req({ count: 2 })), podAnnotations: bind }))).to.deep.equal([
        ['x', 'y'],
      ]);
    });

    it('binds each container on its own: two containers may use different NUMA nodes', () => {
      const result = fit({
        devices,
        requests: app(req({ count: 2, memoryMiB: 8000 }), req({ count: 2, memoryMiB: 8000 })),
        podAnnotations: bind,
      });
      expect(chosen(result)).to.deep.equal([
        ['a', 'b'],
        ['c', 'd'],
      ]);
    });

    it("reads the value as Go's ParseBool does, and refuses anything else rather than ignore it", () => {
      for (const value of ['true', '1', 't', 'TRUE', 'True'])
        expect(parseNumaBind({ 'nvidia.com/numa-bind': value })).to.equal(true);
      for (const value of ['false', '0', 'f', 'False'])
        expect(parseNumaBind({ 'nvidia.com/numa-bind': value })).to.equal(false);
      expect(parseNumaBind({})).to.equal(false);
      const prepared = prepareFit({ 'nvidia.com/numa-bind': 'yes' });
      expect(prepared).to.deep.equal({
        error: 'invalid nvidia.com/numa-bind "yes": expected true or false',
        code: 'InvalidNumaBind',
      });
      expect(fit({ devices, podAnnotations: { 'nvidia.com/numa-bind': 'yes' } })).to.deep.include({
        fits: false,
        reasonCounts: { InvalidNumaBind: 1 },
      });
    });

    it('with numa-bind false GPUs may cross NUMA nodes', () => {
      expect(
        chosen(
          fit({
            devices,
            usage,
            requests: app(req({ count: 2 })),
            podAnnotations: { 'nvidia.com/numa-bind': 'false' },
          }),
        ),
      ).to.deep.equal([['b', 'c']]);
    });
  });

  describe('numa as a sort key (lessByChain): NUMA node first, then the next key', () => {
    const devices = [gpu('n1-idle', 0, { numa: 1 }), gpu('n0-busy', 1, { numa: 0 }), gpu('n0-light', 2, { numa: 0 })];
    const usage = new Map([
      ['n0-busy', use(2, 4000, 40)],
      ['n0-light', use(1, 100, 0)],
    ]);

    it('numa,spread: lower NUMA node first, the emptier GPU within it; numa,binpack the fuller', () => {
      expect(chosen(fit({ devices, usage, gpuPolicy: policy('numa,spread') }))).to.deep.equal([['n0-light']]);
      expect(chosen(fit({ devices, usage, gpuPolicy: policy('numa,binpack') }))).to.deep.equal([['n0-busy']]);
    });

    it('spread,numa: the score first, NUMA only breaking ties', () => {
      expect(chosen(fit({ devices, usage, gpuPolicy: policy('spread,numa') }))).to.deep.equal([['n1-idle']]);
      expect(chosen(fit({ devices, gpuPolicy: policy('spread,numa') }))).to.deep.equal([['n0-busy']]);
    });

    it('bare numa sorts by NUMA node, then index; a chain of filters only sorts as spread', () => {
      expect(chosen(fit({ devices, usage, gpuPolicy: policy('numa') }))).to.deep.equal([['n0-busy']]);
      expect(
        chosen(fit({ devices, usage, gpuPolicy: policy('topology-aware,mutex'), linkScores: new Map() })),
      ).to.deep.equal([['n1-idle']]);
    });

    it('is a preference, not a binding: a request larger than a NUMA node still fits across nodes', () => {
      expect(
        chosen(fit({ devices, usage, gpuPolicy: policy('numa'), requests: app(req({ count: 3 })) })),
      ).to.deep.equal([['n0-busy', 'n0-light', 'n1-idle']]);
    });
  });

  describe('topology-aware: the best-linked GPUs of those that fit (hami.io/node-nvidia-score)', () => {
    const devices = [gpu('a', 0), gpu('b', 1), gpu('c', 2), gpu('d', 3)];
    // c-d share an NVLink; the rest meet over PCIe.
    const scores = links(
      ['a', 'b', 10],
      ['a', 'c', 10],
      ['a', 'd', 10],
      ['b', 'c', 10],
      ['b', 'd', 10],
      ['c', 'd', 100],
    );

    it('says so in the reason, never pretends, when the node reports no link scores', () => {
      const result = fit({ devices, gpuPolicy: policy('topology-aware') });
      expect(reasonOf(result)).to.equal(
        "NodeTopologyUnknown: topology-aware needs the node's hami.io/node-nvidia-score, which the HAMi device plugin writes with ENABLE_TOPOLOGY_SCORE=true",
      );
      expect(result).to.deep.include({ reasonCounts: { NodeTopologyUnknown: 1 } });
    });

    it('takes the set with the highest pairwise score where spread would take the first two', () => {
      expect(chosen(fit({ devices, linkScores: scores, requests: app(req({ count: 2 })) }))).to.deep.equal([
        ['a', 'b'],
      ]);
      expect(
        chosen(
          fit({ devices, linkScores: scores, gpuPolicy: policy('topology-aware'), requests: app(req({ count: 2 })) }),
        ),
      ).to.deep.equal([['c', 'd']]);
    });

    it('one GPU: the least-linked, leaving the NVLink pair whole (computeWorstSingleCard)', () => {
      expect(chosen(fit({ devices, linkScores: scores, gpuPolicy: policy('topology-aware') }))).to.deep.equal([['a']]);
      expect(
        chosen(
          fit({
            devices: [devices[2], devices[3], devices[0]] as GpuDevice[],
            linkScores: scores,
            gpuPolicy: policy('topology-aware'),
          }),
        ),
      ).to.deep.equal([['a']]);
    });

    it('chooses among the GPUs that fit only', () => {
      const usage = new Map([['d', use(10)]]);
      expect(
        chosen(
          fit({
            devices,
            usage,
            linkScores: scores,
            gpuPolicy: policy('topology-aware'),
            requests: app(req({ count: 2 })),
          }),
        ),
      ).to.deep.equal([['a', 'b']]);
      expect(
        reasonOf(
          fit({
            devices,
            usage: new Map([
              ['a', use(10)],
              ['b', use(10)],
              ['c', use(10)],
            ]),
            linkScores: scores,
            gpuPolicy: policy('topology-aware'),
            requests: app(req({ count: 2 })),
          }),
        ),
      ).to.equal('1/4 AllocatedCardsInsufficientRequest, 3/4 CardTimeSlicingExhausted');
    });

    it('chains with mutex: the best-linked idle GPUs', () => {
      const usage = new Map([['c', use(1)]]);
      expect(
        chosen(
          fit({
            devices,
            usage,
            linkScores: scores,
            gpuPolicy: policy('mutex,topology-aware'),
            requests: app(req({ count: 2 })),
          }),
        ),
      ).to.deep.equal([['a', 'b']]);
    });

    it('with numa-bind: the best-linked set within one NUMA node', () => {
      const split = [
        gpu('a', 0, { numa: 0 }),
        gpu('b', 1, { numa: 0 }),
        gpu('c', 2, { numa: 1 }),
        gpu('d', 3, { numa: 1 }),
      ];
      const crossBest = links(['a', 'c', 100], ['a', 'b', 5], ['c', 'd', 20]);
      const result = fit({
        devices: split,
        linkScores: crossBest,
        gpuPolicy: policy('topology-aware'),
        podAnnotations: { 'nvidia.com/numa-bind': 'true' },
        requests: app(req({ count: 2 })),
      });
      expect(chosen(result)).to.deep.equal([['c', 'd']]);
      expect(
        chosen(
          fit({
            devices: split,
            linkScores: crossBest,
            gpuPolicy: policy('topology-aware'),
            requests: app(req({ count: 2 })),
          }),
        ),
      ).to.deep.equal([['a', 'c']]);
    });

    it('a pair the plugin did not list scores 0; one direction listed is enough', () => {
      const oneWay: LinkScores = new Map([['d', new Map([['c', 50]])]]);
      expect(
        chosen(
          fit({ devices, linkScores: oneWay, gpuPolicy: policy('topology-aware'), requests: app(req({ count: 2 })) }),
        ),
      ).to.deep.equal([['c', 'd']]);
    });

    it('bestLinkedSet: exhaustive on small nodes, greedy past the limit, and finds an NVLink clique either way', () => {
      const many = Array.from({ length: 16 }, (_, index) => gpu(`g${index}`, index));
      const pairs: [string, string, number][] = [];
      for (let a = 0; a < 16; a++)
        for (let b = a + 1; b < 16; b++) pairs.push([`g${a}`, `g${b}`, a >= 8 && b >= 8 ? 100 : 1]);
      const scores16 = links(...pairs);
      // C(16, 8) = 12,870 is past the limit: greedy.
      expect(12_870).to.be.greaterThan(COMBINATION_LIMIT);
      expect(bestLinkedSet(many, 8, scores16).devices.map((device) => device.uuid)).to.deep.equal([
        'g8',
        'g9',
        'g10',
        'g11',
        'g12',
        'g13',
        'g14',
        'g15',
      ]);
      expect(bestLinkedSet(many.slice(4, 12), 4, scores16).devices.map((device) => device.uuid)).to.deep.equal([
        'g8',
        'g9',
        'g10',
        'g11',
      ]);
      expect(bestLinkedSet(many.slice(4, 12), 4, scores16).score).to.equal(600);
      expect(leastLinked(many.slice(6, 12), scores16)?.uuid).to.equal('g6');
    });
  });

  describe('what we do not place is named, never defaulted', () => {
    it('a MIG-only nvidia.com/vgpu-mode refuses the pod with MigModeUnsupported', () => {
      const prepared = prepareFit({ 'nvidia.com/vgpu-mode': 'mig' });
      expect(prepared).to.have.property('code', 'MigModeUnsupported');
      expect(prepared)
        .to.have.property('error')
        .that.matches(/^unsupported nvidia\.com\/vgpu-mode "mig": vgpu-warden does not place MIG instances/);
      expect(prepareFit({ 'nvidia.com/vgpu-mode': 'hami-core,mig' })).not.to.have.property('error');
    });

    it('MIG-mode GPUs are counted under CardMigModeUnsupported, and the others still serve', () => {
      const devices = [gpu('mig', 0, { mode: 'mig' }), gpu('core', 1)];
      expect(chosen(fit({ devices }))).to.deep.equal([['core']]);
      expect(reasonOf(fit({ devices, requests: app(req({ count: 2 })) }))).to.equal(
        '1/2 AllocatedCardsInsufficientRequest, 1/2 CardMigModeUnsupported',
      );
    });
  });
});
