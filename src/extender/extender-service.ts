import type { ClusterCache } from '../cluster/cluster-cache.js';
import type { EventRecorder } from '../telemetry/events.js';
import type { Binder } from './binder.js';
import { evaluateNode, scoreNode, summarizeFailures, viewPod, type PlacementDefaults } from './gpu-placement.js';
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

/**
 * filter, prioritize and bind over validated arguments. Filter and prioritize have no side effects
 * (kube-scheduler may drop their results); all writes happen in bind.
 */
export class ExtenderService {
  constructor(private readonly deps: ExtenderServiceDeps) {}

  async filter(args: FilterArgs): Promise<ExtenderFilterResult> {
    if (!(await this.deps.cache.waitForSync(this.deps.syncWaitMs))) return filterResult.error('vgpu-warden cluster cache not synced yet');
    const pod = viewPod(args.pod, this.deps.defaults);
    if (!pod.wantsGpu) return filterResult.passed(args.nodeNames, {});
    const passed: string[] = [];
    const failed: Record<string, string> = {};
    for (const node of args.nodeNames) {
      const evaluation = evaluateNode(this.deps.cache, node, pod);
      if (evaluation.fits) passed.push(node);
      else failed[node] = evaluation.reason;
    }
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

  async prioritize(args: FilterArgs): Promise<HostPriority[]> {
    await this.deps.cache.waitForSync(this.deps.syncWaitMs);
    const pod = viewPod(args.pod, this.deps.defaults);
    return args.nodeNames.map((node) => ({ Host: node, Score: pod.wantsGpu ? scoreNode(this.deps.cache, evaluateNode(this.deps.cache, node, pod), pod) : 0 }));
  }

  async bind(args: BindingArgs): Promise<ExtenderBindingResult> {
    const result = await this.deps.binder.bind(args);
    return { Error: result.error ?? '' };
  }
}
