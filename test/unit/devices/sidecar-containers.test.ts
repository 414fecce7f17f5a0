import { expect } from 'chai';
import {
  decodeAllocation,
  encodeAllocation,
  type AllocatedDevice,
  type PodAllocation,
} from '../../../src/devices/allocation-codec.js';
import { segmentsByContainer } from '../../../src/devices/container-segments.js';
import { fitPod, leastQuotaUse, type FitResult } from '../../../src/devices/fit.js';
import { namespaceUseOf, type QuotaBudget } from '../../../src/devices/gpu-quota.js';
import type { GpuDevice } from '../../../src/devices/inventory.js';
import { DEFAULT_REQUEST_DEFAULTS, initLayout, podGpuRequests } from '../../../src/devices/requests.js';
import { podDeviceUsage, type GpuUse } from '../../../src/devices/usage.js';

/**
 * Sidecar init containers (`restartPolicy: Always`, KEP-753) keep running beside the app
 * containers and beside every init container after them: fit, usage and quota count them so. Their
 * segment stays where HAMi's wire format puts every init container (init containers first, in
 * spec order), and the HAMi device plugin serves it to the sidecar.
 */

function gpu(uuid: string, index: number, memoryMiB = 10000): GpuDevice {
  return {
    uuid,
    index,
    count: 10,
    memoryMiB,
    cores: 100,
    type: 'NVIDIA-Tesla T4',
    numa: 0,
    mode: 'hami-core',
    healthy: true,
    cordoned: false,
  };
}

interface ContainerSpec {
  name: string;
  gpumem?: number;
  sidecar?: boolean;
}

function container({ name, gpumem, sidecar }: ContainerSpec): Record<string, unknown> {
  return {
    name,
    ...(sidecar === true ? { restartPolicy: 'Always' } : {}),
    ...(gpumem === undefined
      ? {}
      : { resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': String(gpumem) } } }),
  };
}

function pod(initContainers: ContainerSpec[], containers: ContainerSpec[]): Record<string, unknown> {
  return {
    metadata: { name: 'p', namespace: 'team-a' },
    spec: { initContainers: initContainers.map(container), containers: containers.map(container) },
  };
}

function fit(spec: Record<string, unknown>, devices: GpuDevice[], quota?: QuotaBudget): FitResult {
  return fitPod({
    devices,
    usage: new Map(),
    requests: podGpuRequests(spec, DEFAULT_REQUEST_DEFAULTS),
    podAnnotations: {},
    gpuPolicy: 'binpack',
    quota,
  });
}

function expectFits(result: FitResult): Extract<FitResult, { fits: true }> {
  if (!result.fits) expect.fail(`expected a fit, got: ${result.reason}`);
  return result;
}

const uuids = (allocation: PodAllocation): string[][] =>
  allocation.map((devices) => devices.map((device) => device.uuid));
const use = (slots: number, memoryMiB: number, cores: number): GpuUse => ({ slots, memoryMiB, cores });

/**
 * What HAMi v2.10's device plugin serves each container: kubelet calls Allocate for every container
 * asking for nvidia.com/gpu, init containers (sidecars among them) first, each list in spec order,
 * and the plugin (GetNextDeviceRequest, then the erase of that segment) answers with the first
 * segment of `hami.io/vgpu-devices-to-allocate` that still has devices.
 */
function servedByPlugin(annotation: string, spec: Record<string, unknown>): Map<string, AllocatedDevice[]> {
  const decoded = decodeAllocation(annotation);
  if ('error' in decoded) throw new Error(decoded.error);
  const segments = decoded.map((devices) => [...devices]);
  const podSpec = spec.spec as { initContainers: Record<string, unknown>[]; containers: Record<string, unknown>[] };
  const served = new Map<string, AllocatedDevice[]>();
  for (const each of [...podSpec.initContainers, ...podSpec.containers]) {
    if (each.resources === undefined) continue;
    const next = segments.findIndex((devices) => devices.length > 0);
    if (next < 0) throw new Error(`no segment left for ${String(each.name)}`);
    served.set(String(each.name), segments[next] ?? []);
    segments[next] = [];
  }
  return served;
}

describe('devices: sidecar init containers (restartPolicy Always) run beside the app containers', () => {
  it('reads restartPolicy Always on an init container as a sidecar, nothing else', () => {
    const requests = podGpuRequests(
      pod(
        [
          { name: 'plain', gpumem: 1000 },
          { name: 'side', gpumem: 1000, sidecar: true },
        ],
        [{ name: 'app', gpumem: 1000 }],
      ),
      DEFAULT_REQUEST_DEFAULTS,
    );
    expect(requests.sidecars).to.deep.equal([false, true]);
    expect(initLayout(requests)).to.deep.equal([false, true]);
    const plain = podGpuRequests(
      pod([{ name: 'plain', gpumem: 1000 }], [{ name: 'app', gpumem: 1000 }]),
      DEFAULT_REQUEST_DEFAULTS,
    );
    // A pod without sidecars reads as before (its shape key does not change).
    expect(plain).to.not.have.property('sidecars');
    expect(initLayout(plain)).to.equal(1);
  });

  it('does not fit a 6000 MiB sidecar and a 6000 MiB app container on one 10000 MiB GPU', () => {
    const result = fit(pod([{ name: 'side', gpumem: 6000, sidecar: true }], [{ name: 'app', gpumem: 6000 }]), [
      gpu('GPU-A', 0),
    ]);
    expect(result.fits).to.equal(false);
  });

  it('gives the sidecar and the app container different GPUs when there are two, and counts both', () => {
    const spec = pod([{ name: 'side', gpumem: 6000, sidecar: true }], [{ name: 'app', gpumem: 6000 }]);
    const result = expectFits(fit(spec, [gpu('GPU-A', 0), gpu('GPU-B', 1)]));
    expect(uuids(result.allocation)).to.deep.equal([['GPU-A'], ['GPU-B']]);
    expect([...result.usageAfter].sort()).to.deep.equal([
      ['GPU-A', use(1, 6000, 0)],
      ['GPU-B', use(1, 6000, 0)],
    ]);
  });

  it('the device plugin serves the sidecar its own segment and the app container the other GPU', () => {
    const spec = pod(
      [{ name: 'init' }, { name: 'side', gpumem: 6000, sidecar: true }],
      [{ name: 'app', gpumem: 6000 }],
    );
    const result = expectFits(fit(spec, [gpu('GPU-A', 0), gpu('GPU-B', 1)]));
    const annotation = encodeAllocation(result.allocation);
    // One `;`-terminated segment per container, init containers first, in spec order.
    expect(annotation).to.equal(';GPU-A,NVIDIA,6000,0:;GPU-B,NVIDIA,6000,0:;');
    const served = servedByPlugin(annotation, spec);
    expect(served.get('side')?.map((device) => device.uuid)).to.deep.equal(['GPU-A']);
    expect(served.get('app')?.map((device) => device.uuid)).to.deep.equal(['GPU-B']);
    // And what the store counts reads the segments onto the same containers.
    expect(segmentsByContainer(result.allocation, spec)).to.deep.equal({
      containers: result.allocation,
      realigned: false,
    });
  });

  it('still lets a plain init container of 6000 MiB share the GPU with a 6000 MiB app container', () => {
    const result = expectFits(
      fit(pod([{ name: 'init', gpumem: 6000 }], [{ name: 'app', gpumem: 6000 }]), [gpu('GPU-A', 0)]),
    );
    expect(uuids(result.allocation)).to.deep.equal([['GPU-A'], ['GPU-A']]);
    expect([...result.usageAfter]).to.deep.equal([['GPU-A', use(1, 6000, 0)]]);
  });

  it('runs an init container that comes after a sidecar beside that sidecar', () => {
    const spec = pod(
      [
        { name: 'side', gpumem: 6000, sidecar: true },
        { name: 'late', gpumem: 6000 },
      ],
      [{ name: 'app', gpumem: 1000 }],
    );
    expect(fit(spec, [gpu('GPU-A', 0)]).fits).to.equal(false);
    const result = expectFits(fit(spec, [gpu('GPU-A', 0), gpu('GPU-B', 1)]));
    expect(uuids(result.allocation)).to.deep.equal([['GPU-A'], ['GPU-B'], ['GPU-A']]);
    // GPU-B carries the late init container only while it runs; GPU-A the sidecar and the app container.
    expect([...result.usageAfter].sort()).to.deep.equal([
      ['GPU-A', use(2, 7000, 0)],
      ['GPU-B', use(1, 6000, 0)],
    ]);
  });

  it('lets an init container that comes before a sidecar use what the sidecar and the app containers take later', () => {
    const spec = pod(
      [
        { name: 'early', gpumem: 9000 },
        { name: 'side', gpumem: 6000, sidecar: true },
      ],
      [{ name: 'app', gpumem: 4000 }],
    );
    const result = expectFits(fit(spec, [gpu('GPU-A', 0)]));
    expect(uuids(result.allocation)).to.deep.equal([['GPU-A'], ['GPU-A'], ['GPU-A']]);
    expect([...result.usageAfter]).to.deep.equal([['GPU-A', use(2, 10000, 0)]]);
  });

  describe('usage of an allocation (podDeviceUsage with the init layout)', () => {
    const d = (uuid: string, memoryMiB: number, cores: number): AllocatedDevice => ({
      uuid,
      type: 'NVIDIA',
      memoryMiB,
      cores,
    });

    it('sums a sidecar with the app containers on a GPU they share', () => {
      expect([...podDeviceUsage([[d('a', 3000, 10)], [d('a', 2000, 20)]], [true])]).to.deep.equal([
        ['a', use(2, 5000, 30)],
      ]);
      // The same allocation with a plain init container: the larger of the two.
      expect([...podDeviceUsage([[d('a', 3000, 10)], [d('a', 2000, 20)]], [false])]).to.deep.equal([
        ['a', use(1, 3000, 20)],
      ]);
    });

    it('counts an init container after a sidecar together with it, one before it alone', () => {
      // [early 5000, sidecar 3000, late 4000] then app 1000, all on one GPU: late + sidecar = 7000 is the peak.
      const allocation = [[d('a', 5000, 0)], [d('a', 3000, 0)], [d('a', 4000, 0)], [d('a', 1000, 0)]];
      expect([...podDeviceUsage(allocation, [false, true, false])]).to.deep.equal([['a', use(2, 7000, 0)]]);
    });
  });

  describe('quota', () => {
    const budget = (limit: number): QuotaBudget => ({
      namespace: 'team-a',
      limits: [{ quota: 'gpu-quota', field: 'memoryMiB', limit }],
      used: { gpus: 0, memoryMiB: 0, cores: 0 },
    });

    it('the least a sidecar pod adds is the sidecar plus the app containers, not the larger of them', () => {
      const requests = podGpuRequests(
        pod([{ name: 'side', gpumem: 6000, sidecar: true }], [{ name: 'app', gpumem: 6000 }]),
        DEFAULT_REQUEST_DEFAULTS,
      );
      expect(leastQuotaUse(requests)).to.deep.equal({ gpus: 2, memoryMiB: 12000, cores: 0 });
      // KEP-753: an init container counts with the sidecars started before it.
      const late = podGpuRequests(
        pod(
          [
            { name: 'side', gpumem: 6000, sidecar: true },
            { name: 'late', gpumem: 9000 },
          ],
          [{ name: 'app', gpumem: 1000 }],
        ),
        DEFAULT_REQUEST_DEFAULTS,
      );
      expect(leastQuotaUse(late)).to.deep.equal({ gpus: 2, memoryMiB: 15000, cores: 0 });
    });

    it('a namespace GPU memory quota of 10000 MiB refuses a 6000 MiB sidecar with a 6000 MiB app container', () => {
      const result = fit(
        pod([{ name: 'side', gpumem: 6000, sidecar: true }], [{ name: 'app', gpumem: 6000 }]),
        [gpu('GPU-A', 0, 32000)],
        budget(10000),
      );
      if (result.fits) expect.fail('expected the quota to refuse the pod');
      expect(result.reason).to.contain('limits.nvidia.com/gpumem 0 used + 12000 requested > 10000');
    });

    it('counts the sidecar plus the app containers of a placed pod against the namespace', () => {
      const spec = pod([{ name: 'side', gpumem: 6000, sidecar: true }], [{ name: 'app', gpumem: 6000 }]);
      const result = expectFits(fit(spec, [gpu('GPU-A', 0, 32000)], budget(12000)));
      const requests = podGpuRequests(spec, DEFAULT_REQUEST_DEFAULTS);
      expect(namespaceUseOf(podDeviceUsage(result.allocation, initLayout(requests)))).to.deep.equal({
        gpus: 2,
        memoryMiB: 12000,
        cores: 0,
      });
    });
  });
});
