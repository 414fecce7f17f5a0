import type { ClusterCache } from '../cluster/cluster-cache.js';
import { fitPod, prepareFit, type FitResult, type PreparedFit } from '../devices/fit.js';
import { asChain, policiesFor, type GpuPolicy, type NodePolicy, type PodPolicies } from '../devices/gpu-policy.js';
import { hasGpuRequest, podGpuRequests, type PodGpuRequests, type RequestDefaults } from '../devices/requests.js';
import { nodeUtilization, scoreOfUtilization } from '../devices/score.js';
import type { QuotaBudget } from '../devices/gpu-quota.js';
import { clip, LABEL_CHARS } from '../base/user-text.js';
import type { GpuUse } from '../devices/usage.js';
import { NODE_REGISTER_ANNOTATION } from '../hami/wire.js';

export interface PlacementDefaults {
  nodePolicy: NodePolicy;
  gpuPolicy: GpuPolicy;
  requestDefaults: RequestDefaults;
}

export interface PodView {
  uid: string | undefined;
  /** Whose GPU quota the pod counts against. */
  namespace: string;
  /**
   * The namespace's GPU quota as the store had it when the view was made: one budget for every
   * node one call fits the pod onto (and the key its cached verdicts are filed under).
   */
  quota: QuotaBudget | undefined;
  annotations: Record<string, string>;
  requests: PodGpuRequests;
  policies: PodPolicies;
  wantsGpu: boolean;
  /** The annotations a fit reads, parsed once for all the nodes this pod is fitted onto. */
  fit: PreparedFit;
  /**
   * Why no node can take the pod whatever its state: a policy we do not know or do not implement,
   * an invalid numa-bind or scoring weights, MIG. Filter answers with an Error naming it.
   */
  problem: string | undefined;
}

/** The reason code of a pod-level problem, on every node, where a caller fits node by node. */
export const POD_UNSUPPORTED = 'PodSchedulingUnsupported';

export type NodeEvaluation =
  (FitResult & { node: string }) | { node: string; fits: false; reason: string; reasonCounts: Record<string, number> };

interface PodLike {
  metadata?: { uid?: string; namespace?: string; annotations?: Record<string, string> };
}

/** The state store as a fit reads a node (ClusterCache is one): inventory, plugin liveness, usage. */
export type PlacementStore = Pick<ClusterCache, 'inventory' | 'gpuLiveness' | 'usageOn'>;

/** Where a pod's namespace GPU quota comes from (the state store). */
export interface QuotaLookup {
  /** `pod` decides which of the namespace's ResourceQuotas count it (their scopes). */
  quotaBudget(namespace: string, excludeUid?: string, pod?: unknown): QuotaBudget | undefined;
}

/**
 * What the scheduler needs to know about a pod: its GPU requests, placement policies and its
 * namespace's GPU quota now (`quotas`; a bind reads it again after waiting for the lock).
 */
export function viewPod(pod: unknown, defaults: PlacementDefaults, quotas: QuotaLookup): PodView {
  const metadata = (pod as PodLike).metadata ?? {};
  const annotations = metadata.annotations ?? {};
  const requests = podGpuRequests(pod, defaults.requestDefaults);
  const policies = policiesFor(annotations, { node: defaults.nodePolicy, gpu: defaults.gpuPolicy });
  const fit = prepareFit(annotations);
  const namespace = metadata.namespace ?? 'default';
  return {
    uid: metadata.uid,
    namespace,
    quota: quotas.quotaBudget(namespace, metadata.uid, pod),
    annotations,
    requests,
    policies: 'error' in policies ? { node: defaults.nodePolicy, gpu: asChain(defaults.gpuPolicy) } : policies,
    wantsGpu: hasGpuRequest(requests),
    fit,
    problem: 'error' in policies ? policies.error : 'error' in fit ? fit.error : undefined,
  };
}

/** The reason for a node the state store does not know. */
export const NODE_UNREGISTERED = 'node unregistered';

/**
 * Fits the pod onto one node against the cache's usage (bound plus assumed pods, minus this pod)
 * and its namespace's GPU quota. `usage` replaces the store's usage of the node (a bind that read
 * the node's pods from the API).
 */
export function evaluateNode(
  cache: PlacementStore,
  node: string,
  pod: PodView,
  usage?: ReadonlyMap<string, GpuUse>,
): NodeEvaluation {
  const inventory = cache.inventory(node);
  if (inventory === undefined)
    return { node, fits: false, reason: NODE_UNREGISTERED, reasonCounts: { NodeUnregistered: 1 } };
  // Bind refits through here too, so a pod filter refuses can never be bound either.
  if (pod.problem !== undefined)
    return { node, fits: false, reason: pod.problem, reasonCounts: { [POD_UNSUPPORTED]: 1 } };
  if (inventory.devices.length === 0) {
    // The problems quote the node's annotations, which a device plugin or a node patch wrote.
    const why = clip(inventory.problems.join('; '), REASON_CHARS) || `${NODE_REGISTER_ANNOTATION} missing`;
    return { node, fits: false, reason: `no GPU inventory on node (${why})`, reasonCounts: { NoGpuInventory: 1 } };
  }
  // A node whose device plugin stopped reporting keeps its register annotation: without this it
  // would attract pods that kubelet rejects, in a loop (and be the binpack favourite).
  const liveness = cache.gpuLiveness(node);
  if (!liveness.ready)
    return { node, fits: false, reason: liveness.reason, reasonCounts: { DevicePluginNotReporting: 1 } };
  const result = fitPod({
    devices: inventory.devices,
    usage: usage ?? cache.usageOn(node, pod.uid),
    requests: pod.requests,
    podAnnotations: pod.annotations,
    gpuPolicy: pod.policies.gpu,
    ...(inventory.linkScores === undefined ? {} : { linkScores: inventory.linkScores }),
    prepared: pod.fit,
    quota: pod.quota,
  });
  return { ...result, node };
}

/**
 * Where the pod fits: how full the node is with the pod on it (0..1) and the node-policy score
 * (0..10) from it; zeros elsewhere.
 */
export function scoreNode(
  cache: Pick<ClusterCache, 'inventory'>,
  evaluation: NodeEvaluation,
  pod: PodView,
): { score: number; utilization: number } {
  const inventory = evaluation.fits ? cache.inventory(evaluation.node) : undefined;
  if (!evaluation.fits || inventory === undefined) return { score: 0, utilization: 0 };
  const utilization = nodeUtilization(inventory.devices, evaluation.usageAfter);
  return { score: scoreOfUtilization(utilization, pod.policies.node), utilization };
}

/** How much of a failure summary is spelled out; the rest is counted. */
export interface SummaryLimits {
  /** Reasons listed, most frequent first. */
  reasons: number;
  /** Node names shown per reason (the first in name order). */
  names: number;
}

const SUMMARY_LIMITS: SummaryLimits = { reasons: 8, names: 3 };
/** A reason may carry text from a node's annotations (inventory problems): keep it short. */
const REASON_CHARS = 160;

/** Keeps `sample` the `limit` smallest names seen: linear in the nodes, whatever their number. */
function keepSmallest(sample: string[], name: string, limit: number): void {
  if (sample.length === limit && name >= (sample[limit - 1] ?? '')) return;
  let index = sample.length;
  while (index > 0 && (sample[index - 1] ?? '') > name) index -= 1;
  sample.splice(index, 0, name);
  if (sample.length > limit) sample.pop();
}

/**
 * "2 nodes CardInsufficientMemory (n1, n2); 1 node node unregistered (n3)" for FilteringFailed,
 * built one failed node at a time. Linear in the failed nodes and bounded in size: per reason the
 * number of nodes and at most `limits.names` of their names, at most `limits.reasons` reasons,
 * names and reasons clipped. A filter over 100,000 nodes (or one where every node fails for its
 * own reason) gives one short line.
 */
export class FailureSummary {
  private readonly byReason = new Map<string, { count: number; sample: string[] }>();
  private lastReason: { text: string; names: string[] } | undefined;

  constructor(private readonly limits: SummaryLimits = SUMMARY_LIMITS) {}

  add(node: string, reason: string): void {
    const shown = clip(node, LABEL_CHARS);
    for (const name of this.reasonsIn(reason)) {
      let entry = this.byReason.get(name);
      if (entry === undefined) {
        entry = { count: 0, sample: [] };
        this.byReason.set(name, entry);
      }
      entry.count += 1;
      keepSmallest(entry.sample, shown, this.limits.names);
    }
  }

  /** The reason names in one node's reason; the last one is kept, as neighbours often share it. */
  private reasonsIn(reason: string): string[] {
    if (reason === this.lastReason?.text) return this.lastReason.names;
    // Fit reasons are "n/m Reason" lists; any other reason is one (it may hold commas itself).
    const names = (/^\d+\/\d+ /.test(reason) ? reason.split(', ') : [reason]).map((part) =>
      clip(part.replace(/^\d+\/\d+ /, ''), REASON_CHARS),
    );
    this.lastReason = { text: reason, names };
    return names;
  }

  text(): string {
    const ranked = [...this.byReason.entries()].sort(
      ([a, x], [b, y]) => y.count - x.count || (a < b ? -1 : a > b ? 1 : 0),
    );
    const shown = ranked.slice(0, this.limits.reasons).map(([reason, { count, sample }]) => {
      const more = count > sample.length ? ', …' : '';
      return `${count} ${count === 1 ? 'node' : 'nodes'} ${reason} (${sample.join(', ')}${more})`;
    });
    const hidden = ranked.length - shown.length;
    return hidden > 0 ? `${shown.join('; ')}; and ${hidden} more reasons` : shown.join('; ');
  }
}

/** The summary of a whole FailedNodes map (see FailureSummary). */
export function summarizeFailures(
  failed: Readonly<Record<string, string>> | ReadonlyMap<string, string>,
  limits: SummaryLimits = SUMMARY_LIMITS,
): string {
  const summary = new FailureSummary(limits);
  const entries: Iterable<[string, string]> =
    failed instanceof Map
      ? (failed as ReadonlyMap<string, string>)
      : Object.entries(failed as Readonly<Record<string, string>>);
  for (const [node, reason] of entries) summary.add(node, reason);
  return summary.text();
}
