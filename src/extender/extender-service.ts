import type { ClusterCache } from '../cluster/cluster-cache.js';
import { gpuRequestProblems, namesGpuResource } from '../devices/requests.js';
import { isOwnedBy, parseLockValue } from '../lock/lock-value.js';
import type { EventRecorder } from '../telemetry/events.js';
import type { Binder } from './binder.js';
import { evaluateNode, scoreNode, summarizeFailures, viewPod, type NodeEvaluation, type PlacementDefaults, type PodView } from './gpu-placement.js';
import { filterResult, type BindingArgs, type ExtenderBindingResult, type ExtenderFilterResult, type FilterArgs, type HostPriority } from './protocol.js';

export interface ExtenderServiceDeps {
  cache: ClusterCache;
  binder: Binder;
  events: EventRecorder;
  defaults: PlacementDefaults;
  /** How long filter waits for the first cache sync before answering with an Error. */
  syncWaitMs: number;
}

interface PodIdentity {
  metadata?: { name?: string; namespace?: string; uid?: string };
}

/** Filter's evaluations of one pod, each valid while its node's generation holds. */
interface RememberedFilter {
  evaluations: Map<string, { generation: number | undefined; evaluation: NodeEvaluation }>;
}

/** Pods whose filter results are kept for the prioritize call that follows. */
const REMEMBERED_PODS = 64;
/** Pod shapes whose evaluation is kept per node (replicas of one workload share a shape). */
const SHAPES_PER_NODE = 8;

/** Everything about a pod that a fit depends on, as one string; pods with equal shapes fit alike. */
function shapeOf(pod: PodView): string {
  const relevant = Object.entries(pod.annotations).filter(([key]) => key.startsWith('nvidia.com/') || key.startsWith('hami.io/')).sort(([a], [b]) => a.localeCompare(b));
  return JSON.stringify([pod.requests, pod.policies, relevant]);
}

/**
 * filter, prioritize and bind over validated arguments. Filter and prioritize have no side effects
 * (kube-scheduler may drop their results); all writes happen in bind. Both read the state store:
 * a store that is not synced or has gone stale answers filter with an Error rather than place pods
 * against a view that may miss the GPUs running pods use.
 */
export class ExtenderService {
  private readonly remembered = new Map<string, RememberedFilter>();
  /** node → its generation and the evaluations of recent pod shapes at that generation. */
  private readonly byShape = new Map<string, { generation: number; evaluations: Map<string, NodeEvaluation> }>();

  constructor(private readonly deps: ExtenderServiceDeps) {}

  async filter(args: FilterArgs): Promise<ExtenderFilterResult> {
    const { cache } = this.deps;
    if (!(await cache.waitForSync(this.deps.syncWaitMs))) return filterResult.error('vgpu-warden cluster state not synced yet');
    const problems = cache.problems();
    if (problems.length > 0) return filterResult.error(`vgpu-warden cluster state is stale: ${problems.join('; ')}`);
    if (namesGpuResource(args.pod)) {
      const unreadable = gpuRequestProblems(args.pod);
      if (unreadable.length > 0) return filterResult.error(`unreadable GPU request: ${unreadable.slice(0, 3).join('; ')}`);
    }
    const pod = viewPod(args.pod, this.deps.defaults);
    if (!pod.wantsGpu) return filterResult.passed(args.nodeNames, {});
    const passed: string[] = [];
    const failed: Record<string, string> = {};
    const remembered: RememberedFilter = { evaluations: new Map() };
    const shape = shapeOf(pod);
    for (const node of args.nodeNames) {
      const evaluation = this.evaluate(node, pod, shape);
      remembered.evaluations.set(node, { generation: cache.nodeGeneration(node), evaluation });
      if (evaluation.fits) passed.push(node);
      else failed[node] = evaluation.reason;
    }
    this.remember(pod, remembered);
    if (passed.length === 0) {
      const identity = (args.pod as PodIdentity).metadata ?? {};
      this.deps.events.record(
        { kind: 'Pod', name: identity.name ?? '', namespace: identity.namespace ?? 'default', ...(identity.uid ? { uid: identity.uid } : {}) },
        'Warning',
        'FilteringFailed',
        `no available node, ${args.nodeNames.length} nodes do not meet: ${summarizeFailures(failed)}`,
      );
    }
    return filterResult.passed(passed, failed);
  }

  /**
   * 1..10 by the node policy where the pod fits and the node's lock is free; 0 where another pod
   * holds the lock (a bind there would queue behind it) or the pod does not fit. Reuses filter's
   * evaluation of a node when the node has not changed since.
   */
  async prioritize(args: FilterArgs): Promise<HostPriority[]> {
    const { cache } = this.deps;
    await cache.waitForSync(this.deps.syncWaitMs);
    const pod = viewPod(args.pod, this.deps.defaults);
    if (!pod.wantsGpu) return args.nodeNames.map((node) => ({ Host: node, Score: 0 }));
    const remembered = pod.uid === undefined ? undefined : this.remembered.get(pod.uid);
    const identity = (args.pod as PodIdentity).metadata ?? {};
    return args.nodeNames.map((node) => {
      const known = remembered?.evaluations.get(node);
      const evaluation = known !== undefined && known.generation === cache.nodeGeneration(node) ? known.evaluation : evaluateNode(cache, node, pod);
      if (!evaluation.fits) return { Host: node, Score: 0 };
      const lock = cache.lockOf(node);
      const lockedByOther = lock !== undefined && !isOwnedBy(parseLockValue(lock.raw), { namespace: identity.namespace ?? '', name: identity.name ?? '' });
      if (lockedByOther) return { Host: node, Score: 0 };
      return { Host: node, Score: 1 + Math.round(scoreNode(cache, evaluation, pod) * 0.9) };
    });
  }

  async bind(args: BindingArgs): Promise<ExtenderBindingResult> {
    const result = await this.deps.binder.bind(args);
    return { Error: result.error ?? '' };
  }

  /** The pod's fit on the node, from the shape cache when the node has not changed since. */
  private evaluate(node: string, pod: PodView, shape: string): NodeEvaluation {
    const { cache } = this.deps;
    const generation = cache.nodeGeneration(node);
    // A pod already accounted on the node (a retried placement) is fitted without its own usage.
    if (generation === undefined || (pod.uid !== undefined && cache.usage.isOn(node, pod.uid))) return evaluateNode(cache, node, pod);
    let entry = this.byShape.get(node);
    if (entry?.generation !== generation) {
      entry = { generation, evaluations: new Map() };
      this.byShape.set(node, entry);
    }
    const known = entry.evaluations.get(shape);
    if (known !== undefined) return known;
    const evaluation = evaluateNode(cache, node, pod);
    // evaluateNode may drop an expired assumption and so move the generation: cache only if it held.
    if (cache.nodeGeneration(node) !== generation) return evaluation;
    if (entry.evaluations.size >= SHAPES_PER_NODE) entry.evaluations.delete(entry.evaluations.keys().next().value ?? '');
    entry.evaluations.set(shape, evaluation);
    return evaluation;
  }

  private remember(pod: PodView, filter: RememberedFilter): void {
    if (pod.uid === undefined) return;
    this.remembered.delete(pod.uid);
    this.remembered.set(pod.uid, filter);
    for (const oldest of this.remembered.keys()) {
      if (this.remembered.size <= REMEMBERED_PODS) break;
      this.remembered.delete(oldest);
    }
  }
}
