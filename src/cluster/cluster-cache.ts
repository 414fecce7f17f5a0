import type { V1Node, V1Pod, V1ResourceQuota } from '@kubernetes/client-node';
import { LockIndex } from './lock-index.js';
import { NodeStates } from './node-states.js';
import { QUOTA_RESOURCES, tightestLimits, type QuotaBudget, type QuotaUse } from '../devices/gpu-quota.js';
import { type NodeInventory } from '../devices/inventory.js';
import { addUsage, type GpuUse } from '../devices/usage.js';
import { isAtLeastVersion } from '../base/resource-version.js';
import type { PodRef } from '../lock/lock-value.js';
import type { LockView, NodeSnapshot } from '../lock/node-lock-api.js';
import type { GoneIncarnation, LockOwnerFacts } from '../lock/lock-owner.js';
import { ownerPodFrom, type OwnerPod } from '../lock/owner-pod.js';
import { GoneIncarnations } from './gone-incarnations.js';
import { kubeletRegistered, UnacknowledgedAllocations, type UnacknowledgedPod } from './unacknowledged-allocations.js';
import type { GpuLiveness } from './node-liveness.js';
import { ObjectStore, type ObjectChange } from './object-store.js';
import { slimNode } from './slim-objects.js';
import { PodUsageIndex, type UnreadableAllocation } from './pod-usage-index.js';
import { QuotaIndex } from './quota-index.js';
import type { ConditionLog } from '../telemetry/condition-log.js';
import { Reflector, type ListWatchSource, type ReflectorOptions } from './reflector.js';
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
  /** Where the reflectors report list and watch failures (one warning per condition, with backoff); by default each its own, to `log`. */
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
 */
export class ClusterCache {
  /** GPU use per node and namespace, bound and assumed pods (pod-usage-index.ts); changed only through the methods below. */
  private readonly usage: PodUsageIndex;
  /** The store as the lock service sees it (first reads, lock ages, our own writes fed back). */
  readonly lockView: LockView;
  private readonly nodes = new ObjectStore<V1Node>();
  private readonly pods = new ObjectStore<V1Pod>();
  private readonly quotaObjects = new ObjectStore<V1ResourceQuota>();
  private readonly quotas: QuotaIndex;
  private readonly nodeStates: NodeStates;
  private readonly usageSums = new Map<
    string,
    { generation: number; usage: ReadonlyMap<string, GpuUse>; validUntil: number | undefined }
  >();
  private readonly nodeListeners = new Set<NodeListener>();
  private readonly podListeners = new Set<PodListener>();
  /** Each node's lock with its first-seen time, the holder index and the parked lock waiters. */
  private readonly locks: LockIndex;
  /** Pod UID -> the resourceVersion it was created at, for pods whose creation the watch delivered. */
  private readonly createdVersions = new Map<string, string>();
  /** Pod UID -> a resourceVersion at which the store saw it exist: its creation, or the LIST it first came in. */
  private readonly seenVersions = new Map<string, string>();
  /** The incarnations of pod names that went, per UID: whose a lock is and what kubelet may still admit (lock/lock-owner.ts). */
  private readonly gone = new GoneIncarnations();
  /** Pods past the lock that the node's kubelet has not acknowledged yet (unacknowledged-allocations.ts). */
  private readonly unacknowledged: UnacknowledgedAllocations;
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

  constructor(private readonly deps: ClusterCacheDeps) {
    this.clock = deps.clock ?? Date.now;
    this.nodeStates = new NodeStates(this.clock);
    this.locks = new LockIndex(this.clock, (listeners) => {
      this.emit(listeners, (listener) => {
        listener();
      });
    });
    this.unacknowledged = new UnacknowledgedAllocations(this.clock);
    this.usage = new PodUsageIndex(
      this.clock,
      undefined,
      (node) => {
        this.bump(node);
      },
      (node) => this.fullCapacity(node),
    );
    const log = deps.log;
    this.reflectors = [
      new Reflector<V1Node>({
        what: 'nodes',
        source: deps.sources.nodes,
        clock: this.clock,
        ...(log ? { log } : {}),
        ...(deps.reflector ? { options: deps.reflector } : {}),
        ...(deps.conditions ? { conditions: deps.conditions.reporter('nodes reflector') } : {}),
        sink: {
          replace: (items) => {
            this.applyNodes(this.nodes.replace(items), false);
          },
          apply: (type, node) => {
            this.applyNodes(this.nodes.apply(type, node), true);
          },
        },
      }),
      new Reflector<V1Pod>({
        what: 'pods',
        source: deps.sources.pods,
        clock: this.clock,
        ...(log ? { log } : {}),
        ...(deps.reflector ? { options: deps.reflector } : {}),
        ...(deps.conditions ? { conditions: deps.conditions.reporter('pods reflector') } : {}),
        sink: {
          replace: (items, listVersion) => {
            const changes = this.pods.replace(items);
            for (const change of changes) {
              const uid = change.object.metadata?.uid;
              // A pod missing from a relist went while the watch was down; its stored copy is not its
              // last state (it may have been bound in the gap), and is remembered as such.
              if (change.type === 'delete') this.gone.remember(change.object, new Date(this.clock()), false);
              else if (change.type === 'add' && uid !== undefined) this.seenVersions.set(uid, listVersion);
            }
            this.applyPods(changes);
          },
          apply: (type, pod) => {
            // An ADDED event on a watch is the pod's creation, and carries its creation resourceVersion.
            const [uid, version] = [pod.metadata?.uid, pod.metadata?.resourceVersion];
            if (type === 'ADDED' && uid !== undefined && version !== undefined) {
              this.createdVersions.set(uid, version);
              this.seenVersions.set(uid, version);
            }
            const changes = this.pods.apply(type, pod);
            // A DELETED event carries the pod's very last state; a MODIFIED event of a new UID under a
            // known name ends the old incarnation without one.
            for (const change of changes) {
              if (change.type === 'delete')
                this.gone.remember(change.object, new Date(this.clock()), type === 'DELETED' && change.object === pod);
              else if (
                change.type === 'add' &&
                uid !== undefined &&
                version !== undefined &&
                !this.seenVersions.has(uid)
              )
                this.seenVersions.set(uid, version);
            }
            this.applyPods(changes);
          },
        },
      }),
    ];
    this.quotas = new QuotaIndex(deps.quotaMemoryFactor ?? 1, (message) => {
      log?.('warn', message);
    });
    const quotaSource = deps.sources.quotas;
    this.quotaReflector =
      quotaSource === undefined
        ? undefined
        : new Reflector<V1ResourceQuota>({
            what: 'resourcequotas',
            source: quotaSource,
            clock: this.clock,
            ...(log ? { log } : {}),
            ...(deps.reflector ? { options: deps.reflector } : {}),
            ...(deps.conditions ? { conditions: deps.conditions.reporter('resourcequotas reflector') } : {}),
            sink: {
              replace: (items) => {
                this.quotas.apply(this.quotaObjects.replace(items));
              },
              apply: (type, quota) => {
                this.quotas.apply(this.quotaObjects.apply(type, quota));
              },
            },
          });
    this.lockView = {
      node: (name) => this.nodeSnapshot(name),
      ownerPod: (ref) => this.ownerPod(ref),
      lockOwnerFacts: (node, value, ref, namedUid) => this.lockOwnerFacts(node, value, ref, namedUid),
      lockSeenAt: (node, value) => this.lockSeenAt(node, value),
      current: () => this.watching(),
      observeWrite: (snapshot, writtenFor) => {
        this.observeNodeWrite(snapshot, writtenFor);
      },
    };
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

  /** Changes whenever anything that can change a fit or lock decision on any node changes. */
  get generation(): number {
    return this.globalGeneration;
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
   * The sum is cached per node generation: filter asks for every candidate node on every call.
   * Callers must not modify the map.
   */
  usageOn(nodeName: string, excludeUid?: string): ReadonlyMap<string, GpuUse> {
    if (excludeUid !== undefined && this.usage.isOn(nodeName, excludeUid))
      return this.usage.usageOn(nodeName, excludeUid);
    const generation = this.nodeStates.generation(nodeName);
    const cached = this.usageSums.get(nodeName);
    const now = this.clock();
    if (
      cached !== undefined &&
      generation !== undefined &&
      cached.generation === generation &&
      (cached.validUntil === undefined || now < cached.validUntil)
    )
      return cached.usage;
    const usage = this.usage.usageOn(nodeName);
    if (generation !== undefined)
      this.usageSums.set(nodeName, {
        generation: this.nodeStates.generation(nodeName) ?? generation,
        usage,
        validUntil: this.usage.nextExpiryOn(nodeName),
      });
    return usage;
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

  /** The node's lock as the store has it, with the time this process first saw the value. */
  lockOf(nodeName: string): { raw: string; firstSeen: Date } | undefined {
    const lock = this.locks.of(nodeName);
    return lock === undefined ? undefined : { raw: lock.raw, firstSeen: new Date(lock.firstSeenMs) };
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
    return this.gone.byUid(namespace, name, uid);
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
      namedCreatedVersion: namedUid === undefined ? undefined : this.createdVersions.get(namedUid),
      namedSeenVersion: namedUid === undefined ? undefined : this.seenVersions.get(namedUid),
      gone: this.gone.of(ref.namespace, ref.name),
    };
  }

  /** The pod a lock names, as lock rules see it; undefined when the store has no such pod. */
  private ownerPod(ref: PodRef): OwnerPod | undefined {
    const pod = this.pod(ref.namespace, ref.name);
    return pod === undefined ? undefined : ownerPodFrom(pod);
  }

  private lockSeenAt(nodeName: string, value: string): Date | undefined {
    return this.locks.seenAt(nodeName, value);
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
    this.applyNodes(this.nodes.observeWrite(slimNode(object)), true);
    if (writtenFor !== undefined && snapshot.lock !== undefined)
      this.locks.markWrittenFor(name, snapshot.lock, writtenFor);
  }

  private bump(nodeName: string): void {
    this.globalGeneration++;
    this.nodeStates.stamp(nodeName, this.globalGeneration);
  }

  /** `exactly`: each change is one write (a watch event, our write's answer), not a relist's sum of many. */
  private applyNodes(changes: ObjectChange<V1Node>[], exactly: boolean): void {
    for (const change of changes) {
      const node = change.object;
      const name = node.metadata?.name;
      if (name === undefined) continue;
      if (change.type === 'delete') {
        this.locks.remove(name);
        this.nodeStates.remove(name);
        this.usageSums.delete(name);
        this.globalGeneration++;
        this.locks.notify(name);
      } else {
        this.updateNodeState(name, node, change.type === 'update' ? change.previous : undefined, exactly);
      }
      this.emit(this.nodeListeners, (listener) => {
        listener(node, change.type);
      });
    }
  }

  private updateNodeState(name: string, node: V1Node, previous: V1Node | undefined, exactly: boolean): void {
    if (this.nodeStates.update(name, node, previous)) this.bump(name);
    const annotations = node.metadata?.annotations ?? {};
    if (this.locks.observe(name, annotations[NODE_LOCK_ANNOTATION], node.metadata?.resourceVersion, exactly)) {
      this.bump(name);
      this.locks.notify(name);
    }
  }

  private applyPods(changes: ObjectChange<V1Pod>[]): void {
    for (const change of changes) {
      const pod = change.object;
      const uid = pod.metadata?.uid;
      let acknowledgedOn: string | undefined;
      if (change.type === 'delete') {
        if (uid !== undefined) {
          this.usage.remove(uid);
          this.createdVersions.delete(uid);
          this.seenVersions.delete(uid);
          acknowledgedOn = this.unacknowledged.remove(uid);
        }
      } else {
        const problem = this.usage.upsert(pod);
        if (problem !== undefined) this.deps.log?.('warn', problem);
        acknowledgedOn = this.unacknowledged.upsert(pod);
      }
      const [namespace, name] = [pod.metadata?.namespace, pod.metadata?.name];
      if (namespace !== undefined && name !== undefined) this.locks.notifyHolder(namespace, name);
      // A bind waiting for kubelet to acknowledge this pod parks with the lock waiters.
      if (acknowledgedOn !== undefined) this.locks.notify(acknowledgedOn);
      this.emit(this.podListeners, (listener) => {
        listener(pod, change.type);
      });
    }
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
