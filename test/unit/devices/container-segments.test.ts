import { expect } from 'chai';
import { PodUsageIndex } from '../../../src/cluster/pod-usage-index.js';
import {
  decodeAllocation,
  isDecodeError,
  type AllocatedDevice,
  type PodAllocation,
} from '../../../src/devices/allocation-codec.js';
import { segmentsByContainer } from '../../../src/devices/container-segments.js';
import { ALLOCATED_ANNOTATION } from '../../../src/hami/wire.js';

const device = (uuid: string, memoryMiB = 2500, cores = 25): AllocatedDevice => ({
  uuid,
  type: 'NVIDIA',
  memoryMiB,
  cores,
});
const gpu = (name: string, count = '1') => ({
  name,
  resources: { limits: { 'nvidia.com/gpu': count, 'nvidia.com/gpumem': '2500' } },
});
const plain = (name: string) => ({ name });

function decoded(text: string): PodAllocation {
  const allocation = decodeAllocation(text);
  if (isDecodeError(allocation)) throw new Error(allocation.error);
  return allocation;
}

describe("devices: which container each allocation segment goes to (as HAMi's device plugin hands them out)", () => {
  // HAMi #2899: [init without GPU, app, app] written without the init container's empty segment.
  const issue2899 = { spec: { initContainers: [plain('init')], containers: [gpu('app-0'), gpu('app-1')] } };

  it('gives the k-th segment with devices to the k-th container asking for nvidia.com/gpu (HAMi #2899)', () => {
    expect(segmentsByContainer(decoded('GPU-A,NVIDIA,2500,25:;GPU-B,NVIDIA,2500,25:;'), issue2899)).to.deep.equal({
      containers: [[], [device('GPU-A')], [device('GPU-B')]],
      realigned: true,
    });
  });

  it('leaves the positional value HAMi means to write alone', () => {
    const allocation = decoded(';GPU-A,NVIDIA,2500,25:;GPU-B,NVIDIA,2500,25:;');
    expect(segmentsByContainer(allocation, issue2899)).to.deep.equal({ containers: allocation, realigned: false });
    // The plugin's rewrites add empty segments at the end: still positional.
    const rewritten = decoded(';GPU-A,NVIDIA,2500,25:;GPU-B,NVIDIA,2500,25:;;;');
    expect(segmentsByContainer(rewritten, issue2899)).to.deep.equal({ containers: rewritten, realigned: false });
  });

  it('follows the plugin across init containers that ask for GPUs, and app containers that do not', () => {
    const pod = {
      spec: { initContainers: [plain('a'), gpu('b')], containers: [plain('c'), gpu('d', '2'), plain('e')] },
    };
    expect(segmentsByContainer(decoded('GPU-I,NVIDIA,100,0:;GPU-X,NVIDIA,1,0:GPU-Y,NVIDIA,1,0:;'), pod)).to.deep.equal({
      containers: [[], [device('GPU-I', 100, 0)], [], [device('GPU-X', 1, 0), device('GPU-Y', 1, 0)], []],
      realigned: true,
    });
  });

  it('reads by position when the segments with devices and the containers asking for GPUs do not pair up (no order is provable)', () => {
    const tooMany = decoded('GPU-A,NVIDIA,2500,25:;GPU-B,NVIDIA,2500,25:;GPU-C,NVIDIA,1,0:;');
    expect(segmentsByContainer(tooMany, issue2899)).to.deep.equal({ containers: tooMany, realigned: false });
    const tooFew = decoded('GPU-A,NVIDIA,2500,25:;');
    expect(segmentsByContainer(tooFew, issue2899)).to.deep.equal({ containers: tooFew, realigned: false });
    const noGpuAsked = decoded('GPU-A,NVIDIA,2500,25:;');
    expect(segmentsByContainer(noGpuAsked, { spec: { containers: [plain('x')] } })).to.deep.equal({
      containers: noGpuAsked,
      realigned: false,
    });
  });

  it('counts what kubelet asks the plugin for: nvidia.com/gpu in limits, else requests; 0 or unreadable is no ask', () => {
    const pod = {
      spec: {
        containers: [
          { name: 'zero', resources: { limits: { 'nvidia.com/gpu': '0' } } },
          { name: 'requests', resources: { requests: { 'nvidia.com/gpu': '1' } } },
          { name: 'bad', resources: { limits: { 'nvidia.com/gpu': 'many' } } },
        ],
      },
    };
    expect(segmentsByContainer(decoded('GPU-A,NVIDIA,1,0:;'), pod)).to.deep.equal({
      containers: [[], [device('GPU-A', 1, 0)], []],
      realigned: true,
    });
  });

  describe('in the usage index', () => {
    const hamiPod = (initDone: boolean) => ({
      metadata: {
        uid: 'u1',
        namespace: 'ns',
        name: 'p',
        annotations: { [ALLOCATED_ANNOTATION]: 'GPU-A,NVIDIA,2500,25:;GPU-B,NVIDIA,2500,25:;' },
      },
      spec: { nodeName: 'n1', ...issue2899.spec },
      status: {
        phase: initDone ? 'Running' : 'Pending',
        initContainerStatuses: initDone ? [{ state: { terminated: { exitCode: 0 } } }] : [],
      },
    });

    it('counts both app containers of a HAMi #2899 pod once its init container is done, and warns once', () => {
      const index = new PodUsageIndex();
      const warning = index.upsert(hamiPod(false));
      expect(warning).to.match(
        /^pod ns\/p: hami\.io\/vgpu-devices-allocated its GPU segments do not line up .*HAMi #2899\)$/,
      );
      expect(index.usageOn('n1')).to.deep.equal(
        new Map([
          ['GPU-A', { slots: 1, memoryMiB: 2500, cores: 25 }],
          ['GPU-B', { slots: 1, memoryMiB: 2500, cores: 25 }],
        ]),
      );
      // Read by position, GPU-A was the init container's and went away here.
      index.upsert(hamiPod(true));
      expect(index.usageOn('n1')).to.deep.equal(
        new Map([
          ['GPU-A', { slots: 1, memoryMiB: 2500, cores: 25 }],
          ['GPU-B', { slots: 1, memoryMiB: 2500, cores: 25 }],
        ]),
      );
    });

    it('warns once per value about the HAMi leniencies it used, and counts what they read', () => {
      const index = new PodUsageIndex();
      const pod = {
        metadata: {
          uid: 'u2',
          namespace: 'ns',
          name: 'q',
          annotations: { [ALLOCATED_ANNOTATION]: 'GPU-A,NVIDIA,3000,30,extra' },
        },
        spec: { nodeName: 'n1', containers: [gpu('main')] },
      };
      const warning = index.upsert(pod);
      expect(warning).to.equal(
        'pod ns/q: hami.io/vgpu-devices-allocated read as HAMi v2.10 reads it (container 0: no ";" after the last container; ' +
          'container 0, device 0: no ":" after the last device; container 0, device 0: 1 field(s) after the fourth ignored)',
      );
      expect(index.usageOn('n1').get('GPU-A')).to.deep.equal({ slots: 1, memoryMiB: 3000, cores: 30 });
      expect(index.upsert({ ...pod, status: { phase: 'Running' } })).to.equal(undefined);
      expect(index.unreadable()).to.deep.equal([]);
    });
  });
});
