/** What the checker knows of the cluster at one instant, read from the API by the observer. */
export interface ObservedPod {
  namespace: string;
  name: string;
  uid: string;
  nodeName: string | undefined;
  phase: string | undefined;
  deleting: boolean;
  annotations: Readonly<Record<string, string>>;
  /** GPUs the pod asks for in total (0 for a non-GPU pod). */
  gpuCount: number;
}

export interface ObservedGpu {
  uuid: string;
  memoryMiB: number;
  cores: number;
  slots: number;
}

export interface ObservedNode {
  name: string;
  gpus: readonly ObservedGpu[];
  lock: string | undefined;
}

/** What the device-plugin stand-in did when kubelet called Allocate for a pod. */
export interface AllocationRecord {
  node: string;
  /** The pod kubelet admitted and called Allocate for (unknown on real nodes: the RPC does not say). */
  admitted: { namespace: string; name: string; uid: string } | undefined;
  /** The pod whose devices the plugin handed over (resolved from the node lock), if any. */
  resolvedTo: { namespace: string; name: string; uid: string } | undefined;
  /** The node lock value the plugin read when it resolved the pod, if there was one. */
  lock?: string;
  ok: boolean;
  at: number;
}

export interface Snapshot {
  at: number;
  pods: readonly ObservedPod[];
  nodes: readonly ObservedNode[];
}

export const podKey = (pod: { namespace: string; name: string }): string => `${pod.namespace}/${pod.name}`;

export function isTerminal(pod: ObservedPod): boolean {
  return pod.phase === 'Succeeded' || pod.phase === 'Failed';
}
