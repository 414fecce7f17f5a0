import { expect } from 'chai';
import { decodeAllocation, encodeAllocation, isDecodeError } from '../../../src/devices/allocation-codec.js';
import { fitPod, type GpuPolicy, type GpuPolicyChain } from '../../../src/devices/fit.js';
import type { GpuDevice, LinkScores } from '../../../src/devices/inventory.js';
import {
  initLayout,
  memoryOnGpu,
  type ContainerGpuRequest,
  type PodGpuRequests,
} from '../../../src/devices/requests.js';
import { addUsage, copyUsage, podDeviceUsage, subtractUsage, type GpuUse } from '../../../src/devices/usage.js';
import { seededRandom } from '../../support/kubelet-sim/seeded-random.js';

/**
 * Property: pods generated at random and fitted one after another onto a node (with some removed
 * in between) never take any GPU past its slots, memory or cores (ARCHITECTURE.md §5 invariant 4).
 */

// Seedable (mulberry32), so a failure names a seed that reproduces it.
const random = seededRandom;

function overCapacity(devices: readonly GpuDevice[], usage: ReadonlyMap<string, GpuUse>): string[] {
  const problems: string[] = [];
  for (const device of devices) {
    const use = usage.get(device.uuid);
    if (use === undefined) continue;
    if (use.slots > device.count) problems.push(`${device.uuid} slots ${use.slots} > ${device.count}`);
    if (use.memoryMiB > device.memoryMiB) problems.push(`${device.uuid} memory ${use.memoryMiB} > ${device.memoryMiB}`);
    if (use.cores > device.cores) problems.push(`${device.uuid} cores ${use.cores} > ${device.cores}`);
  }
  return problems;
}

function sortedUsage(usage: ReadonlyMap<string, GpuUse>): [string, GpuUse][] {
  return [...usage]
    .filter(([, use]) => use.slots + use.memoryMiB + use.cores > 0)
    .sort(([a], [b]) => a.localeCompare(b));
}

interface Scenario {
  next: () => number;
  int: (min: number, max: number) => number;
  pick: <T>(values: readonly T[]) => T;
}

function scenario(seed: number): Scenario {
  const next = random(seed);
  const int = (min: number, max: number): number => min + Math.floor(next() * (max - min + 1));
  return { next, int, pick: (values) => values[int(0, values.length - 1)]! };
}

function randomNode(s: Scenario): GpuDevice[] {
  return Array.from({ length: s.int(1, 4) }, (_, index) => ({
    uuid: `GPU-${index}`,
    index,
    count: s.int(1, 10),
    memoryMiB: s.pick([8192, 15360, 24576, 32768, 40960]),
    cores: s.next() < 0.2 ? 200 : 100,
    type: s.pick(['NVIDIA-Tesla T4', 'NVIDIA-Tesla V100-PCIE-32GB', 'NVIDIA-A100-SXM4-40GB']),
    numa: s.int(0, 1),
    mode: 'hami-core',
    healthy: s.next() < 0.9,
    cordoned: s.next() < 0.1,
  }));
}

function randomRequest(s: Scenario): ContainerGpuRequest {
  const byPercentage = s.next() < 0.4;
  const roll = s.next();
  return {
    count: s.next() < 0.7 ? 1 : s.int(2, 3),
    memoryMiB: byPercentage ? 0 : s.int(1, 20000),
    memoryPercentage: byPercentage ? s.int(1, 100) : undefined,
    cores: roll < 0.2 ? 100 : roll < 0.5 ? 0 : s.int(1, 99),
  };
}

function randomPod(s: Scenario): PodGpuRequests {
  const pod: PodGpuRequests = {
    initContainers: Array.from({ length: s.int(0, 2) }, () => (s.next() < 0.5 ? randomRequest(s) : undefined)),
    containers: Array.from({ length: s.int(1, 3) }, () => (s.next() < 0.8 ? randomRequest(s) : undefined)),
  };
  // Some init containers are sidecars (restartPolicy Always): they run beside everything after them.
  const sidecars = pod.initContainers.map(() => s.next() < 0.3);
  return sidecars.includes(true) ? { ...pod, sidecars } : pod;
}

function randomAnnotations(s: Scenario, devices: readonly GpuDevice[]): Record<string, string> {
  const roll = s.next();
  if (roll < 0.1) return { 'nvidia.com/nouse-gpuuuid': s.pick(devices).uuid };
  if (roll < 0.2) return { 'nvidia.com/use-gputype': s.pick(['T4', 'v100', 'a100']) };
  if (roll < 0.25) return { 'hami.io/device-scoring-weights': 'slot=0,core=1,memory=5' };
  if (roll < 0.45) return { 'nvidia.com/numa-bind': 'true' };
  return {};
}

/** The policies HAMi accepts, chains included: the invariant must hold under each of them. */
const POLICIES: (GpuPolicy | GpuPolicyChain)[] = [
  'binpack',
  'spread',
  { keys: [], mutex: true, topologyAware: false },
  { keys: ['binpack'], mutex: true, topologyAware: false },
  { keys: ['numa', 'spread'], mutex: false, topologyAware: false },
  { keys: ['binpack', 'numa'], mutex: false, topologyAware: true },
];

/** Random symmetric link scores between the node's GPUs. */
function randomLinks(s: Scenario, devices: readonly GpuDevice[]): LinkScores {
  const scores = new Map(devices.map((device) => [device.uuid, new Map<string, number>()]));
  for (const a of devices) {
    for (const b of devices) {
      if (a.uuid >= b.uuid) continue;
      const score = s.pick([10, 20, 100, 200]);
      scores.get(a.uuid)?.set(b.uuid, score);
      scores.get(b.uuid)?.set(a.uuid, score);
    }
  }
  return scores;
}

describe('devices: fit never overcommits a GPU (property, invariant 4)', () => {
  it('the capacity check used below does detect an overcommitted GPU', () => {
    const device: GpuDevice = {
      uuid: 'g',
      index: 0,
      count: 2,
      memoryMiB: 100,
      cores: 100,
      type: 'NVIDIA',
      numa: 0,
      mode: 'hami-core',
      healthy: true,
      cordoned: false,
    };
    expect(overCapacity([device], new Map([['g', { slots: 2, memoryMiB: 100, cores: 100 }]]))).to.deep.equal([]);
    expect(overCapacity([device], new Map([['g', { slots: 3, memoryMiB: 101, cores: 101 }]]))).to.have.length(3);
  });

  it('holds for 200 random nodes × 50 random pods, with pods leaving in between', () => {
    // Checks collect failures as text (chai per check would make this test slow); one assertion at the end.
    const failures: string[] = [];
    const check = (ok: boolean, what: () => string): void => {
      if (!ok && failures.length < 20) failures.push(what());
    };
    let fitted = 0;
    let refused = 0;
    let multiGpu = 0;
    for (let seed = 1; seed <= 200; seed++) {
      const s = scenario(seed);
      const devices = randomNode(s);
      const byUuid = new Map(devices.map((device) => [device.uuid, device]));
      let usage = new Map<string, GpuUse>();
      const running: Map<string, GpuUse>[] = [];
      for (let step = 0; step < 50; step++) {
        const where = (): string => `seed ${seed} step ${step}`;
        if (running.length > 0 && s.next() < 0.35) {
          const [leaving] = running.splice(s.int(0, running.length - 1), 1);
          subtractUsage(usage, leaving!);
        }
        const requests = randomPod(s);
        const before = JSON.stringify(sortedUsage(usage));
        const gpuPolicy = s.pick(POLICIES);
        const podAnnotations = randomAnnotations(s, devices);
        const result = fitPod({
          devices,
          usage,
          requests,
          podAnnotations,
          gpuPolicy,
          linkScores: randomLinks(s, devices),
        });
        check(JSON.stringify(sortedUsage(usage)) === before, () => `${where()}: fit modified the caller's usage`);
        if (!result.fits) {
          refused++;
          check(result.reason !== '', () => `${where()}: empty reason`);
          continue;
        }
        fitted++;

        // The allocation answers the requests exactly: one entry per container, N distinct usable GPUs each.
        const all = [...requests.initContainers, ...requests.containers];
        check(
          result.allocation.length === all.length,
          () => `${where()}: ${result.allocation.length} entries for ${all.length} containers`,
        );
        for (const [position, request] of all.entries()) {
          const chosen = result.allocation[position] ?? [];
          check(
            chosen.length === (request?.count ?? 0),
            () => `${where()} container ${position}: ${chosen.length} GPUs for ${request?.count ?? 0}`,
          );
          check(
            new Set(chosen.map((device) => device.uuid)).size === chosen.length,
            () => `${where()} container ${position}: GPUs repeat`,
          );
          if (podAnnotations['nvidia.com/numa-bind'] === 'true') {
            check(
              new Set(chosen.map((device) => byUuid.get(device.uuid)?.numa)).size <= 1,
              () => `${where()} container ${position}: numa-bind crossed NUMA nodes`,
            );
          }
          if (typeof gpuPolicy === 'object' && gpuPolicy.mutex) {
            // mutex: no GPU that anyone used before the pod, nor one an earlier app container took.
            const earlier = result.allocation
              .slice(requests.initContainers.length, position)
              .flat()
              .map((device) => device.uuid);
            for (const device of chosen)
              check(
                (usage.get(device.uuid)?.slots ?? 0) === 0 &&
                  (position < requests.initContainers.length || !earlier.includes(device.uuid)),
                () => `${where()} container ${position}: mutex shared ${device.uuid}`,
              );
          }
          if (request !== undefined && request.count > 1) multiGpu++;
          for (const allocated of chosen) {
            const device = byUuid.get(allocated.uuid);
            const usable = device !== undefined && device.healthy && !device.cordoned;
            check(usable, () => `${where()}: placed on unusable ${allocated.uuid}`);
            if (device === undefined || request === undefined) continue;
            const want = {
              uuid: device.uuid,
              type: 'NVIDIA',
              memoryMiB: memoryOnGpu(request, device.memoryMiB),
              cores: request.cores,
            };
            check(
              JSON.stringify(allocated) === JSON.stringify(want),
              () => `${where()}: ${JSON.stringify(allocated)} instead of ${JSON.stringify(want)}`,
            );
          }
        }

        // usageAfter is exactly the old usage plus the collapsed pod, as the informer will account it
        // after reading the annotation back.
        const decoded = decodeAllocation(encodeAllocation(result.allocation));
        if (isDecodeError(decoded)) expect.fail(`${where()}: ${decoded.error}`);
        const podUse = podDeviceUsage(decoded, initLayout(requests));
        const expected = copyUsage(usage);
        addUsage(expected, podUse);
        check(
          JSON.stringify(sortedUsage(result.usageAfter)) === JSON.stringify(sortedUsage(expected)),
          () => `${where()}: usageAfter is not usage + pod`,
        );

        for (const problem of overCapacity(devices, result.usageAfter)) check(false, () => `${where()}: ${problem}`);
        usage = result.usageAfter;
        running.push(podUse);
      }
    }
    expect(failures).to.deep.equal([]);
    // The property is only meaningful if nodes both fill up and accept plenty, multi-GPU pods included.
    expect(fitted).to.be.greaterThan(2500);
    expect(refused).to.be.greaterThan(2500);
    expect(multiGpu).to.be.greaterThan(200);
  });
});
