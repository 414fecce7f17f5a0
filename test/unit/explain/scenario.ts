import type { CoreV1Event, V1Node, V1Pod } from '@kubernetes/client-node';
import { lockRowOf, type LockRow } from '../../../src/lock/lock-report.js';
import {
  ALLOCATED_ANNOTATION,
  BIND_PHASE_ANNOTATION,
  BIND_TIME_ANNOTATION,
  NODE_LOCK_ANNOTATION,
  TO_ALLOCATE_ANNOTATION,
  VGPU_NODE_ANNOTATION,
} from '../../../src/hami/wire.js';
import { DEFAULT_REQUEST_DEFAULTS } from '../../../src/devices/requests.js';
import {
  explainPod,
  lockNodesToInspect,
  placementFor,
  type ExplainSettings,
} from '../../../src/explain/explain-pod.js';
import type { Explanation } from '../../../src/explain/explanation.js';
import { snapshotCache } from '../../../src/explain/snapshot-cache.js';
import { classifyLock } from '../../../src/lock/lock-rules.js';
import { formatLockValue, parseLockValue, type PodRef } from '../../../src/lock/lock-value.js';
import { ownerPodFrom } from '../../../src/lock/owner-pod.js';
import { simulatedGpuNode, type SimulatedGpuNodeSpec } from '../../../src/local/simulated-gpu-node.js';

/** Shared fixtures for the explain unit tests: a fixed clock, settings, pods, nodes and events. */
export const NOW = new Date('2026-12-01T08:00:00Z');
export const SETTINGS: ExplainSettings = {
  defaults: { nodePolicy: 'binpack', gpuPolicy: 'spread', requestDefaults: DEFAULT_REQUEST_DEFAULTS },
  mutation: { schedulerName: 'hami-scheduler', overwriteDefaultScheduler: true, defaultGpuCount: 1 },
};
export const RULES = { bindGraceMs: 60_000, expireMs: 300_000 };

export const secondsAgo = (seconds: number): Date => new Date(NOW.getTime() - seconds * 1000);

export interface PodOptions {
  namespace?: string;
  memoryMiB?: number;
  cores?: number;
  node?: string;
  phase?: string;
  schedulerName?: string;
  annotations?: Record<string, string>;
  deleting?: boolean;
  gpuType?: string;
}

/** A one-container GPU pod as the webhook leaves it (schedulerName set, cores given). */
export function gpuPod(name: string, options: PodOptions = {}): V1Pod {
  return {
    metadata: {
      name,
      namespace: options.namespace ?? 'team-a',
      uid: `uid-${name}`,
      creationTimestamp: secondsAgo(300),
      ...(options.annotations ? { annotations: options.annotations } : {}),
      ...(options.gpuType
        ? { annotations: { ...options.annotations, 'nvidia.com/use-gputype': options.gpuType } }
        : {}),
      ...(options.deleting ? { deletionTimestamp: secondsAgo(5) } : {}),
    },
    spec: {
      schedulerName: options.schedulerName ?? 'hami-scheduler',
      ...(options.node ? { nodeName: options.node } : {}),
      containers: [
        {
          name: 'main',
          image: 'x',
          resources: {
            limits: {
              'nvidia.com/gpu': '1',
              'nvidia.com/gpumem': String(options.memoryMiB ?? 12000),
              'nvidia.com/gpucores': String(options.cores ?? 30),
            },
          },
        },
      ],
    },
    status: { phase: options.phase ?? 'Pending' },
  };
}

/** The annotations a bind to `node` writes for a one-container pod on its first GPU. */
export function boundAnnotations(node: string, phase: string, memoryMiB = 12000, cores = 30): Record<string, string> {
  const encoded = `GPU-${node}-0,NVIDIA,${memoryMiB},${cores}:;`;
  return {
    [VGPU_NODE_ANNOTATION]: node,
    [TO_ALLOCATE_ANNOTATION]: encoded,
    [ALLOCATED_ANNOTATION]: encoded,
    [BIND_PHASE_ANNOTATION]: phase,
    [BIND_TIME_ANNOTATION]: String(Math.floor(secondsAgo(40).getTime() / 1000)),
  };
}

export function gpuNode(spec: SimulatedGpuNodeSpec, lock?: { holder: PodRef; ageSeconds: number }): V1Node {
  const node = simulatedGpuNode(spec);
  if (lock !== undefined) {
    node.metadata = {
      ...node.metadata,
      annotations: {
        ...node.metadata?.annotations,
        [NODE_LOCK_ANNOTATION]: formatLockValue(secondsAgo(lock.ageSeconds), lock.holder),
      },
    };
  }
  return node;
}

export function event(reason: string, message: string, at: Date, extra: Partial<CoreV1Event> = {}): CoreV1Event {
  return {
    metadata: { name: `${reason}-${at.getTime()}` },
    involvedObject: { kind: 'Pod', name: 'p' },
    reason,
    message,
    type: reason === 'NodeLockWait' || reason === 'Scheduled' ? 'Normal' : 'Warning',
    lastTimestamp: at,
    firstTimestamp: at,
    count: 1,
    source: { component: 'vgpu-warden' },
    ...extra,
  };
}

/** What `locks` prints for the node: the real lock rules on the snapshot's node and owner pod. */
function rowFor(node: V1Node, pods: readonly V1Pod[]): LockRow | undefined {
  const raw = node.metadata?.annotations?.[NODE_LOCK_ANNOTATION];
  const name = node.metadata?.name ?? '';
  if (raw === undefined) return undefined;
  const value = parseLockValue(raw);
  const ownerObject =
    value.kind === 'owned'
      ? pods.find((pod) => pod.metadata?.namespace === value.owner.namespace && pod.metadata.name === value.owner.name)
      : undefined;
  const owner = value.kind === 'owned' ? (ownerObject === undefined ? null : ownerPodFrom(ownerObject)) : undefined;
  return lockRowOf({
    node: name,
    resourceVersion: '1',
    raw,
    value,
    owner,
    classification: classifyLock({ lock: value, owner: owner ?? undefined, node: name, now: NOW, config: RULES }),
  });
}

/** The command's pipeline without the API: snapshot store, filter's verdicts, lock rows, explanation. */
export async function explainScenario(
  pod: V1Pod,
  nodes: readonly V1Node[],
  others: readonly V1Pod[] = [],
  events: readonly CoreV1Event[] = [],
): Promise<Explanation> {
  const pods = [pod, ...others];
  const cache = await snapshotCache(nodes, pods);
  const placement = placementFor(pod, cache, SETTINGS);
  const names = lockNodesToInspect(pod, cache, events, placement);
  const locks = names
    .map((name) => rowFor(nodes.find((node) => node.metadata?.name === name) as V1Node, pods))
    .filter((row): row is LockRow => row !== undefined);
  return explainPod({ pod, placement, events, locks, now: NOW, settings: SETTINGS });
}
