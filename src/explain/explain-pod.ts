import type { PodMutationConfig } from '../admission/pod-mutation.js';
import type { ClusterCache } from '../cluster/cluster-cache.js';
import type { LockRow } from '../lock/lock-report.js';
import { gpuRequestProblems, podGpuRequests, containerName, type ContainerGpuRequest } from '../devices/requests.js';
import type { PlacementDefaults } from '../extender/gpu-placement.js';
import { clip, LABEL_CHARS } from '../base/user-text.js';
import { bindReport } from './bind-report.js';
import {
  DEFAULT_LIMITS,
  MESSAGE_CHARS,
  VALUE_CHARS,
  type ContainerRequest,
  type ExplainLimits,
  type Explanation,
  type LockEntry,
  type PlacementReport,
  type PodSummary,
} from './explanation.js';
import { eventReport, lastBindEvent, lockWaitNode, podEvents, type EventLike } from './pod-events.js';
import { placementOf } from './placement.js';
import { verdictOf } from './verdict.js';
import { webhookReport } from './webhook-check.js';

export interface ExplainSettings {
  defaults: PlacementDefaults;
  mutation: PodMutationConfig;
}

/** The Pod fields explain reads; a client-node V1Pod or raw JSON. */
export interface PodLike {
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    annotations?: Record<string, string>;
    deletionTimestamp?: unknown;
    creationTimestamp?: unknown;
  };
  spec?: { nodeName?: string; schedulerName?: string; initContainers?: unknown[]; containers?: unknown[] };
  status?: { phase?: string };
}

function isoOf(value: unknown): string | null {
  const time = value instanceof Date ? value : typeof value === 'string' ? new Date(value) : undefined;
  return time === undefined || Number.isNaN(time.getTime()) ? null : time.toISOString();
}

function requestsOf(pod: PodLike, settings: ExplainSettings): ContainerRequest[] {
  const requests = podGpuRequests(pod, settings.defaults.requestDefaults);
  const rows: ContainerRequest[] = [];
  const add = (list: (ContainerGpuRequest | undefined)[], specs: unknown[] | undefined, init: boolean): void => {
    list.forEach((request, position) => {
      if (request === undefined) return;
      rows.push({
        container: containerName(specs?.[position] as Record<string, unknown> | undefined, position),
        init,
        gpus: request.count,
        memoryMiB: request.memoryPercentage === undefined ? request.memoryMiB : null,
        memoryPercentage: request.memoryPercentage ?? null,
        cores: request.cores,
      });
    });
  };
  add(requests.initContainers, pod.spec?.initContainers, true);
  add(requests.containers, pod.spec?.containers, false);
  return rows;
}

function podSummary(pod: PodLike, settings: ExplainSettings, limits: ExplainLimits): PodSummary {
  const metadata = pod.metadata ?? {};
  const problems = gpuRequestProblems(pod, settings.defaults.requestDefaults);
  const node = pod.spec?.nodeName;
  return {
    namespace: clip(metadata.namespace ?? '', LABEL_CHARS),
    name: clip(metadata.name ?? ''),
    uid: metadata.uid ?? null,
    phase: pod.status?.phase ?? null,
    schedulerName: pod.spec?.schedulerName === undefined ? null : clip(pod.spec.schedulerName),
    node: node === undefined || node === '' ? null : clip(node),
    deleting: metadata.deletionTimestamp !== undefined && metadata.deletionTimestamp !== null,
    createdAt: isoOf(metadata.creationTimestamp),
    requests: requestsOf(pod, settings),
    requestProblems: problems.slice(0, limits.problems).map((problem) => clip(problem, MESSAGE_CHARS)),
  };
}

/** Is the pod bound to a node (then there is nothing left for filter to decide)? */
function isBound(pod: PodLike): boolean {
  return pod.spec?.nodeName !== undefined && pod.spec.nodeName !== '';
}

/**
 * Filter's verdicts for the pod on every node of the store; null when it is bound or asks for no
 * GPU (kube-scheduler never calls the extender's filter for it then).
 */
export function placementFor(
  pod: PodLike,
  cache: ClusterCache,
  settings: ExplainSettings,
  limits: ExplainLimits = DEFAULT_LIMITS,
): PlacementReport | null {
  if (isBound(pod)) return null;
  const summary = podSummary(pod, settings, limits);
  if (summary.requests.length === 0 && summary.requestProblems.length === 0) return null;
  return placementOf(
    pod,
    { namespace: pod.metadata?.namespace ?? '', name: pod.metadata?.name ?? '' },
    cache,
    settings.defaults,
    limits,
  );
}

/**
 * The nodes whose lock explain inspects (as `vgpu-warden locks` does): those whose lock names this
 * pod, the one its latest NodeLockWait event names, and the first locked nodes it fits on. Only
 * nodes that carry a lock in the store; a handful at most.
 */
export function lockNodesToInspect(
  pod: PodLike,
  cache: ClusterCache,
  events: readonly EventLike[],
  placement: PlacementReport | null,
): string[] {
  const namespace = pod.metadata?.namespace ?? '';
  const name = pod.metadata?.name ?? '';
  const nodes = new Set(cache.nodesLockedBy(namespace, name));
  const node = pod.spec?.nodeName;
  if (node !== undefined && node !== '' && cache.lockOf(node) !== undefined) nodes.add(node);
  const waited = isBound(pod) ? undefined : lockWaitNode(lastBindEvent(podEvents(events, pod.metadata?.uid)));
  if (waited !== undefined && cache.lockOf(waited) !== undefined) nodes.add(waited);
  for (const fitting of placement?.lockedFitting ?? []) nodes.add(fitting);
  return [...nodes].sort();
}

function lockEntries(pod: PodLike, locks: readonly LockRow[], waited: string | undefined): LockEntry[] {
  const namespace = pod.metadata?.namespace ?? '';
  const name = pod.metadata?.name ?? '';
  return locks.map((row) => {
    const mine = row.holder?.namespace === namespace && row.holder.name === name;
    const relation: LockEntry['relation'] = mine
      ? 'held-by-this-pod'
      : row.node === waited
        ? 'waited-for'
        : 'on-a-fitting-node';
    return {
      ...row,
      node: clip(row.node),
      value: clip(row.value, VALUE_CHARS),
      ...(row.problem === undefined ? {} : { problem: clip(row.problem, MESSAGE_CHARS) }),
      ...(row.error === undefined ? {} : { error: clip(row.error, MESSAGE_CHARS) }),
      relation,
    };
  });
}

export interface ExplainInput {
  pod: PodLike;
  /** placementFor(pod, ...) over the same snapshot. */
  placement: PlacementReport | null;
  /** The pod's Events, in any order. */
  events: readonly EventLike[];
  /** The locks of lockNodesToInspect, as `vgpu-warden locks` rows them (lockRowOf). */
  locks: readonly LockRow[];
  now: Date;
  settings: ExplainSettings;
  limits?: ExplainLimits;
}

/** Everything explain says about the pod, from data already read. Pure. */
export function explainPod(input: ExplainInput): Explanation {
  const { pod, now, settings } = input;
  const limits = input.limits ?? DEFAULT_LIMITS;
  const sorted = podEvents(input.events, pod.metadata?.uid);
  const lastBind = lastBindEvent(sorted);
  const waited = isBound(pod) ? undefined : lockWaitNode(lastBind);
  const explanation: Omit<Explanation, 'verdict' | 'situation'> = {
    pod: podSummary(pod, settings, limits),
    webhook: webhookReport(pod, settings.mutation, limits.missing),
    placement: input.placement,
    locks: lockEntries(pod, input.locks, waited),
    bind: bindReport(pod),
    events: eventReport(sorted, now, limits.events),
  };
  const { verdict, situation } = verdictOf(explanation, {
    ourScheduler: settings.mutation.schedulerName,
    lastBindEvent:
      lastBind === undefined
        ? undefined
        : { reason: lastBind.reason ?? '', message: clip(lastBind.message ?? '', MESSAGE_CHARS) },
  });
  return { verdict, situation, ...explanation };
}
