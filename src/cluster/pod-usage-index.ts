import { describeOddities, readAllocation, type DecodedAllocation } from '../devices/allocation-codec.js';
import { segmentsByContainer } from '../devices/container-segments.js';
import { namespaceUseOf, NO_NAMESPACE_USE, type NamespaceUse } from '../devices/gpu-quota.js';
import { isSidecar, podInitLayout } from '../devices/requests.js';
import { addUsage, podDeviceUsage, type GpuUse } from '../devices/usage.js';
import { ALLOCATED_ANNOTATION } from '../hami/wire.js';
import { allocationNodeOf } from '../hami/pod-node.js';
import type { DerivedIndex, IndexEffects } from './derived-index.js';
import type { ObjectChange } from './object-store.js';

interface PodLike {
  metadata?: { uid?: string; namespace?: string; name?: string; annotations?: Record<string, string> };
  spec?: { nodeName?: string; initContainers?: unknown[]; containers?: unknown[] };
  status?: {
    phase?: string;
    initContainerStatuses?: { name?: string; state?: { terminated?: { exitCode?: number } } }[];
  };
}

/**
 * HAMi's InitContainersAllSucceeded (pkg/device/initcontainer.go): the pod has init containers and
 * every one of them has terminated with exit code 0, so its app containers have started and the
 * init containers' GPUs are free again. Phase is not consulted (HAMi: unreliable here). A sidecar
 * (`restartPolicy: Always`) keeps running beside the app containers and never terminates while
 * they run: its status is not waited for (HAMi's check would wait forever), its share stays counted.
 */
export function initContainersAllSucceeded(pod: PodLike): boolean {
  const declared = pod.spec?.initContainers ?? [];
  const statuses = pod.status?.initContainerStatuses ?? [];
  if (declared.length === 0 || statuses.length < declared.length) return false;
  const sidecars = new Set(declared.filter(isSidecar).map((container) => (container as { name?: unknown }).name));
  return statuses.every(
    (status) =>
      (status.name !== undefined && sidecars.has(status.name)) ||
      (status.state?.terminated !== undefined && status.state.terminated.exitCode === 0),
  );
}

/**
 * How a pod whose allocation annotation cannot be decoded is counted: as the last allocation we
 * could read for it (an earlier annotation, or the one our own bind assumed), or, when there never
 * was one, as using every GPU of its node, so the node takes no new GPU pod until the pod is gone
 * or its annotation is readable. Never as using nothing: that would let the node be overcommitted.
 */
export type UnreadableCounting = 'last-readable' | 'whole-node';

export interface UnreadableAllocation {
  uid: string;
  pod: string;
  node: string;
  problem: string;
  counted: UnreadableCounting;
}

interface Entry {
  node: string;
  /** Where its usage counts against a GPU quota; undefined for an assumption made without one. */
  namespace?: string;
  usage: Map<string, GpuUse>;
  /** The annotation it was decoded from: an update that leaves it alone changes nothing. */
  encoded?: string;
  /** Set while the annotation cannot be decoded. */
  unreadable?: Omit<UnreadableAllocation, 'uid' | 'node'>;
  /** Counted for its app containers only: its init containers have all succeeded. */
  appOnly?: boolean;
  /**
   * The pod, for a scoped ResourceQuota deciding whether it counts it (namespaceUse's `counted`);
   * absent for an assumption made without it, which every scoped quota then counts (the safe side).
   */
  pod?: unknown;
}

/** Every GPU of a node at full use: split count, memory and cores. */
export type NodeCapacity = (node: string) => ReadonlyMap<string, GpuUse>;

/**
 * GPU usage per node, from pods carrying hami.io/vgpu-devices-allocated (bound or being bound),
 * plus an assume cache for binds in flight whose annotations the informer has not delivered yet.
 * Invariant 4 is checked against the sum of both. A pod counts once: as the informer shows it when
 * it does, else as its bind assumed it.
 *
 * One pod's states, as kube-scheduler's cache names them (pkg/scheduler/backend/cache):
 *
 *              assume              finishBinding
 *   (none) ──────────────► Assumed ──────────────► Assumed,
 *     ▲ ▲                  │  ▲  │               binding finished
 *     │ └── forget, or ────┘  └──┘ assume again     │      │
 *     │     expired (TTL      (the fit under the    │      │ informer: the pod with
 *     │     since assume:     lock replaces the     │      │ its allocation (from
 *     │     a safety net)     reservation)          │      │ Assumed too; the
 *     │ ◄── forget, or expired (TTL since ──────────┘      │ assumption is dropped)
 *     │     finishBinding: the informer never saw it)      ▼
 *     │                                                  Bound ◄─┐ unreadable allocation:
 *     └─── informer: pod deleted, finished, ──────────── │  │    │ counted as its last
 *          or its allocation gone                        │  └────┘ readable one, or as
 *   (none) ── informer: a pod with an allocation ───────►┘         the whole node
 *
 * Bound and Assumed are two maps; `byNode` and `byNamespace` link a pod to wherever either places
 * it. A bind may fail after its Binding was sent (the pod may be bound): it keeps its assumption,
 * which expires if the informer never shows the pod bound.
 */
export class PodUsageIndex implements DerivedIndex {
  private readonly pods = new Map<string, Entry>();
  private readonly assumed = new Map<string, Entry & { expiresAt: number; bindingFinished?: true }>();
  /** No assumption expires before this: a quota check walks the assumptions only once one may have expired. */
  private assumedExpiryFloor = Infinity;
  // Filter asks for the usage of every candidate node: index by node so that costs O(pods on it).
  private readonly byNode = new Map<string, Set<string>>();
  private readonly unreadableUids = new Set<string>();
  /** Pods (bound or assumed) by namespace, for the quota check. */
  private readonly byNamespace = new Map<string, Set<string>>();

  /**
   * `onNodeChanged` hears of every change to a node's usage (the store bumps that node's
   * generation). `capacityOf` gives a node's GPUs at full use, what a pod counted `whole-node`
   * takes; the state store passes its inventory (without it such a pod can only be reported).
   */
  constructor(
    private readonly clock: () => number = Date.now,
    private readonly assumeTtlMs = 10 * 60_000,
    private readonly onNodeChanged: (node: string) => void = () => undefined,
    private readonly capacityOf: NodeCapacity = () => new Map(),
  ) {}

  /** The store's pod changes: a deleted pod leaves, any other change is upsert's. */
  onPod(change: ObjectChange<PodLike>, _delivery: unknown, effects: IndexEffects): void {
    const uid = change.object.metadata?.uid;
    if (change.type === 'delete') {
      if (uid !== undefined) this.remove(uid);
      return;
    }
    const problem = this.upsert(change.object);
    if (problem !== undefined) effects.warn(problem);
  }

  /**
   * Applies an informer add/update. Returns a problem string (for the log) when the pod's annotation
   * has just become unreadable, or has just been read with one of HAMi's leniencies (see
   * readAllocation) or realigned onto its containers (see segmentsByContainer): once per value, not
   * on every update of the pod.
   */
  upsert(pod: PodLike): string | undefined {
    const uid = pod.metadata?.uid;
    if (uid === undefined) return undefined;
    const placed = placementOf(pod);
    if (placed === undefined) {
      this.dropPod(uid);
      if (isFinished(pod)) this.dropAssumed(uid);
      return undefined;
    }
    const known = this.pods.get(uid);
    // HAMi shrinks a pod's usage to its app containers the first time it sees every init container
    // succeeded, and keeps it shrunk (a restarted sandbox re-running them does not grow it back).
    const appOnly = (known?.appOnly === true && known.node === placed.node) || initContainersAllSucceeded(pod);
    let problem: string | undefined;
    if (known !== undefined && sameCounting(known, placed, appOnly)) {
      // The usage stands; the scopes it counts under follow the pod (activeDeadlineSeconds may change).
      known.pod = pod;
    } else {
      const allocation = readAllocation(placed.encoded);
      problem =
        'error' in allocation
          ? this.countUnreadable(uid, pod, placed, allocation.error)
          : this.countReadable(uid, pod, placed, allocation, appOnly);
    }
    // The informer now accounts for it: the assumption has done its job (Assumed → Bound).
    this.dropAssumed(uid);
    return problem;
  }

  /**
   * An allocation that cannot be decoded: counted as the last readable one (the informer's earlier
   * value, or the bind's assumption), else as the whole node (UnreadableCounting).
   */
  private countUnreadable(uid: string, pod: PodLike, placed: Placement, error: string): string {
    const { node, encoded } = placed;
    const known = this.pods.get(uid);
    const assumed = this.assumed.get(uid);
    const lastReadable =
      known?.node === node && known.unreadable?.counted !== 'whole-node'
        ? known.usage
        : assumed?.node === node
          ? assumed.usage
          : undefined;
    const counted: UnreadableCounting = lastReadable === undefined ? 'whole-node' : 'last-readable';
    const podName = nameOf(pod);
    this.dropPod(uid);
    this.setPod(uid, {
      node,
      ...namespaceOf(pod),
      usage: lastReadable ?? new Map<string, GpuUse>(),
      encoded,
      pod,
      unreadable: { pod: podName, problem: error, counted },
    });
    this.unreadableUids.add(uid);
    this.link(node, uid);
    const how =
      counted === 'last-readable'
        ? 'its last readable allocation'
        : `using every GPU of node ${node} until it is readable or the pod is gone`;
    return `pod ${podName}: unreadable ${ALLOCATED_ANNOTATION} (${error}); counted as ${how}`;
  }

  /** A readable allocation, counted per container (app containers only once `appOnly`); a note when read leniently. */
  private countReadable(
    uid: string,
    pod: PodLike,
    placed: Placement,
    allocation: ReadableAllocation,
    appOnly: boolean,
  ): string | undefined {
    const { node, encoded } = placed;
    const before = this.pods.get(uid)?.encoded;
    this.dropPod(uid);
    const { containers, realigned } = segmentsByContainer(allocation.containers, pod);
    const usage = containerUsage(pod, containers, appOnly);
    this.setPod(uid, { node, ...namespaceOf(pod), usage, encoded, pod, ...(appOnly ? { appOnly } : {}) });
    this.link(node, uid);
    if (before === encoded || (allocation.oddities.length === 0 && !realigned)) return undefined;
    const notes = [
      ...(allocation.oddities.length > 0
        ? [`read as HAMi v2.10 reads it (${describeOddities(allocation.oddities)})`]
        : []),
      ...(realigned ? [REALIGNED_NOTE] : []),
    ];
    return `pod ${nameOf(pod)}: ${ALLOCATED_ANNOTATION} ${notes.join('; ')}`;
  }

  remove(uid: string): void {
    this.dropPod(uid);
    this.dropAssumed(uid);
  }

  /**
   * `namespace` makes the assumption count against the namespace's GPU quota until the informer
   * takes over; `pod` lets a scoped quota tell whether it counts it (without it, every one does).
   */
  assume(uid: string, node: string, usage: Map<string, GpuUse>, namespace?: string, pod?: unknown): void {
    this.dropAssumed(uid);
    const entry = {
      node,
      usage,
      expiresAt: this.clock() + this.assumeTtlMs,
      ...(namespace === undefined ? {} : { namespace }),
      ...(pod === undefined ? {} : { pod }),
    };
    this.assumed.set(uid, entry);
    this.assumedExpiryFloor = Math.min(this.assumedExpiryFloor, entry.expiresAt);
    this.linkNamespace(entry, uid);
    this.link(node, uid);
  }

  /**
   * What the namespace's GPU pods use (bound and assumed, finished pods excluded), leaving out
   * `excludeUid` (the pod being placed). A pod counted `whole-node` adds its last readable usage
   * (none when it never had one): its node is blocked for everybody, but how much it takes from
   * its namespace cannot be read. `counted` keeps only the pods it accepts (a scoped
   * ResourceQuota's; an assumption made without its pod is always kept). Summed on every call, with
   * no memo: filter and prioritize ask once per call (viewPod's budget), not once per node, and a
   * memo kept per namespace generation did not move bench:filter (5000 nodes, 40000 pods: the quota
   * case 359 ms p50 with it, 139 ms without, inside this machine's noise).
   */
  namespaceUse(namespace: string, excludeUid?: string, counted?: (pod: unknown) => boolean): Readonly<NamespaceUse> {
    this.dropExpiredAssumptions();
    const uids = this.byNamespace.get(namespace);
    if (uids === undefined) return NO_NAMESPACE_USE;
    return this.sumNamespace(namespace, uids, excludeUid, counted);
  }

  /** A pod counts once: as the informer shows it, else as its bind assumed it. */
  private sumNamespace(
    namespace: string,
    uids: ReadonlySet<string>,
    excludeUid: string | undefined,
    counted?: (pod: unknown) => boolean,
  ): NamespaceUse {
    const total = { gpus: 0, memoryMiB: 0, cores: 0 };
    for (const uid of uids) {
      if (uid === excludeUid) continue;
      const bound = this.pods.get(uid);
      const entry = bound?.namespace === namespace ? bound : this.assumed.get(uid);
      if (entry?.namespace !== namespace) continue;
      if (counted !== undefined && entry.pod !== undefined && !counted(entry.pod)) continue;
      const own = namespaceUseOf(entry.usage);
      total.gpus += own.gpus;
      total.memoryMiB += own.memoryMiB;
      total.cores += own.cores;
    }
    return total;
  }

  forget(uid: string): void {
    this.dropAssumed(uid);
  }

  /**
   * The bind's Binding went out (kube-scheduler's FinishBinding): the assumption now waits for the
   * informer, and expires `assumeTtlMs` from now if the informer never shows the pod bound.
   */
  finishBinding(uid: string): void {
    const entry = this.assumed.get(uid);
    if (entry === undefined) return;
    entry.bindingFinished = true;
    entry.expiresAt = this.clock() + this.assumeTtlMs;
    this.assumedExpiryFloor = Math.min(this.assumedExpiryFloor, entry.expiresAt);
  }

  isAssumed(uid: string): boolean {
    return this.assumed.has(uid);
  }

  /** Usage on `node` by bound and assumed pods, leaving out `excludeUid` (the pod being placed). */
  usageOn(node: string, excludeUid?: string): Map<string, GpuUse> {
    const total = new Map<string, GpuUse>();
    const now = this.clock();
    let wholeNode = false;
    for (const uid of this.byNode.get(node) ?? []) {
      if (uid === excludeUid) continue;
      const bound = this.pods.get(uid);
      if (bound?.node === node) {
        if (bound.unreadable?.counted === 'whole-node') wholeNode = true;
        else addUsage(total, bound.usage);
        continue;
      }
      const assumed = this.assumed.get(uid);
      if (assumed?.node !== node) continue;
      if (assumed.expiresAt <= now) this.dropAssumed(uid);
      else addUsage(total, assumed.usage);
    }
    if (wholeNode) saturate(total, this.capacityOf(node));
    return total;
  }

  /** Pods whose allocation annotation cannot be decoded now, and how each is counted meanwhile. */
  unreadable(): UnreadableAllocation[] {
    const found: UnreadableAllocation[] = [];
    for (const uid of this.unreadableUids) {
      const entry = this.pods.get(uid);
      if (entry?.unreadable !== undefined) found.push({ uid, node: entry.node, ...entry.unreadable });
    }
    return found;
  }

  /**
   * The nodes `uid` is accounted on (bound, assumed, or both on different nodes); usually none for
   * a pod being placed. Asked once per filter call instead of isOn once per node name.
   */
  nodesOf(uid: string): string[] {
    const nodes: string[] = [];
    const bound = this.pods.get(uid)?.node;
    if (bound !== undefined) nodes.push(bound);
    const assumed = this.assumed.get(uid)?.node;
    if (assumed !== undefined && assumed !== bound) nodes.push(assumed);
    return nodes;
  }

  /** Is `uid` accounted on `node` (bound or assumed)? */
  isOn(node: string, uid: string): boolean {
    return this.byNode.get(node)?.has(uid) === true;
  }

  /** Earliest expiry of an assumption on `node`, so a cached sum knows when it goes stale. */
  nextExpiryOn(node: string): number | undefined {
    let earliest: number | undefined;
    for (const uid of this.byNode.get(node) ?? []) {
      const assumed = this.assumed.get(uid);
      if (assumed?.node === node && (earliest === undefined || assumed.expiresAt < earliest))
        earliest = assumed.expiresAt;
    }
    return earliest;
  }

  /** Pods accounted on `node` (bound or assumed), for diagnostics and tests. */
  podsOn(node: string): string[] {
    return [...(this.byNode.get(node) ?? [])];
  }

  private link(node: string, uid: string): void {
    this.onNodeChanged(node);
    let uids = this.byNode.get(node);
    if (!uids) this.byNode.set(node, (uids = new Set()));
    uids.add(uid);
  }

  private unlink(node: string, uid: string): void {
    this.onNodeChanged(node);
    // Keep the link while the other map still places this uid on the node.
    if (this.pods.get(uid)?.node === node || this.assumed.get(uid)?.node === node) return;
    const uids = this.byNode.get(node);
    uids?.delete(uid);
    if (uids?.size === 0) this.byNode.delete(node);
  }

  private setPod(uid: string, entry: Entry): void {
    this.pods.set(uid, entry);
    this.linkNamespace(entry, uid);
  }

  private linkNamespace(entry: Entry, uid: string): void {
    if (entry.namespace === undefined) return;
    let uids = this.byNamespace.get(entry.namespace);
    if (!uids) this.byNamespace.set(entry.namespace, (uids = new Set()));
    uids.add(uid);
  }

  private unlinkNamespace(entry: Entry, uid: string): void {
    const namespace = entry.namespace;
    if (namespace === undefined) return;
    // Keep the link while the other map still places this uid in the namespace.
    if (this.pods.get(uid)?.namespace === namespace || this.assumed.get(uid)?.namespace === namespace) return;
    const uids = this.byNamespace.get(namespace);
    uids?.delete(uid);
    if (uids?.size === 0) this.byNamespace.delete(namespace);
  }

  /** Walks the assumptions (binds in flight) only once the earliest of them may have expired. */
  private dropExpiredAssumptions(): void {
    const now = this.clock();
    if (now < this.assumedExpiryFloor) return;
    let floor = Infinity;
    for (const [uid, entry] of this.assumed) {
      if (entry.expiresAt <= now) this.dropAssumed(uid);
      else floor = Math.min(floor, entry.expiresAt);
    }
    this.assumedExpiryFloor = floor;
  }

  private dropPod(uid: string): void {
    const entry = this.pods.get(uid);
    if (!entry) return;
    this.pods.delete(uid);
    this.unlinkNamespace(entry, uid);
    this.unreadableUids.delete(uid);
    this.unlink(entry.node, uid);
  }

  private dropAssumed(uid: string): void {
    const entry = this.assumed.get(uid);
    if (!entry) return;
    this.assumed.delete(uid);
    this.unlinkNamespace(entry, uid);
    this.unlink(entry.node, uid);
  }
}

function namespaceOf(pod: PodLike): { namespace?: string } {
  const namespace = pod.metadata?.namespace;
  return namespace === undefined ? {} : { namespace };
}

/** Raises every GPU of `capacity` in `into` to at least its full use. */
function saturate(into: Map<string, GpuUse>, capacity: ReadonlyMap<string, GpuUse>): void {
  for (const [uuid, full] of capacity) {
    const current = into.get(uuid);
    into.set(
      uuid,
      current === undefined
        ? { ...full }
        : {
            slots: Math.max(current.slots, full.slots),
            memoryMiB: Math.max(current.memoryMiB, full.memoryMiB),
            cores: Math.max(current.cores, full.cores),
          },
    );
  }
}

type ReadableAllocation = DecodedAllocation;

/** Where the informer shows a pod's allocation: its node and the annotation's value. */
interface Placement {
  node: string;
  encoded: string;
}

const REALIGNED_NOTE =
  'its GPU segments do not line up with the containers asking for nvidia.com/gpu; counted in the order the ' +
  'device plugin hands them out (a value written without the empty segments of GPU-less containers, HAMi #2899)';

function isFinished(pod: PodLike): boolean {
  return pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';
}

/** The pod's allocation and node, when it carries one and has not finished; else undefined (it uses nothing). */
function placementOf(pod: PodLike): Placement | undefined {
  const encoded = pod.metadata?.annotations?.[ALLOCATED_ANNOTATION];
  const node = allocationNodeOf(pod);
  if (encoded === undefined || node === undefined || node === '' || isFinished(pod)) return undefined;
  return { node, encoded };
}

/** Whether an update leaves the pod counted as it is: same node and value, and (readable) same init-container state. */
function sameCounting(known: Entry, placed: Placement, appOnly: boolean): boolean {
  return (
    known.node === placed.node &&
    known.encoded === placed.encoded &&
    (known.unreadable !== undefined || (known.appOnly === true) === appOnly)
  );
}

/**
 * The pod's usage from its per-container segments. Segments go to containers as the device plugin
 * hands them out, init containers first: app-only drops the plain init containers' and keeps the
 * sidecars', which run beside the app containers.
 */
function containerUsage(
  pod: PodLike,
  containers: ReadableAllocation['containers'],
  appOnly: boolean,
): Map<string, GpuUse> {
  const layout = podInitLayout(pod);
  if (!appOnly) return podDeviceUsage(containers, layout);
  const initCount = typeof layout === 'number' ? layout : layout.length;
  const kept = containers.filter(
    (_, position) => position >= initCount || (typeof layout !== 'number' && layout[position] === true),
  );
  return podDeviceUsage(kept, 0);
}

function nameOf(pod: PodLike): string {
  return `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
}
