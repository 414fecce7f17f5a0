import type { ClusterCache } from '../cluster/cluster-cache.js';
import { fitPod, prepareFit, type FitResult, type GpuPolicy, type PreparedFit } from '../devices/fit.js';
import { hasGpuRequest, podGpuRequests, type PodGpuRequests, type RequestDefaults } from '../devices/requests.js';
import { nodeScore, policiesFor, type NodePolicy } from '../devices/score.js';

export interface PlacementDefaults {
  nodePolicy: NodePolicy;
  gpuPolicy: GpuPolicy;
  requestDefaults: RequestDefaults;
}

export interface PodView {
  uid: string | undefined;
  annotations: Record<string, string>;
  requests: PodGpuRequests;
  policies: { node: NodePolicy; gpu: GpuPolicy };
  wantsGpu: boolean;
  /** The annotations a fit reads, parsed once for all the nodes this pod is fitted onto. */
  fit: PreparedFit;
}

export type NodeEvaluation = (FitResult & { node: string }) | { node: string; fits: false; reason: string; reasonCounts: Record<string, number> };

interface PodLike {
  metadata?: { uid?: string; annotations?: Record<string, string> };
}

/** What the scheduler needs to know about a pod: its GPU requests and placement policies. */
export function viewPod(pod: unknown, defaults: PlacementDefaults): PodView {
  const metadata = (pod as PodLike).metadata ?? {};
  const annotations = metadata.annotations ?? {};
  const requests = podGpuRequests(pod, defaults.requestDefaults);
  return {
    uid: metadata.uid,
    annotations,
    requests,
    policies: policiesFor(annotations, { node: defaults.nodePolicy, gpu: defaults.gpuPolicy }),
    wantsGpu: hasGpuRequest(requests),
    fit: prepareFit(annotations),
  };
}

/** Fits the pod onto one node against the cache's usage (bound plus assumed pods, minus this pod). */
export function evaluateNode(cache: ClusterCache, node: string, pod: PodView): NodeEvaluation {
  const inventory = cache.inventory(node);
  if (inventory === undefined) return { node, fits: false, reason: 'node unregistered', reasonCounts: { NodeUnregistered: 1 } };
  if (inventory.devices.length === 0) {
    return { node, fits: false, reason: `no GPU inventory on node (${inventory.problems.join('; ') || 'hami.io/node-nvidia-register missing'})`, reasonCounts: { NoGpuInventory: 1 } };
  }
  const result = fitPod({
    devices: inventory.devices,
    usage: cache.usageOn(node, pod.uid),
    requests: pod.requests,
    podAnnotations: pod.annotations,
    gpuPolicy: pod.policies.gpu,
    prepared: pod.fit,
  });
  return { ...result, node };
}

/** 0..10 by the node policy for nodes where the pod fits, 0 elsewhere. */
export function scoreNode(cache: ClusterCache, evaluation: NodeEvaluation, pod: PodView): number {
  if (!evaluation.fits) return 0;
  const inventory = cache.inventory(evaluation.node);
  return inventory === undefined ? 0 : nodeScore(inventory.devices, evaluation.usageAfter, pod.policies.node);
}

/** "2 nodes CardInsufficientMemory(n1, n2); 1 nodes node unregistered(n3)" for FilteringFailed. */
export function summarizeFailures(failed: Record<string, string>): string {
  const byReason = new Map<string, string[]>();
  for (const [node, reason] of Object.entries(failed)) {
    for (const part of reason.split(', ')) {
      const name = part.replace(/^\d+\/\d+ /, '');
      byReason.set(name, [...(byReason.get(name) ?? []), node]);
    }
  }
  return [...byReason.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([reason, nodes]) => `${nodes.length} nodes ${reason}(${nodes.sort().join(', ')})`)
    .join('; ');
}
