import { quoted } from '../base/user-text.js';
import { GPU_POLICY_ANNOTATION, NODE_POLICY_ANNOTATION } from '../hami/wire.js';

/**
 * The GPU and node scheduling policies a pod may name (hami-wire-contract.md §3.4). Pure.
 *
 * HAMi v2.10 reads `hami.io/gpu-scheduler-policy` as a comma-separated ordered list
 * (pkg/util/util.go IsValidGPUSchedulerPolicy, PolicyContains; pkg/scheduler/policy/gpu_policy.go
 * gpuSortKeyChain): `binpack`, `spread` and `numa` are sort keys compared in the order written,
 * `mutex` and `topology-aware` are filters applied in the NVIDIA Fit (pkg/device/nvidia/device.go
 * Fit: isMutex, needTopology). A chain naming no sort key sorts as spread (lessByChain).
 *
 * HAMi logs and ignores a value it does not know and keeps its default; we refuse the pod instead,
 * naming the value, so nobody gets shared GPUs after asking for something else.
 */
export type GpuSortKey = 'binpack' | 'spread' | 'numa';
/** The simple form a server default takes (GPU_SCHEDULER_POLICY). */
export type GpuPolicy = 'binpack' | 'spread';
export type NodePolicy = 'binpack' | 'spread';

export interface GpuPolicyChain {
  /** Sort keys in the order written, each once; empty sorts as spread. */
  keys: readonly GpuSortKey[];
  /** `mutex`: a GPU with any user is unavailable (ExclusiveDeviceAllocateConflict). */
  mutex: boolean;
  /** `topology-aware`: among the fitting GPUs, the set with the best links (hami.io/node-nvidia-score). */
  topologyAware: boolean;
}

export const GPU_POLICY_NAMES = ['binpack', 'spread', 'numa', 'mutex', 'topology-aware'] as const;
const SORT_KEYS = new Set<string>(['binpack', 'spread', 'numa']);

/** A string default or an already parsed chain, as a chain. */
export function asChain(policy: GpuPolicy | GpuPolicyChain): GpuPolicyChain {
  return typeof policy === 'string' ? { keys: [policy], mutex: false, topologyAware: false } : policy;
}

/**
 * `binpack,numa`, ` mutex , topology-aware` …: entries trimmed, names exact (HAMi compares them
 * case-sensitively). Any entry that is not one of HAMi's five names is an error naming it; a blank
 * value names no policy at all and leaves the default, as in HAMi.
 */
export function parseGpuPolicy(value: string): GpuPolicyChain | { error: string } | undefined {
  if (value.trim() === '') return undefined;
  const keys: GpuSortKey[] = [];
  let mutex = false;
  let topologyAware = false;
  for (const entry of value.split(',').map((part) => part.trim())) {
    if (SORT_KEYS.has(entry)) {
      const key = entry as GpuSortKey;
      if (!keys.includes(key)) keys.push(key);
    } else if (entry === 'mutex') {
      mutex = true;
    } else if (entry === 'topology-aware') {
      topologyAware = true;
    } else {
      return {
        error:
          `unsupported ${GPU_POLICY_ANNOTATION} ${quoted(value)}: unknown policy ${quoted(entry)} (HAMi's ` +
          `policies: ${GPU_POLICY_NAMES.join(', ')}, comma-separated)`,
      };
    }
  }
  return { keys, mutex, topologyAware };
}

/** HAMi's node policy has no chain form (IsValidNodeSchedulerPolicy): one name, trimmed. */
export function parseNodePolicy(value: string): NodePolicy | { error: string } | undefined {
  const name = value.trim();
  if (name === '') return undefined;
  if (name === 'binpack' || name === 'spread') return name;
  return { error: `unsupported ${NODE_POLICY_ANNOTATION} ${quoted(value)}: expected binpack or spread` };
}

export interface PodPolicies {
  node: NodePolicy;
  gpu: GpuPolicyChain;
}

/** The pod's node and GPU policies: its annotations over the server's defaults, or why they are refused. */
export function policiesFor(
  podAnnotations: Readonly<Record<string, string>>,
  defaults: { node: NodePolicy; gpu: GpuPolicy | GpuPolicyChain },
): PodPolicies | { error: string } {
  const nodeValue = podAnnotations[NODE_POLICY_ANNOTATION];
  const gpuValue = podAnnotations[GPU_POLICY_ANNOTATION];
  const node = nodeValue === undefined ? undefined : parseNodePolicy(nodeValue);
  if (typeof node === 'object') return node;
  const gpu = gpuValue === undefined ? undefined : parseGpuPolicy(gpuValue);
  if (gpu !== undefined && 'error' in gpu) return gpu;
  return { node: node ?? defaults.node, gpu: gpu ?? asChain(defaults.gpu) };
}
