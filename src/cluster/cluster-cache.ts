import type { V1Node, V1Pod, V1ResourceQuota } from '@kubernetes/client-node';
import { LockIndex } from './lock-index.js';
import { NodeStates } from './node-states.js';
import { QUOTA_RESOURCES, tightestLimits, type QuotaBudget, type QuotaUse } from '../devices/gpu-quota.js';
import { type NodeInventory } from '../devices/inventory.js';
import { addUsage, type GpuUse } from '../devices/usage.js';
import { isAtLeastVersion } from '../base/resource-version.js';
import type { LockValue, PodRef } from '../lock/lock-value.js';
import type { LockView, NodeSnapshot } from '../lock/node-lock-api.js';
import type { GoneIncarnation, LockOwnerFacts } from '../lock/lock-owner.js';
import { ownerPodFrom, type OwnerPod } from '../lock/owner-pod.js';
import { PodIncarnations } from './pod-incarnations.js';
import type { Delivery, DerivedIndex, IndexEffects } from './derived-index.js';
import { UsageSums } from './usage-sums.js';
import { kubeletRegistered, UnacknowledgedAllocations, type UnacknowledgedPod } from './unacknowledged-allocations.js';
import type { GpuLiveness } from './node-liveness.js';
import { ObjectStore, type ObjectChange } from './object-store.js';
import { slimNode } from './slim-objects.js';
import { PodUsageIndex, type UnreadableAllocation } from './pod-usage-index.js';
import { QuotaIndex } from './quota-index.js';
import type { ConditionLog } from '../telemetry/condition-log.js';
import { Reflector, type ListWatchSource, type ReflectorOptions, type ReflectorSink } from './reflector.js';
import { NODE_LOCK_ANNOTATION } from '../hami/wire.js';

export interface ClusterCacheDeps {
  /**
   * Where nodes, pods and ResourceQuotas come from; `kubeSources` builds the real ones, which hand
   * over slim copies (slim-objects.ts) page by page: the store keeps what its sources deliver.
   * Without a quota source no namespace GPU quota is enforced (tests, `explain` snapshots).
   */
  sources: { nodes: ListWatchSource<V1Node>; pods: ListWatchSource<V1Pod>; quotas?: ListWatchSource<V1ResourceQuota> };
  /** MEMORY_FACTOR: GPU memory quota limits are scaled by it, as requests are (HAMi). */
  quotaMemoryFactor?: number;
  log?: (level: 'info' | 'warn', message: string) => void;
  /** A watch down longer than this makes the store stale (filter refuses, /readyz fails). */
  staleAfterMs?: number;
  clock?: () => number;
  reflector?: ReflectorOptions;
  /**
   * Where the reflectors report list and watch failures (one warning per condition, with backoff);
   * by default each its own, to `log`.
   */
  conditions?: ConditionLog;
}

export type PodChange = 'add' | 'update' | 'delete';
type NodeListener = (node: V1Node, change: PodChange) => void;
type PodListener = (pod: V1Pod, change: PodChange) => void;

/**
 * The one cluster state store (ARCHITECTURE §3 `cluster/`): nodes with their parsed GPU inventory,
 * pods, GPU usage per node (bound plus assumed pods), and each node's lock with the time this
 * process first saw that value. Filter, prioritize, bind, the sweeper, the pod watch, metrics and
 * the CLI all read it.
 *
 * Synced only after a successful LIST of both nodes and pods; stale while a watch has been down
 * longer than `staleAfterMs`. Relists are reconciled by UID (ObjectStore), so a pod recreated under
 * the same name while the watch was down is a delete of the old incarnation and an add of the new.
 * Everything derived from nodes and pods is a DerivedIndex in `indexes`, told of every change.
 */
export class ClusterCache {
  /** GPU use per node and namespace, bound and assumed pods (pod-usage-index.ts); changed only by the verbs below. */
  private readonly usage: PodUsageIndex;
  /** The store as the lock service sees it (first reads, lock ages, our own writes fed back). */
  readonly lockView: LockView;
  private readonly nodes = new ObjectStore<V1Node>();
  private readonly pods = new ObjectStore<V1Pod>();
  private readonly quotaObjects = new ObjectStore<V1ResourceQuota>();
  private readonly quotas: QuotaIndex;
  /** Per node: inventory, plugin liveness and generation (node-states.ts). */
  private readonly nodeStates: NodeStates;
  private readonly usageSums = new UsageSums();
  private readonly nodeListeners = new Set<NodeListener>();
  private readonly podListeners = new Set<PodListener>();
  /** Each node's lock (parsed once) with its first-seen time, the holder index and the parked lock waiters. */
  private readonly locks: LockIndex;
  /** Creation and first-seen resourceVersions, and the incarnations that went (lock/lock-owner.ts reads them). */
  private readonly incarnations: PodIncarnations;
  /** Pods past the lock that the node's kubelet has not acknowledged yet (unacknowledged-allocations.ts). */
  private readonly unacknowledged: UnacknowledgedAllocations;
  /** Every structure derived from nodes and pods, in the order each change reaches them. */
  private readonly indexes: readonly DerivedIndex[];
  /** What an index may ask of the store while it takes in a change; `woken` collects the nodes to wake. */
  private readonly effects: IndexEffects & { woken: Set<string> };
  private readonly reflectors: Reflector<V1Node | V1Pod>[];
  /** The ResourceQuota reflector, when there is a quota source; part of `synced`, not of `watching`. */
  private readonly quotaReflector: Reflector<V1ResourceQuota> | undefined;
  private readonly clock: () => number;
  private globalGeneration = 0;

  // Bound once: nodeGeneration runs for every name of every filter call.
  private readonly storedNode = (name: string): V1Node | undefined => this.nodes.get(name);
  private readonly bumpNode = (name: string): void => {
    this.bump(name);
  };
  private readonly generationOf = (name: string): number | undefined => this.nodeStates.generation(name);

  constructor(private readonly deps: ClusterCacheDeps) {
    const clock = (this.clock = deps.clock ?? Date.now);
    this.nodeStates = new NodeStates(clock);
    this.locks = new LockIndex(clock, (listeners) => {
      this.emit(listeners, (listener) => {
        listener();
      });
    });
    this.incarnations = new PodIncarnations(clock);
    this.unacknowledged = new UnacknowledgedAllocations(clock);
    this.usage = new PodUsageIndex(clock, undefined, this.bumpNode, (node) => this.fullCapacity(node));
    this.indexes = [this.nodeStates, this.locks, this.usageSums, this.incarnations, this.usage, this.unacknowledged];
    this.effects = {
      woken: new Set(),
      changed: this.bumpNode,
      wake: (node) => this.effects.woken.add(node),
      warn: (message) => this.deps.log?.('warn', message),
    };
    this.reflectors = [
      this.reflector<V1Node>('nodes', deps.sources.nodes, {
        replace: (items, version) => {
          this.applyNodes(this.nodes.replace(items), { kind: 'relist', version });
        },
        apply: (type, node) => {
          this.applyNodes(this.nodes.apply(type, node), { kind: 'event', type, object: node });
        },
      }),
      this.reflector<V1Pod>('pods', deps.sources.pods, {
        replace: (items, version) => {
          this.applyPods(this.pods.replace(items), { kind: 'relist', version });
        },
        apply: (type, pod) => {
          this.applyPods(this.pods.apply(type, pod), { kind: 'event', type, object: pod });
        },
      }),
    ];
    this.quotas = new QuotaIndex(deps.quotaMemoryFactor ?? 1, (message) => {
      deps.log?.('warn', message);
    });
    const quotaSource = deps.sources.quotas;
    this.quotaReflector =
      quotaSource &&
      this.reflector<V1ResourceQuota>('resourcequotas', quotaSource, {
        replace: (items) => {
          this.quotas.apply(this.quotaObjects.replace(items));
        },
        apply: (type, quota) => {
          this.quotas.apply(this.quotaObjects.apply(type, quota));
        },
      });
    this.lockView = {
      node: (name) => this.nodeSnapshot(name),
      ownerPod: (ref) => this.ownerPod(ref),
      lockOwnerFacts: (node, value, ref, namedUid) => this.lockOwnerFacts(node, value, ref, namedUid),
      lockSeenAt: (node, value) => this.locks.seenAt(node, value),
      current: () => this.watching(),
      observeWrite: (snapshot, writtenFor) => {
        this.observeNodeWrite(snapshot, writtenFor);
      },
    };
  }

  /** A reflector of one kind with the store's clock, log, options and condition reporting. */
  private reflector<T>(what: string, source: ListWatchSource<T>, sink: ReflectorSink<T>): Reflector<T> {
    const { log, reflector: options, conditions } = this.deps;
    return new Reflector<T>({
      what,
      source,
      clock: this.clock,
      sink,
      ...(log ? { log } : {}),
      ...(options ? { options } : {}),
      ...(conditions ? { conditions: conditions.reporter(`${what} reflector`) } : {}),
    });
  }

  /** True once nodes, pods and (with a quota source) ResourceQuotas have been listed successfully. */
  get synced(): boolean {
    return this.everyReflector().every(({ reflector }) => reflector.synced);
  }

  /**
   * Nodes and pods, then ResourceQuotas when there is a source: a store that has not listed the
   * quotas is not synced, so no pod is placed past a quota it has not read yet.
   */
  private everyReflector(): { what: string; reflector: Reflector<unknown> }[] {
    const all: { what: string; reflector: Reflector<unknown> }[] = [];
    const [nodes, pods] = this.reflectors;
    if (nodes) all.push({ what: 'nodes', reflector: nodes });
    if (pods) all.push({ what: 'pods', reflector: pods });
    if (this.quotaReflector) all.push({ what: 'resourcequotas', reflector: this.quotaReflector });
    return all;
  }

  /**
   * Why the store cannot be trusted right now; empty when it can. Each problem is followed by the
   * last list or watch failure behind it, when there was one (e.g. the apiserver unreachable).
   */
  problems(): string[] {
    const problems: string[] = [];
    const now = this.clock();
    const staleAfter = this.deps.staleAfterMs ?? 30_000;
    for (const { what, reflector } of this.everyReflector()) {
      const down = reflector.downSince;
      const stale = reflector.synced && down !== undefined && now - down > staleAfter;
      if (!reflector.synced) problems.push(`${what} not listed yet`);
      if (stale) problems.push(`${what} watch down for ${Math.round((now - down) / 1000)}s`);
      const failure = reflector.failure;
      if ((stale || !reflector.synced) && failure !== undefined) problems.push(failure);
    }
    return problems;
  }

  /** Starts the reflectors; resolves once synced (or when stopped first). */
  async start(): Promise<void> {
    const all = this.everyReflector();
    for (const { reflector } of all) reflector.start();
    await Promise.all(all.map(({ reflector }) => reflector.waitForSync(2_147_483_647)));
  }

  async stop(): Promise<void> {
    await Promise.all(this.everyReflector().map(({ reflector }) => reflector.stop()));
  }

  /** Resolves true once synced, or false after `timeoutMs`. */
  async waitForSync(timeoutMs: number): Promise<boolean> {
    const results = await Promise.all(this.everyReflector().map(({ reflector }) => reflector.waitForSync(timeoutMs)));
    return results.every(Boolean);
  }

  inventory(nodeName: string): NodeInventory | undefined {
    return this.nodeStates.inventory(nodeName);
  }

  node(nodeName: string): V1Node | undefined {
    return this.nodes.get(nodeName);
  }

  pod(namespace: string, name: string): V1Pod | undefined {
    return this.pods.get(`${namespace}/${name}`);
  }

  /** This node's generation: filter and prioritize results for a node are valid while it holds. */
  nodeGeneration(nodeName: string): number | undefined {
    // A verdict that expires with time (a handshake grace ending) changes the node without an event.
    return this.nodeStates.currentGeneration(nodeName, this.storedNode, this.bumpNode);
  }

  /**
   * Is the node's HAMi device plugin reporting (node-liveness.ts: allocatable nvidia.com/gpu above
   * zero, or HAMi's 60 s handshake grace for a plugin that has not reported yet)? Filter refuses a
   * node that is not, with `reason`; a change of verdict bumps the node's generation, so cached
   * filter verdicts follow it, and the node comes back as soon as its plugin reports again.
   */
  gpuLiveness(nodeName: string): GpuLiveness {
    this.nodeGeneration(nodeName); // judges a lapsed verdict again first
    return this.nodeStates.liveness(nodeName) ?? { ready: false, reason: 'node unregistered', since: undefined };
  }

  /**
   * Usage on the node by bound and assumed pods, leaving out `excludeUid` (the pod being placed).
   * Callers must not modify the map.
   */
  usageOn(nodeName: string, excludeUid?: string): ReadonlyMap<string, GpuUse> {
    if (excludeUid !== undefined && this.usage.isOn(nodeName, excludeUid))
      return this.usage.usageOn(nodeName, excludeUid);
    return this.usageSums.of(nodeName, this.generationOf, this.clock(), this.usage);
  }

  /**
   * A bind's share of `node` counted before the store sees the pod bound (kube-scheduler's
   * AssumePod): the reservation while it waits for the lock, then the GPUs chosen under it. It
   * counts against the namespace's GPU quota (`pod` lets a scoped quota tell whether it counts it)
   * until the pod watch delivers the bound pod, or until it expires.
   */
  assumePod(uid: string, node: string, usage: Map<string, GpuUse>, namespace?: string, pod?: unknown): void {
    this.usage.assume(uid, node, usage, namespace, pod);
  }

  /** Drops a bind's assumption: the bind failed and nothing of it was bound (kube-scheduler's ForgetPod). */
  forgetPod(uid: string): void {
    this.usage.forget(uid);
  }

  /**
   * The bind's Binding went out (kube-scheduler's FinishBinding): its assumption now counts until
   * the pod watch delivers the bound pod, or expires if it never does (pod-usage-index.ts).
   */
  finishBinding(uid: string): void {
    this.usage.finishBinding(uid);
  }

  /** Whether a bind's assumption for the pod is still counted. */
  isAssumed(uid: string): boolean {
    return this.usage.isAssumed(uid);
  }

  /** The nodes whose usage counts the pod (bound or assumed). */
  nodesAccounting(uid: string): string[] {
    return this.usage.nodesOf(uid);
  }

  /** Pods whose allocation annotation cannot be read (counted as using their whole node). */
  unreadableAllocations(): UnreadableAllocation[] {
    return this.usage.unreadable();
  }

  /** Both collections listed and both watches up: the store is behind by at most the events in flight. */
  watching(): boolean {
    return this.reflectors.every((reflector) => reflector.synced && reflector.downSince === undefined);
  }

  /** Has the pod store seen every pod change up to resourceVersion `version` (false when it cannot tell)? */
  podsSeenThrough(version: string): boolean {
    return isAtLeastVersion(this.reflectors[1]?.seenThrough, version);
  }

  /**
   * usageOn plus the usage of those of `pods` (the node's pods read from the API) the store does not
   * account on this node yet: binds its pod watch has not delivered. A pod the store has and the API
   * no longer does still counts, which errs on the safe side until the watch catches up.
   */
  usageIncluding(nodeName: string, excludeUid: string, pods: readonly V1Pod[]): Map<string, GpuUse> {
    const total = new Map<string, GpuUse>();
    addUsage(total, this.usageOn(nodeName, excludeUid));
    const unseen = new PodUsageIndex(this.clock, undefined, undefined, (node) => this.fullCapacity(node));
    for (const pod of pods) {
      const uid = pod.metadata?.uid;
      if (uid === undefined || uid === excludeUid || this.usage.isOn(nodeName, uid)) continue;
      unseen.upsert(pod);
    }
    addUsage(total, unseen.usageOn(nodeName));
    return total;
  }

  /** Every GPU of the node at full use: what a pod with an allocation we cannot read is counted as. */
  private fullCapacity(nodeName: string): Map<string, GpuUse> {
    const full = new Map<string, GpuUse>();
    for (const device of this.inventory(nodeName)?.devices ?? [])
      full.set(device.uuid, { slots: device.count, memoryMiB: device.memoryMiB, cores: device.cores });
    return full;
  }

  /**
   * The node's lock as the store has it: the raw value, the value parsed once when the store first
   * saw it (lock-value.ts; its holder is `value.owner` when `kind` is 'owned'), and the time this
   * process first saw it.
   */
  lockOf(nodeName: string): { raw: string; value: LockValue; firstSeen: Date } | undefined {
    const lock = this.locks.of(nodeName);
    const value = this.locks.valueOf(nodeName);
    return lock === undefined || value === undefined
      ? undefined
      : { raw: lock.raw, value, firstSeen: new Date(lock.firstSeenMs) };
  }

  /** Whether the node's lock names `pod` (namespace and name, as HAMi's value does), from the stored parse. */
  lockHeldBy(nodeName: string, pod: PodRef): boolean {
    return this.locks.heldBy(nodeName, pod);
  }

  /** Calls `listener` on every node add, update or delete until the returned function is called. */
  onNodeChange(listener: NodeListener): () => void {
    this.nodeListeners.add(listener);
    return () => {
      this.nodeListeners.delete(listener);
    };
  }

  /** Calls `listener` on every pod add, update or delete until the returned function is called. */
  onPodChange(listener: PodListener): () => void {
    this.podListeners.add(listener);
    return () => {
      this.podListeners.delete(listener);
    };
  }

  /**
   * Calls `listener` when the lock value of `nodeName` changes or when the pod it names changes
   * (its holder's state decides whether a waiter may take over). Lock waiters park here.
   */
  onLockChange(nodeName: string, listener: () => void): () => void {
    return this.locks.onChange(nodeName, listener);
  }

  /**
   * Pods bound to `nodeName` whose allocation its kubelet has not acknowledged for at most
   * `maxAgeMs`, leaving out `excludeUid`; always none on a node no kubelet registered.
   */
  unacknowledgedOn(nodeName: string, maxAgeMs: number, excludeUid?: string): UnacknowledgedPod[] {
    if (!kubeletRegistered(this.nodes.get(nodeName))) return [];
    return this.unacknowledged.waiting(nodeName, maxAgeMs, excludeUid);
  }

  /** When this process first saw the pod awaiting kubelet's acknowledgement, if it does. */
  unacknowledgedSince(uid: string): number | undefined {
    return this.unacknowledged.sinceMs(uid);
  }

  /** Nodes whose lock names this pod (by namespace/name, as the lock does); O(1). */
  nodesLockedBy(namespace: string, name: string): string[] {
    return this.locks.nodesLockedBy(namespace, name);
  }

  /** Nodes carrying hami.io/mutex.lock now (the sweeper's work list). */
  lockedNodes(): string[] {
    return this.locks.lockedNodes();
  }

  nodeNames(): string[] {
    return this.nodeStates.names();
  }

  /** How many nodes the store has. */
  get nodeCount(): number {
    return this.nodes.size;
  }

  /**
   * The pod's namespace GPU quota: the GPU limits of the ResourceQuotas whose scopes count `pod`
   * (quota-scopes.ts), and what the namespace's pods use (bound and assumed), the pod itself left
   * out; a scoped limit carries the use of only the pods its quota counts. Undefined when no quota
   * limits the pod's GPUs. Without `pod` (diagnostics): every limit, each against the namespace's
   * whole use, which never holds back less than the pod's own budget would.
   */
  quotaBudget(namespace: string, excludeUid?: string, pod?: unknown): QuotaBudget | undefined {
    if (pod !== undefined)
      return this.quotas.budget(namespace, pod, (counted) => this.usage.namespaceUse(namespace, excludeUid, counted));
    const limits = this.quotas.limits(namespace);
    if (limits.length === 0) return undefined;
    return { namespace, limits, used: this.usage.namespaceUse(namespace, excludeUid) };
  }

  /**
   * Per namespace with a GPU quota and per limited resource: its tightest limit (the least room
   * left) and that limit's use: the namespace's, or for a scoped quota the use of the pods it counts.
   */
  quotaUses(): QuotaUse[] {
    const uses: QuotaUse[] = [];
    for (const namespace of this.quotas.namespaces()) {
      const used = this.usage.namespaceUse(namespace);
      const limits = this.quotas.limitsWithUse(namespace, (counted) =>
        counted === undefined ? used : this.usage.namespaceUse(namespace, undefined, counted),
      );
      for (const [field, limit] of tightestLimits(limits, used)) {
        uses.push({
          namespace,
          resource: QUOTA_RESOURCES[field],
          used: (limit.used ?? used)[field],
          limit: limit.limit,
        });
      }
    }
    return uses;
  }

  /** Every pod in the store (read-only: callers must not modify them), for scrape-time views. */
  allPods(): IterableIterator<V1Pod> {
    return this.pods.values();
  }

  /** The record of this incarnation of the name, if the store saw it go. */
  goneIncarnation(namespace: string, name: string, uid: string): GoneIncarnation | undefined {
    return this.incarnations.goneByUid(namespace, name, uid);
  }

  /** What the store knows of whom `value` on `node` was written for (lock/lock-owner.ts). */
  private lockOwnerFacts(
    node: string,
    value: string,
    ref: PodRef,
    namedUid: string | undefined,
  ): Omit<LockOwnerFacts, 'named' | 'lockWrittenAt'> {
    const lock = this.locks.of(node);
    const known = lock?.raw === value ? lock : undefined;
    return {
      writtenFor: known?.writtenFor,
      lockSeenVersion: known?.firstSeenVersion,
      lockSeenExactly: known?.seenExactly ?? false,
      namedCreatedVersion: namedUid === undefined ? undefined : this.incarnations.createdVersion(namedUid),
      namedSeenVersion: namedUid === undefined ? undefined : this.incarnations.seenVersion(namedUid),
      gone: this.incarnations.goneOf(ref.namespace, ref.name),
    };
  }

  /** The pod a lock names, as lock rules see it; undefined when the store has no such pod. */
  private ownerPod(ref: PodRef): OwnerPod | undefined {
    const pod = this.pod(ref.namespace, ref.name);
    return pod === undefined ? undefined : ownerPodFrom(pod);
  }

  private nodeSnapshot(nodeName: string): NodeSnapshot | undefined {
    const node = this.nodes.get(nodeName);
    if (node === undefined) return undefined;
    return {
      name: nodeName,
      resourceVersion: node.metadata?.resourceVersion ?? '',
      lock: node.metadata?.annotations?.[NODE_LOCK_ANNOTATION],
      object: node,
    };
  }

  /**
   * Feeds back a node we just wrote (a lock write's answer) so waiters see it before its watch event;
   * `writtenFor` is the UID of the pod its lock value was written for.
   */
  private observeNodeWrite(snapshot: NodeSnapshot, writtenFor?: string): void {
    const object = snapshot.object as V1Node | undefined;
    const name = object?.metadata?.name;
    if (object === undefined || name === undefined) return;
    this.applyNodes(this.nodes.observeWrite(slimNode(object)), { kind: 'write' });
    if (writtenFor !== undefined && snapshot.lock !== undefined)
      this.locks.markWrittenFor(name, snapshot.lock, writtenFor);
  }

  private bump(nodeName: string): void {
    this.globalGeneration++;
    this.nodeStates.stamp(nodeName, this.globalGeneration);
  }

  private applyNodes(changes: ObjectChange<V1Node>[], delivery: Delivery): void {
    for (const change of changes) for (const index of this.indexes) index.onNode?.(change, delivery, this.effects);
    this.wakeWaiters();
    for (const change of changes)
      this.emit(this.nodeListeners, (listener) => {
        listener(change.object, change.type);
      });
  }

  private applyPods(changes: ObjectChange<V1Pod>[], delivery: Delivery): void {
    for (const change of changes) for (const index of this.indexes) index.onPod?.(change, delivery, this.effects);
    this.wakeWaiters();
    for (const change of changes)
      this.emit(this.podListeners, (listener) => {
        listener(change.object, change.type);
      });
  }

  /** Wakes the lock waiters of the nodes the indexes asked for, once each, after the whole batch. */
  private wakeWaiters(): void {
    const woken = [...this.effects.woken];
    this.effects.woken.clear();
    for (const node of woken) this.locks.notify(node);
  }

  private emit<L>(listeners: Set<L>, call: (listener: L) => void): void {
    for (const listener of [...listeners]) {
      try {
        call(listener);
      } catch (error) {
        this.deps.log?.('warn', `a cluster-state listener failed: ${(error as Error).message}`);
      }
    }
  }
}
