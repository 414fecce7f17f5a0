import type { ClusterCache } from '../cluster/cluster-cache.js';
import { podOverQuota } from '../devices/fit.js';
import { budgetKey } from '../devices/gpu-quota.js';
import type { GpuUse } from '../devices/usage.js';
import { describeProblems, gpuRequestProblems, namesGpuResource } from '../devices/requests.js';
import type { EventRecorder, EventTarget } from '../telemetry/events.js';
import { forEachInSlices, mapInSlices } from '../base/time-slices.js';
import { until } from '../base/abort.js';
import type { Binder } from './binder.js';
import {
  evaluateNode,
  FailureSummary,
  NODE_UNREGISTERED,
  scoreNode,
  viewPod,
  type PlacementDefaults,
  type PlacementStore,
  type PodView,
} from './gpu-placement.js';
import type { RefusalRequeue, RefusedPod } from './refusal-requeue.js';
import {
  filterResult,
  type BindingArgs,
  type ExtenderBindingResult,
  type ExtenderFilterResult,
  type FilterArgs,
  type HostPriority,
} from './protocol.js';
import { NodeShapeCache, type ShapeValues } from './node-shape-cache.js';
import { NOT_A_CANDIDATE, packingTargets } from './packing-plan.js';
import { SpreadOffers, spreadTarget } from './spread-target.js';
import type { PendingBursts } from './pending-bursts.js';
import { burstKeyOf, shapeOf } from './pod-shape.js';

/**
 * The state store as filter and prioritize read it (ClusterCache is one): sync and staleness, node
 * generations and fits, quota budgets, locks, and the pods binds have assumed. Read only.
 */
export type ExtenderStore = PlacementStore &
  Pick<
    ClusterCache,
    | 'waitForSync'
    | 'problems'
    | 'quotaBudget'
    | 'nodeGeneration'
    | 'nodeCount'
    | 'onNodeChange'
    | 'lockOf'
    | 'lockHeldBy'
    | 'isAssumed'
    | 'nodesAccounting'
  >;

export interface ExtenderServiceDeps {
  cache: ExtenderStore;
  binder: Binder;
  events: EventRecorder;
  defaults: PlacementDefaults;
  /** How long filter waits for the first cache sync before answering with an Error. */
  syncWaitMs: number;
  /**
   * How long a filter that placed the pod nowhere waits for nodes kube-scheduler named but the
   * store has not seen yet (default UNSEEN_NODE_WAIT_MS).
   */
  unseenNodeWaitMs?: number;
  /** Requeues pods refused on every node once a refusing node changes (see refusal-requeue.ts). */
  refusals?: RefusalRequeue;
  /**
   * GPU pods still waiting for a node, by burst: binpack's packing plan is sized by them. Without
   * it every pod is taken for a burst of one (the fullest node that fits wins).
   */
  pending?: PendingBursts;
  /** How old a lock is (binpack's plan leaves out nodes whose lock is stuck); Date.now by default. */
  clock?: () => number;
  /** HAMi's FilteringSucceed Event on every filter that passes a node (SUCCESS_EVENTS); off by default. */
  successEvents?: boolean;
}

/**
 * kube-scheduler's node informer can be ahead of the store's (a node just created, our watch event
 * not here yet). A short wait covers the usual lag; past it filter answers an Error, retried on
 * kube-scheduler's backoff, because a refusal node by node would be retried only on the next
 * cluster event (kubernetes#122019), which on a quiet cluster may be minutes away.
 */
export const UNSEEN_NODE_WAIT_MS = 1_000;

/** What one pass over the node names found. */
interface Placement {
  passed: string[];
  failed: Map<string, string>;
  /** The generation each failed node was judged at (the refusal requeue watches it move). */
  failedAt: Map<string, number | undefined>;
  summary: FailureSummary;
  remembered: RememberedFilter;
  /** Names the store has no node for at all (not merely no GPU inventory). */
  unseen: string[];
  /** How many nodes fit, when `passed` holds only the best scored of them. */
  fitting?: number;
}

interface PodIdentity {
  metadata?: { name?: string; namespace?: string; uid?: string };
}

/**
 * What filter and prioritize need of a fit: whether it fits, and the node-policy score (0..10) and
 * how full the node would be with the pod on it (0..1), or why not. Kept instead of the whole
 * evaluation (allocation, usage after) so that the caches hold a few numbers per node, not objects
 * that live just long enough to be promoted and then die.
 */
type NodeVerdict = { fits: true; score: number; utilization: number } | { fits: false; reason: string };

/** One verdict shared by every node name the store does not know (a filter may name 100,000). */
const UNREGISTERED: NodeVerdict = Object.freeze({ fits: false, reason: NODE_UNREGISTERED });

/**
 * Filter's verdicts for one pod, each valid while its node's generation and the pod's quota budget
 * hold: parallel arrays in the order of filter's names (no object or map entry per name), read back
 * by prioritize, whose names are filter's passed ones in the same order (RememberedLookup). Sized
 * once: at 5000 names, arrays grown by push were a third of what a filter allocated, and young
 * garbage is what stalls the event loop (each scavenge a few ms, one every few dozen pods).
 */
interface RememberedFilter {
  /** kube-scheduler's names as filter received them (not copied). */
  names: readonly string[];
  /** The node generation each verdict was made at; NaN for a node the store does not have. */
  generations: Float64Array;
  verdicts: NodeVerdict[];
  quota: string;
}

/**
 * Pods whose filter results are kept for the prioritize call that follows: without them,
 * bench:filter at 5000 nodes x 40000 pods goes from 2.3 to 189 ms p50 for replicas of one shape
 * (prioritize fits every passed node again). kube-scheduler runs one scheduling cycle at a time
 * (filter, then prioritize, of one pod), so a few are plenty; more would keep thousands of
 * evaluations alive just long enough to be promoted and then die (GC pauses).
 */
const REMEMBERED_PODS = 4;
/**
 * Shapes seen recently. A shape's per-node evaluations are cached only from its second pod on:
 * replicas share a shape, while a one-off pod's evaluations would only churn the cache.
 */
const RECENT_SHAPES = 256;
/** Pod shapes whose evaluation is kept per node (replicas of one workload share a shape). */
const CACHED_SHAPES = 8;
/**
 * A shape's per-node values are dropped once they name this many more nodes than the store has:
 * names of deleted nodes (an autoscaled cluster) would otherwise pile up for as long as the shape lives.
 */
const STALE_NODE_SLACK = 1024;

/**
 * Pods like this one counted at most when a packing plan is sized: past it the plan opens no more
 * nodes at once (binds on that many node locks already run in parallel), and counting stays cheap
 * whatever the backlog.
 */
const PENDING_COUNT_LIMIT = 1024;
/**
 * How many pods like this one a node's room is counted up to (each a fit on the node's usage after
 * the previous one). A node with more room is in the plan anyway; the limit bounds the work.
 */
const ROOM_COUNT_LIMIT = 128;
/**
 * How long another pod may hold a node's lock before binpack's plan gives up on the node for now.
 * A bind and its Allocate take well under a second; a lock held for seconds belongs to a pod whose
 * kubelet or plugin is stuck, and a plan that kept the node would queue the burst behind it until
 * each bind's lock wait ran out.
 */
const PLAN_LOCK_PATIENCE_MS = 5_000;

/**
 * The most names filter passes: kube-scheduler's own minFeasibleNodesToFind, the fewest nodes it
 * scores when a cluster has them. Enough for its plugins to break ties among equals; at 5000 nodes
 * passing every fitting one made kube-scheduler spend about 10x the CPU per pod on its own scoring.
 */
const SCORED_NODES = 100;

type LockState = 'free' | 'busy' | 'stalled';

/**
 * filter, prioritize and bind over validated arguments. Filter and prioritize have no side effects
 * (kube-scheduler may drop their results); all writes happen in bind. Both read the state store:
 * a store that is not synced or has gone stale answers filter with an Error rather than place pods
 * against a view that may miss the GPUs running pods use.
 */
export class ExtenderService {
  private readonly remembered = new Map<string, RememberedFilter>();
  /** The nodes spread recently named for a pod (spread-target.ts): the next pods of a burst go elsewhere. */
  private readonly spreadOffers = new SpreadOffers();
  /**
   * The evaluations of recent pod shapes per node, at the node's generation: without it,
   * bench:filter at 5000 nodes x 40000 pods goes from 2.3 to 87 ms p50 for replicas of one shape
   * (filter fits every node again for each replica).
   */
  private readonly byShape = new NodeShapeCache<NodeVerdict>(CACHED_SHAPES);
  private readonly recentShapes = new Set<string>();

  constructor(private readonly deps: ExtenderServiceDeps) {}

  /** `signal`: the request's; once it aborts nobody waits for the answer, and the waits and slices stop. */
  async filter(args: FilterArgs, signal?: AbortSignal): Promise<ExtenderFilterResult> {
    const { cache } = this.deps;
    const synced = await this.waitForSync(signal);
    if (!synced) return filterResult.error('vgpu-warden cluster state not synced yet');
    const problems = cache.problems();
    if (problems.length > 0) return filterResult.error(`vgpu-warden cluster state is stale: ${problems.join('; ')}`);
    if (namesGpuResource(args.pod)) {
      // The webhook's validation, again: the admission policy may be in Warn mode, the webhook may
      // have been down (it fails open), and HAMi would place such a pod as if it wanted no GPU.
      const unreadable = gpuRequestProblems(args.pod, this.deps.defaults.requestDefaults);
      if (unreadable.length > 0) return filterResult.error(`unreadable GPU request: ${describeProblems(unreadable)}`);
    }
    const pod = viewPod(args.pod, this.deps.defaults, cache);
    if (!pod.wantsGpu) return filterResult.passed(args.nodeNames);
    if (pod.problem !== undefined) {
      // A pod-level refusal (unknown policy, MIG, invalid numa-bind …): no node would do, so an
      // Error, which kube-scheduler puts in the pod's FailedScheduling event; FilteringFailed too,
      // as HAMi records its own Filter errors.
      this.recordFilteringFailed(args.pod, pod.problem);
      return filterResult.error(pod.problem);
    }
    const overQuota = podOverQuota(pod.requests, pod.quota);
    if (overQuota !== undefined) {
      // Over its namespace's GPU quota on every node: an Error too, not FailedNodes. A pod refused
      // node by node is retried on cluster events: a raised limit is none (kube-scheduler watches no
      // ResourceQuota), and on a pod ending it may retry before our store has seen it. An Error is
      // retried on its backoff (at most 10 s), so either is noticed.
      this.recordFilteringFailed(args.pod, overQuota);
      return filterResult.error(overQuota);
    }
    return this.placeAndAnswer(args, pod, signal);
  }

  /** filter's placement of a pod that wants GPUs, its verdict told to the refusal requeue and Events. */
  private async placeAndAnswer(args: FilterArgs, pod: PodView, signal?: AbortSignal): Promise<ExtenderFilterResult> {
    const placement = await this.placeWaitingForUnseen(args.nodeNames, pod, signal);
    this.remember(pod, placement.remembered);
    return this.answer(args, this.bestScored(args, pod, placement));
  }

  /** Filter's answer for a placement, with its Events and the refusal requeue's bookkeeping. */
  private answer(args: FilterArgs, placement: Placement): ExtenderFilterResult {
    const { passed, failed, summary, unseen } = placement;
    const notMet = `${args.nodeNames.length} nodes do not meet: ${summary.text()}`;
    const refused = refusedPod(args.pod);
    if (passed.length === 0 && unseen.length > 0) {
      // An Error is retried on kube-scheduler's backoff: no requeue needed.
      if (refused !== undefined) this.deps.refusals?.forget(refused.uid);
      const message =
        `vgpu-warden has not seen ${unseenText(unseen)} yet (its node watch is behind kube-scheduler's); ` +
        `retry: ${notMet}`;
      this.recordFilteringFailed(args.pod, message);
      return filterResult.error(message);
    }
    if (passed.length === 0) {
      if (refused !== undefined)
        this.deps.refusals?.noteRefusal(
          refused,
          [...failed.keys()].map((node) => [node, placement.failedAt.get(node)]),
        );
      this.recordFilteringFailed(args.pod, `no available node, ${notMet}`);
    } else {
      if (refused !== undefined) this.deps.refusals?.forget(refused.uid);
      if (this.deps.successEvents === true)
        this.recordFilteringSucceed(
          args.pod,
          filteringSucceedMessage(passed, args.nodeNames.length - (placement.fitting ?? passed.length)),
        );
    }
    return filterResult.passed(passed, failed);
  }

  /**
   * The placement over every named node; placed nowhere with names the store has not seen, it waits
   * a moment for one of them and places again. Rejects once `signal` aborts.
   */
  private async placeWaitingForUnseen(
    nodeNames: readonly string[],
    pod: PodView,
    signal: AbortSignal | undefined,
  ): Promise<Placement> {
    // The namespace's quota use is part of the shape: a verdict cached for one budget says nothing of another.
    const quota = budgetKey(pod.quota);
    const shape = shapeOf(pod) + quota;
    const repeated = this.noteShape(shape);
    const placement = await this.place(nodeNames, pod, shape, repeated, quota);
    signal?.throwIfAborted();
    if (placement.passed.length > 0 || placement.unseen.length === 0) return placement;
    const unseenWaitMs = this.deps.unseenNodeWaitMs ?? UNSEEN_NODE_WAIT_MS;
    if (!(await this.waitForAnyNode(placement.unseen, unseenWaitMs, signal))) return placement;
    const again = await this.place(nodeNames, pod, shape, repeated, quota);
    signal?.throwIfAborted();
    return again;
  }

  /**
   * Fits the pod onto every named node, in slices: the admission webhook answers from this event
   * loop too. Per name: one generation lookup and, for a repeated shape, one cache lookup.
   */
  private async place(
    nodeNames: readonly string[],
    pod: PodView,
    shape: string,
    repeated: boolean,
    quota: string,
  ): Promise<Placement> {
    const { cache } = this.deps;
    const remembered: RememberedFilter = {
      names: nodeNames,
      generations: new Float64Array(nodeNames.length),
      verdicts: new Array<NodeVerdict>(nodeNames.length),
      quota,
    };
    const passed = new Array<string>(nodeNames.length);
    let passedCount = 0;
    const placement: Placement = {
      passed,
      failed: new Map(),
      failedAt: new Map(),
      summary: new FailureSummary(),
      remembered,
      unseen: [],
    };
    const cached = repeated ? this.shapeVerdicts(shape) : undefined;
    const accountedOn = this.nodesAccounting(pod);
    await forEachInSlices(nodeNames, (node, index) => {
      const generation = cache.nodeGeneration(node);
      const verdict = this.verdictAt(node, generation, pod, cached, accountedOn);
      // The generation before the fit: if evaluateNode moved it (an expired assumption dropped),
      // prioritize finds it changed and fits the node again, which is all that costs.
      remembered.generations[index] = generation ?? Number.NaN;
      remembered.verdicts[index] = verdict;
      if (verdict.fits) {
        passed[passedCount++] = node;
      } else if (!placement.failed.has(node)) {
        placement.failed.set(node, verdict.reason);
        placement.failedAt.set(node, generation);
        placement.summary.add(node, verdict.reason);
        // Here, so that a name kube-scheduler repeats is counted once (an unseen node never fits).
        if (generation === undefined) placement.unseen.push(node);
      }
    });
    passed.length = passedCount;
    return placement;
  }

  /** The store's first sync, waited for at most syncWaitMs; rejects with the reason once `signal` aborts. */
  private async waitForSync(signal: AbortSignal | undefined): Promise<boolean> {
    const waiting = this.deps.cache.waitForSync(this.deps.syncWaitMs);
    return signal === undefined ? waiting : until(waiting, signal);
  }

  /**
   * Resolves true as soon as the store sees one of `names` (at once if it already has), false after
   * `timeoutMs` or once `signal` aborts.
   */
  private waitForAnyNode(names: readonly string[], timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    const { cache } = this.deps;
    // The store may have caught up while the last slices ran.
    if (names.some((name) => cache.nodeGeneration(name) !== undefined)) return Promise.resolve(true);
    if (timeoutMs <= 0 || signal?.aborted === true) return Promise.resolve(false);
    const wanted = new Set(names);
    return new Promise((resolve) => {
      const finish = (seen: boolean): void => {
        clearTimeout(timer);
        unsubscribe();
        signal?.removeEventListener('abort', gone);
        resolve(seen);
      };
      const gone = (): void => {
        finish(false);
      };
      const unsubscribe = cache.onNodeChange((node) => {
        if (wanted.has(node.metadata?.name ?? '')) finish(true);
      });
      const timer = setTimeout(gone, timeoutMs);
      signal?.addEventListener('abort', gone, { once: true });
    });
  }

  private recordFilteringFailed(pod: Record<string, unknown>, message: string): void {
    this.deps.events.record(podTarget(pod), 'Warning', 'FilteringFailed', message);
  }

  /** HAMi's reason; one per filter call, aggregated per pod by the recorder like FilteringFailed. */
  private recordFilteringSucceed(pod: Record<string, unknown>, message: string): void {
    this.deps.events.record(podTarget(pod), 'Normal', 'FilteringSucceed', message);
  }

  /**
   * Scores where the pod fits (0 elsewhere), reusing filter's evaluation of a node when the node
   * has not changed since. Spread: 1..10 by the node policy, one point less where another pod holds
   * the lock (a bind there would queue behind it). Binpack: 10 on the nodes of the burst's packing plan
   * (packing-plan.ts) whose lock is free, 9 on those whose lock another pod holds (the plan's nodes
   * fill first even if a bind has to queue), 1..8 by the node policy elsewhere, and 0 where another
   * pod holds the lock off the plan. The plan's nodes tie on purpose: kube-scheduler picks among
   * them at random, so the pods of a burst bind on several node locks at once. A node whose lock
   * another pod has held past PLAN_LOCK_PATIENCE_MS is left out of the plan: its holder is stuck
   * (a slow kubelet, a dead plugin), and the next node takes its place.
   */
  async prioritize(args: FilterArgs, signal?: AbortSignal): Promise<HostPriority[]> {
    const { cache } = this.deps;
    await this.waitForSync(signal);
    const pod = viewPod(args.pod, this.deps.defaults, cache);
    if (!pod.wantsGpu) return args.nodeNames.map((node) => ({ Host: node, Score: 0 }));
    const known = pod.uid === undefined ? undefined : this.remembered.get(pod.uid);
    const remembered = known?.quota === budgetKey(pod.quota) ? known : undefined;
    const now = (this.deps.clock ?? Date.now)();
    const nodeNames = args.nodeNames;
    const lockStates = this.lockStatesOf(args, now);
    const lookup = remembered === undefined ? undefined : new RememberedLookup(remembered);
    const verdicts = await mapInSlices(nodeNames, (node) => {
      const generation = cache.nodeGeneration(node);
      const at = lookup?.indexOf(node) ?? -1;
      const known = at >= 0 && remembered?.generations[at] === generation ? remembered?.verdicts[at] : undefined;
      return known ?? this.verdict(node, pod);
    });
    const scores = this.scoresOf(args, pod, verdicts, lockStates, now);
    return nodeNames.map((node, index) => ({ Host: node, Score: scores[index] ?? 0 }));
  }

  /** Each named node's lock as this pod sees it: free (or its own), busy, or stalled (held too long by another). */
  private lockStatesOf(args: FilterArgs, now: number): LockState[] {
    const { cache } = this.deps;
    const identity = (args.pod as PodIdentity).metadata ?? {};
    const owner = { namespace: identity.namespace ?? '', name: identity.name ?? '' };
    return args.nodeNames.map((node) => {
      const lock = cache.lockOf(node);
      if (lock === undefined || cache.lockHeldBy(node, owner)) return 'free';
      return now - lock.firstSeen.getTime() > PLAN_LOCK_PATIENCE_MS ? 'stalled' : 'busy';
    });
  }

  /**
   * prioritize's 0..10 per named node: binpack's plan nodes 10 (9 while another pod holds the lock),
   * spread's one target 10, the other fitting nodes by the node policy, 0 where nothing fits.
   */
  private scoresOf(
    args: FilterArgs,
    pod: PodView,
    verdicts: readonly (NodeVerdict | undefined)[],
    lockStates: readonly LockState[],
    now: number,
  ): Uint8Array {
    const nodeNames = args.nodeNames;
    const binpack = pod.policies.node === 'binpack';
    const plan = binpack
      ? this.packingPlan(args, pod, verdicts, (index) => lockStates[index] !== 'stalled')
      : new Set<string>();
    const target = binpack ? -1 : this.spreadTargetOf(pod, nodeNames, verdicts, lockStates, now);
    const scores = new Uint8Array(nodeNames.length);
    for (let index = 0; index < nodeNames.length; index++) {
      const verdict = verdicts[index];
      if (verdict?.fits !== true) continue;
      const lockedByOther = lockStates[index] !== 'free';
      // Off the plan (binpack: 1-8) or off the target (spread: 1-9), by the node policy's score.
      const byPolicy = 1 + Math.round(verdict.score * (binpack ? 0.7 : 0.8));
      if (index === target) scores[index] = 10;
      else if (plan.has(nodeNames[index] ?? '')) scores[index] = lockedByOther ? 9 : 10;
      else if (!lockedByOther) scores[index] = byPolicy;
      // Spread: one point less where a bind would queue behind another pod's lock. A 0 there sent a
      // burst to the few nodes whose locks happened to be free (up to 29 against 15 pods on 5 nodes).
      else scores[index] = binpack ? 0 : byPolicy - 1;
    }
    return scores;
  }

  /**
   * The placement with its passed names cut to the SCORED_NODES that prioritize ranks highest (in
   * kube-scheduler's order), when more fit: kube-scheduler scores every name filter passes with its
   * own plugins, and with the GPU profile's percentageOfNodesToScore at 100 that was every fitting
   * node of the cluster for every pod. The cut changes no choice: prioritize's ranking decides, and
   * its top ranks are all kept.
   */
  private bestScored(args: FilterArgs, pod: PodView, placement: Placement): Placement {
    if (placement.passed.length <= SCORED_NODES) return placement;
    const now = (this.deps.clock ?? Date.now)();
    const { verdicts } = placement.remembered;
    const scores = this.scoresOf(args, pod, verdicts, this.lockStatesOf(args, now), now);
    // A fitting node ranks one above its score: one that scores 0 (binpack, locked) still fits.
    const ranks = scores.map((score, index) => (verdicts[index]?.fits === true ? score + 1 : 0));
    const kept = topScored(ranks, SCORED_NODES);
    const passed = args.nodeNames.filter((_, index) => kept[index] === 1);
    return { ...placement, passed, fitting: placement.passed.length };
  }

  /** Spread's one node for the pod (spread-target.ts), offered to it; -1 when none fits or may be used. */
  private spreadTargetOf(
    pod: PodView,
    names: readonly string[],
    verdicts: readonly (NodeVerdict | undefined)[],
    lockStates: readonly LockState[],
    now: number,
  ): number {
    const target = spreadTarget(
      names,
      (index) => {
        const verdict = verdicts[index];
        const lock = lockStates[index];
        if (verdict?.fits !== true || lock === 'stalled') return undefined;
        return { fits: true, utilization: verdict.utilization, lockBusy: lock === 'busy' };
      },
      (node) =>
        this.spreadOffers.offersToOthers(node, pod.uid, now, (uid) => this.deps.cache.nodesAccounting(uid).length > 0),
    );
    if (target >= 0 && pod.uid !== undefined) this.spreadOffers.offer(names[target] ?? '', pod.uid, now);
    return target;
  }

  /** The nodes binpack fills now with pods like this one (packing-plan.ts). `usable` takes the index of a name. */
  private packingPlan(
    args: FilterArgs,
    pod: PodView,
    verdicts: readonly (NodeVerdict | undefined)[],
    usable: (index: number) => boolean,
  ): Set<string> {
    const shape = shapeOf(pod);
    const cache = this.deps.cache;
    const pending =
      this.deps.pending?.count(burstKeyOf(shape, args.pod), (uid) => cache.isAssumed(uid), PENDING_COUNT_LIMIT) ?? 1;
    if (pending <= 0) return new Set();
    const names = args.nodeNames;
    // One typed array per call, nothing per name (packing-plan.ts: negative = not a candidate).
    const utilizations = new Float64Array(names.length).fill(NOT_A_CANDIDATE);
    for (let index = 0; index < names.length; index++) {
      const verdict = verdicts[index];
      if (verdict?.fits === true && usable(index)) utilizations[index] = verdict.utilization;
    }
    return packingTargets({ nodes: names, utilizations }, pending, (node, needed) => this.roomOn(node, pod, needed));
  }

  /**
   * How many pods like this one fit on the node as it is now, counted up to `needed` (what the plan
   * still needs) and at most ROOM_COUNT_LIMIT: a plan costs at most as many fits as pods pending.
   * No memo: one kept per node generation and shape did not move bench:filter (5000 nodes x 40000
   * pods, replicas of one shape: 1.4 to 2.3 ms p50 with it, 2.0 ms without, this machine's noise).
   */
  private roomOn(node: string, pod: PodView, needed: number): number {
    const { cache } = this.deps;
    if (cache.nodeGeneration(node) === undefined) return 0;
    const limit = Math.min(needed, ROOM_COUNT_LIMIT);
    let room = 0;
    let usage: ReadonlyMap<string, GpuUse> | undefined;
    while (room < limit) {
      const evaluation = evaluateNode(cache, node, pod, usage);
      if (!evaluation.fits) break;
      usage = evaluation.usageAfter;
      room += 1;
    }
    return room;
  }

  /** `signal`: the request's; the bind's own deadline (BIND_TIMEOUT) still bounds it when the request lasts. */
  async bind(args: BindingArgs, signal?: AbortSignal): Promise<ExtenderBindingResult> {
    const result = await this.deps.binder.bind(args, signal);
    return { Error: result.error ?? '' };
  }

  /** The pod's fit on the node and its score there, computed now. */
  private verdict(node: string, pod: PodView): NodeVerdict {
    if (this.deps.cache.inventory(node) === undefined) return UNREGISTERED;
    const evaluation = evaluateNode(this.deps.cache, node, pod);
    return evaluation.fits
      ? { fits: true, ...scoreNode(this.deps.cache, evaluation, pod) }
      : { fits: false, reason: evaluation.reason };
  }

  /**
   * The pod's verdict on the node at `generation` (the store's now), from `cached` (its shape's
   * verdicts) when the node has not changed since. `accountedOn`: the nodes the pod itself is
   * already counted on (a retried placement), fitted afresh without its own usage.
   */
  private verdictAt(
    node: string,
    generation: number | undefined,
    pod: PodView,
    cached: ShapeValues<NodeVerdict> | undefined,
    accountedOn: readonly string[],
  ): NodeVerdict {
    // No generation: the store has no state for the node at all.
    if (generation === undefined) return UNREGISTERED;
    if (cached === undefined || (accountedOn.length > 0 && accountedOn.includes(node))) return this.verdict(node, pod);
    const known = cached.get(node, generation);
    if (known !== undefined) return known;
    const verdict = this.verdict(node, pod);
    // evaluateNode may drop an expired assumption and so move the generation: cache only if it held.
    if (this.deps.cache.nodeGeneration(node) === generation) cached.set(node, generation, verdict);
    return verdict;
  }

  /** The shape's cached verdicts, emptied first when they name far more nodes than the store has. */
  private shapeVerdicts(shape: string): ShapeValues<NodeVerdict> {
    const values = this.byShape.forShape(shape);
    if (values.size > this.deps.cache.nodeCount + STALE_NODE_SLACK) values.clear();
    return values;
  }

  /** The nodes the pod is already counted on (bound or assumed), usually none. */
  private nodesAccounting(pod: PodView): string[] {
    return pod.uid === undefined ? [] : this.deps.cache.nodesAccounting(pod.uid);
  }

  /** Whether `shape` was seen recently (then its evaluations are worth caching); records it. */
  private noteShape(shape: string): boolean {
    const seen = this.recentShapes.delete(shape);
    this.recentShapes.add(shape);
    if (this.recentShapes.size > RECENT_SHAPES) this.recentShapes.delete(this.recentShapes.values().next().value ?? '');
    return seen;
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

/**
 * Where a node name sits in a remembered filter. prioritize is sent the names filter passed, in
 * filter's order, so a cursor walking forward finds each further on (past the names filter
 * refused), with no map of thousands of names built per pod: O(names) for the whole walk. The
 * first name not found ahead (names out of that order, one repeated) switches to a map built once,
 * so the walk never costs more than twice the names.
 */
export class RememberedLookup {
  private next = 0;
  private byName: Map<string, number> | undefined;

  constructor(private readonly remembered: { readonly names: readonly string[] }) {}

  /** The index of `name` in the remembered names, or -1. */
  indexOf(name: string): number {
    const { names } = this.remembered;
    if (this.byName === undefined) {
      for (let at = this.next; at < names.length; at++) {
        if (names[at] === name) {
          this.next = at + 1;
          return at;
        }
      }
      this.byName = new Map();
      // The first index of each name, as a forward walk would find it.
      for (let at = names.length - 1; at >= 0; at--) this.byName.set(names[at] as string, at);
    }
    return this.byName.get(name) ?? -1;
  }
}

/** The pod's identity, when kube-scheduler's copy carries all of it. */
function refusedPod(pod: Record<string, unknown>): RefusedPod | undefined {
  const { metadata } = pod as PodIdentity;
  const [namespace, name, uid] = [metadata?.namespace, metadata?.name, metadata?.uid];
  return namespace && name && uid ? { namespace, name, uid } : undefined;
}

/** `node a` or `3 nodes (a, b, c, …)`: names are validated by the protocol parser, so short. */
function unseenText(unseen: readonly string[]): string {
  if (unseen.length === 1) return `node ${unseen[0] ?? ''}`;
  const shown = unseen.slice(0, 3).join(', ');
  return `${unseen.length} nodes (${shown}${unseen.length > 3 ? ', …' : ''})`;
}

function podTarget(pod: Record<string, unknown>): EventTarget {
  const identity = (pod as PodIdentity).metadata ?? {};
  return {
    kind: 'Pod',
    name: identity.name ?? '',
    namespace: identity.namespace ?? 'default',
    ...(identity.uid ? { uid: identity.uid } : {}),
  };
}

/** Nodes named in a FilteringSucceed message at most; the rest are counted, so the Event stays small. */
const SUCCEED_NODE_LIMIT = 10;

/**
 * After HAMi's genSuccessMsg ("find fit node(n1), 2 nodes not fit, 1 nodes fit(n1:..)"), but HAMi's
 * filter picks one node and ours passes every fitting node on to kube-scheduler's scoring, so the
 * message lists the fitting nodes rather than one choice.
 */
export function filteringSucceedMessage(passed: readonly string[], notFit: number): string {
  const named = passed.slice(0, SUCCEED_NODE_LIMIT).join(',');
  const more = passed.length > SUCCEED_NODE_LIMIT ? `,+${passed.length - SUCCEED_NODE_LIMIT} more` : '';
  return `find fit nodes, ${notFit} nodes not fit, ${passed.length} nodes fit(${named}${more})`;
}

/** Marks (1) the `limit` highest ranks above 0, the earlier name first among equals; one pass to count, one to mark. */
function topScored(scores: Uint8Array, limit: number): Uint8Array {
  const atScore = new Uint32Array(256);
  for (const score of scores) if (score > 0) atScore[score] = (atScore[score] ?? 0) + 1;
  let threshold = 255;
  let above = 0;
  while (threshold > 0 && above + (atScore[threshold] ?? 0) < limit) above += atScore[threshold--] ?? 0;
  let atThreshold = limit - above;
  const kept = new Uint8Array(scores.length);
  for (let index = 0; index < scores.length; index++) {
    const score = scores[index] ?? 0;
    if (score === 0 || score < threshold) continue;
    if (score === threshold && atThreshold-- <= 0) continue;
    kept[index] = 1;
  }
  return kept;
}
