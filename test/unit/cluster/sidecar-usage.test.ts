import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterCache } from '../../../src/cluster/cluster-cache.js';
import { PodUsageIndex } from '../../../src/cluster/pod-usage-index.js';
import { encodeAllocation } from '../../../src/devices/allocation-codec.js';
import { ALLOCATED_ANNOTATION, VGPU_NODE_ANNOTATION } from '../../../src/hami/wire.js';
import { simulatedGpuNode } from '../../../src/local/simulated-gpu-node.js';
import { ScriptedSource } from '../../support/scripted-source.js';

/**
 * The state store reads a bound pod's allocation with its sidecar init containers (restartPolicy
 * Always, KEP-753) running beside the app containers: their shares add up on a GPU instead of
 * being the larger of the two, as a plain init container's would.
 */
const gpu = (memoryMiB: number) => ({ limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': String(memoryMiB) } });
const share = (uuid: string, memoryMiB: number) => [{ uuid, type: 'NVIDIA', memoryMiB, cores: 0 }];

type InitStatus = NonNullable<NonNullable<V1Pod['status']>['initContainerStatuses']>[number];
const status = (name: string, state: InitStatus['state']): InitStatus => ({
  name,
  image: 'i',
  imageID: '',
  ready: false,
  restartCount: 0,
  ...(state === undefined ? {} : { state }),
});

/**
 * Bound to n1: `init` plain init containers (memory each), then a sidecar, then one app container;
 * every segment as given.
 */
function boundPod(
  uid: string,
  parts: { plainInit?: number[]; sidecar: number; app: number; segments: { uuid: string; memoryMiB: number }[][] },
  initStatuses?: InitStatus[],
): V1Pod {
  return {
    metadata: {
      uid,
      name: uid,
      namespace: 'ns',
      resourceVersion: '5',
      annotations: {
        [VGPU_NODE_ANNOTATION]: 'n1',
        [ALLOCATED_ANNOTATION]: encodeAllocation(
          parts.segments.map((segment) => segment.flatMap(({ uuid, memoryMiB }) => share(uuid, memoryMiB))),
        ),
      },
    },
    spec: {
      nodeName: 'n1',
      initContainers: [
        ...(parts.plainInit ?? []).map((memoryMiB, index) => ({
          name: `init-${String(index)}`,
          resources: gpu(memoryMiB),
        })),
        { name: 'sidecar', restartPolicy: 'Always', resources: gpu(parts.sidecar) },
      ],
      containers: [{ name: 'app', resources: gpu(parts.app) }],
    },
    status: {
      phase: initStatuses === undefined ? 'Pending' : 'Running',
      ...(initStatuses === undefined ? {} : { initContainerStatuses: initStatuses }),
    },
  };
}

const memoryOn = (usage: ReadonlyMap<string, { memoryMiB: number }>): number =>
  [...usage.values()].reduce((sum, use) => sum + use.memoryMiB, 0);

describe("PodUsageIndex and ClusterCache: sidecar init containers in a bound pod's usage", () => {
  it('counts a 6000 MiB sidecar and a 6000 MiB app container together on their GPU: 12000 MiB, not the larger of the two', () => {
    const index = new PodUsageIndex();
    index.upsert(
      boundPod('p', {
        sidecar: 6000,
        app: 6000,
        segments: [[{ uuid: 'GPU-0', memoryMiB: 6000 }], [{ uuid: 'GPU-0', memoryMiB: 6000 }]],
      }),
    );
    expect(index.usageOn('n1').get('GPU-0')).to.deep.equal({ slots: 2, memoryMiB: 12000, cores: 0 });
  });

  it("the store's usage of the node counts the sidecar and the app container on two GPUs, and both beside a later plain init container", async () => {
    const nodes = new ScriptedSource<V1Node>();
    const pods = new ScriptedSource<V1Pod>();
    nodes.items = [simulatedGpuNode({ name: 'n1', gpus: 2, gpuMemoryMiB: 10000 })];
    // A 6000 MiB sidecar and a 6000 MiB app container cannot share a 10000 MiB GPU: one each.
    pods.items = [
      boundPod('two-gpus', {
        sidecar: 6000,
        app: 6000,
        segments: [[{ uuid: 'GPU-n1-0', memoryMiB: 6000 }], [{ uuid: 'GPU-n1-1', memoryMiB: 6000 }]],
      }),
    ];
    const cache = new ClusterCache({ sources: { nodes, pods } });
    await cache.start();
    try {
      expect(memoryOn(cache.usageOn('n1'))).to.equal(12000);
      // A sidecar, then a plain init container of 2000 MiB on the sidecar's GPU: both run at once there.
      const withInit = boundPod('with-init', {
        sidecar: 1000,
        app: 500,
        segments: [
          [{ uuid: 'GPU-n1-1', memoryMiB: 1000 }],
          [{ uuid: 'GPU-n1-1', memoryMiB: 2000 }],
          [{ uuid: 'GPU-n1-1', memoryMiB: 500 }],
        ],
      });
      const spec = withInit.spec ?? { containers: [] };
      withInit.spec = {
        ...spec,
        initContainers: [...(spec.initContainers ?? []), { name: 'late-init', resources: gpu(2000) }],
      };
      pods.emit('ADDED', withInit);
      expect(
        cache.usageOn('n1').get('GPU-n1-1')?.memoryMiB,
        'the sidecar (1000) beside the later init container (2000)',
      ).to.equal(6000 + 3000);
    } finally {
      await cache.stop();
    }
  });

  it('once the plain init containers have succeeded, counts the app containers and the running sidecars only', () => {
    const index = new PodUsageIndex();
    const segments = [
      [{ uuid: 'GPU-0', memoryMiB: 8000 }],
      [{ uuid: 'GPU-0', memoryMiB: 2000 }],
      [{ uuid: 'GPU-0', memoryMiB: 2000 }],
    ];
    // Plain init 8000 MiB (it runs before the sidecar starts), then the sidecar (2000) and the app
    // container (2000) on one GPU.
    index.upsert(boundPod('p', { plainInit: [8000], sidecar: 2000, app: 2000, segments }));
    expect(index.usageOn('n1').get('GPU-0')?.memoryMiB, 'while the init container may run').to.equal(8000);
    // The init container finished; the sidecar keeps running (kubelet reports it running, not terminated).
    index.upsert(
      boundPod('p', { plainInit: [8000], sidecar: 2000, app: 2000, segments }, [
        status('init-0', { terminated: { exitCode: 0 } }),
        status('sidecar', { running: {} }),
      ]),
    );
    expect(index.usageOn('n1').get('GPU-0')).to.deep.equal({ slots: 2, memoryMiB: 4000, cores: 0 });
    // A plain init container that failed is not done.
    const other = new PodUsageIndex();
    other.upsert(
      boundPod('q', { plainInit: [8000], sidecar: 2000, app: 2000, segments }, [
        status('init-0', { terminated: { exitCode: 1 } }),
        status('sidecar', { running: {} }),
      ]),
    );
    expect(other.usageOn('n1').get('GPU-0')?.memoryMiB).to.equal(8000);
  });
});
