import { isTerminal, podKey, type AllocationRecord, type ObservedPod, type Snapshot } from './observed-state.js';

export interface Violation {
  invariant:
    | 'gpu-capacity'
    | 'foreign-devices'
    | 'stale-lock'
    | 'released-while-awaiting'
    | 'not-bound'
    | 'foreign-container-env';
  message: string;
  /** Objects whose time lines explain it: `ns/name` of pods, `node/<name>` of nodes. */
  subjects: string[];
}

/** One container's devices: uuid, memory MiB, cores (what the capacity check needs). */
export interface DecodedDevice {
  uuid: string;
  memoryMiB: number;
  cores: number;
}

/** Decodes hami.io/vgpu-devices-allocated; the chaos checker passes the stand-in's decoder, not ours. */
export type AllocationDecoder = (encoded: string) => DecodedDevice[][] | { error: string };

export const ALLOCATED_ANNOTATION = 'hami.io/vgpu-devices-allocated';
export const BIND_PHASE_ANNOTATION = 'hami.io/bind-phase';
export const LOCK_ANNOTATION = 'hami.io/mutex.lock';

/**
 * Invariant 4: per GPU, the memory, cores and task slots of the pods bound there (not terminal,
 * deleting ones included: their containers may still run) stay within capacity. A GPU counts one
 * slot per container that uses it.
 */
export function checkCapacity(snapshot: Snapshot, decode: AllocationDecoder): Violation[] {
  const gpus = new Map<string, { node: string; memoryMiB: number; cores: number; slots: number }>();
  for (const node of snapshot.nodes) for (const gpu of node.gpus) gpus.set(gpu.uuid, { node: node.name, ...gpu });
  const used = new Map<string, { memoryMiB: number; cores: number; slots: number; pods: string[] }>();
  const violations: Violation[] = [];
  for (const pod of snapshot.pods) {
    const encoded = pod.annotations[ALLOCATED_ANNOTATION];
    if (pod.nodeName === undefined || isTerminal(pod) || encoded === undefined) continue;
    const allocation = decode(encoded);
    if ('error' in allocation) {
      violations.push({
        invariant: 'gpu-capacity',
        message: `${podKey(pod)} is bound with an allocation the plugin cannot read: ${allocation.error}`,
        subjects: [podKey(pod)],
      });
      continue;
    }
    for (const container of allocation) {
      for (const device of container) {
        const gpu = gpus.get(device.uuid);
        if (gpu?.node !== pod.nodeName) {
          violations.push({
            invariant: 'gpu-capacity',
            message: `${podKey(pod)} on ${pod.nodeName} was given ${device.uuid}, which that node does not have`,
            subjects: [podKey(pod), `node/${pod.nodeName}`],
          });
          continue;
        }
        const tally = used.get(device.uuid) ?? { memoryMiB: 0, cores: 0, slots: 0, pods: [] };
        tally.memoryMiB += device.memoryMiB;
        tally.cores += device.cores;
        tally.slots += 1;
        if (!tally.pods.includes(podKey(pod))) tally.pods.push(podKey(pod));
        used.set(device.uuid, tally);
      }
    }
  }
  for (const [uuid, tally] of used) {
    const gpu = gpus.get(uuid);
    if (gpu === undefined) continue;
    const over = [
      tally.memoryMiB > gpu.memoryMiB ? `memory ${tally.memoryMiB}/${gpu.memoryMiB} MiB` : '',
      tally.cores > gpu.cores ? `cores ${tally.cores}/${gpu.cores}` : '',
      tally.slots > gpu.slots ? `slots ${tally.slots}/${gpu.slots}` : '',
    ].filter(Boolean);
    if (over.length > 0)
      violations.push({
        invariant: 'gpu-capacity',
        message: `${uuid} on ${gpu.node} is over capacity: ${over.join(', ')} (pods ${tally.pods.join(', ')})`,
        subjects: [...tally.pods, `node/${gpu.node}`],
      });
  }
  return violations;
}

/** Invariant 7: kubelet admitted a pod and the plugin handed it another pod's devices. */
export function checkForeignDevices(records: readonly AllocationRecord[]): Violation[] {
  return records
    .filter(
      (record): record is AllocationRecord & { admitted: NonNullable<AllocationRecord['admitted']> } =>
        record.ok &&
        record.admitted !== undefined &&
        record.resolvedTo !== undefined &&
        record.resolvedTo.uid !== record.admitted.uid,
    )
    .map((record) => ({
      invariant: 'foreign-devices' as const,
      message: `kubelet admitted ${podKey(record.admitted)} (${record.admitted.uid}) on ${record.node} and the plugin gave it the devices of ${podKey(record.resolvedTo ?? record.admitted)} (${record.resolvedTo?.uid ?? '?'})`,
      subjects: [podKey(record.admitted), podKey(record.resolvedTo ?? record.admitted), `node/${record.node}`],
    }));
}

/**
 * Pending GPU pods after the quiesce phase: each could fit (the workload keeps demand below a bound
 * that guarantees it).
 */
export function checkAllBound(snapshot: Snapshot): Violation[] {
  return snapshot.pods
    .filter((pod) => pod.gpuCount > 0 && pod.nodeName === undefined && !pod.deleting && !isTerminal(pod))
    .map((pod) => ({
      invariant: 'not-bound' as const,
      message: `${podKey(pod)} is still not bound after the quiesce phase`,
      subjects: [podKey(pod)],
    }));
}

export interface LockTrackerOptions {
  /** How long a lock whose owner is gone, terminal, replaced or deleting may survive. */
  staleAfterMs: number;
  /**
   * How long after a release seen while its owner awaited Allocate a record of the plugin's Allocate
   * that resolved the owner through that lock may still arrive (10 s by default). The plugin records
   * a call when it ends, after its last write, the lock release: a snapshot taken between the two
   * sees the lock gone and no record yet (chaos on real nodes, seed 1, right after kube-apiserver
   * came back).
   */
  releaseGraceMs?: number;
  /** Lock releases that NODELOCK_FORCE_AFTER allows (then an awaiting owner's lock may go). */
  forceAfterMs?: number;
  /**
   * More time for a lock whose owner is gone, on nodes with a real kubelet: without the owner's last
   * state (a replica restarted, or it never saw the pod) the lock stays until the kubelet renews its
   * Lease and a margin passes (kubelet-may-admit: 10 s renewal + 5 s), judged from when a replica
   * first saw it, which a replica restart resets (seed 23: 45.8 s with both replicas restarted
   * around the delete).
   */
  goneOwnerExtraMs?: number;
}

/** A release that looked premature: judged once the plugin's in-flight Allocate, if any, has recorded. */
interface SuspectRelease {
  violation: Violation;
  node: string;
  owner: string;
  uid: string;
  seenAt: number;
}

interface TrackedLock {
  raw: string;
  owner: { namespace: string; name: string } | undefined;
  firstSeen: number;
  /** UID of the pod of that name when the lock was first seen: a later different UID is a replacement. */
  ownerUid: string | undefined;
  badSince: number | undefined;
  reported: boolean;
}

function lockOwner(raw: string): { namespace: string; name: string } | undefined {
  // <time>,<namespace>,<pod>; HAMi's legacy value is a bare time.
  const parts = raw.split(',');
  return parts.length === 3 && parts[1] && parts[2] ? { namespace: parts[1], name: parts[2] } : undefined;
}

const REPLACED = 'was replaced by a new pod of the same name';

/**
 * Follows every node's lock across snapshots: a lock whose owner is gone, terminal, replaced, bound
 * elsewhere or being deleted (unless still awaiting Allocate on this node) must be gone within
 * `staleAfterMs` of that becoming true (time the system could not act, e.g. the apiserver down, is
 * excused by the caller); and a lock must never disappear while its owner is bound to that node and
 * awaiting Allocate (no record of an Allocate for it yet, nor within `releaseGraceMs` a record of
 * one that resolved it through that lock), being deleted or not.
 */
export class LockTracker {
  private readonly locks = new Map<string, TrackedLock>();
  private suspects: SuspectRelease[] = [];

  constructor(private readonly options: LockTrackerOptions) {}

  /** `excused(from, to)`: how much of that span the system could not act (apiserver down, no replica up). */
  observe(
    snapshot: Snapshot,
    records: readonly AllocationRecord[],
    excused: (from: number, to: number) => number = () => 0,
  ): Violation[] {
    const violations: Violation[] = this.judgeSuspects(records, snapshot.at);
    const byName = new Map(snapshot.pods.map((pod) => [podKey(pod), pod]));
    const allocated = new Set(
      records.map((record) => record.resolvedTo?.uid).filter((uid): uid is string => uid !== undefined),
    );
    for (const node of snapshot.nodes) {
      const tracked = this.locks.get(node.name);
      // A re-stamp by the owner's own (retried) bind keeps its name and its incarnation: a new value of
      // the same name written while another incarnation carries it is that one's lock (invariant 9;
      // two snapshots can straddle a release and the next incarnation's take).
      const trackedOwner = tracked?.owner;
      const sameName =
        trackedOwner !== undefined &&
        node.lock !== undefined &&
        podKey(trackedOwner) === podKey(lockOwner(node.lock) ?? { namespace: '', name: '' });
      const sameOwner =
        sameName && (tracked?.ownerUid === undefined || byName.get(podKey(trackedOwner))?.uid === tracked.ownerUid);
      if (tracked !== undefined && tracked.raw !== node.lock && sameOwner) {
        // A re-stamp by the owner's own (retried) bind: the same lock, younger.
        tracked.raw = node.lock ?? tracked.raw;
      } else if (tracked !== undefined && tracked.raw !== node.lock) {
        const released = this.checkRelease(node.name, tracked, byName, allocated, snapshot.at);
        if (released) this.suspects.push({ ...released, seenAt: snapshot.at });
        this.locks.delete(node.name);
      }
      if (node.lock === undefined) continue;
      let current = this.locks.get(node.name);
      if (current === undefined) {
        const owner = lockOwner(node.lock);
        current = {
          raw: node.lock,
          owner,
          firstSeen: snapshot.at,
          ownerUid: owner && byName.get(podKey(owner))?.uid,
          badSince: undefined,
          reported: false,
        };
        this.locks.set(node.name, current);
      }
      const why = this.whyStale(node.name, current, byName);
      if (why === undefined) {
        current.badSince = undefined;
        continue;
      }
      current.badSince ??= snapshot.at;
      // An owner replaced by a new pod of its name is gone too: kubelet may still admit it (lock-owner.ts).
      const gone = why === 'was gone' || why === REPLACED;
      const allowed = this.options.staleAfterMs + (gone ? (this.options.goneOwnerExtraMs ?? 0) : 0);
      if (!current.reported && snapshot.at - current.badSince > allowed + excused(current.badSince, snapshot.at)) {
        current.reported = true;
        violations.push({
          invariant: 'stale-lock',
          message: `the lock ${current.raw} on ${node.name} survived ${((snapshot.at - current.badSince) / 1000).toFixed(1)} s after its owner ${why}`,
          subjects: [`node/${node.name}`, ...(current.owner ? [podKey(current.owner)] : [])],
        });
      }
    }
    return violations;
  }

  /**
   * Releases still suspected at the end of a run are violations: nothing can explain them any more.
   * Call after the last observe.
   */
  finish(): Violation[] {
    const left = this.suspects.map((suspect) => suspect.violation);
    this.suspects = [];
    return left;
  }

  /**
   * A suspect is cleared by a record of an Allocate that resolved the owner (this incarnation)
   * through a lock it held: that call read the lock before it went, and released it itself.
   * Once the grace has passed without one, it is a violation.
   */
  private judgeSuspects(records: readonly AllocationRecord[], now: number): Violation[] {
    const graceMs = this.options.releaseGraceMs ?? 10_000;
    const violations: Violation[] = [];
    this.suspects = this.suspects.filter((suspect) => {
      const explained = records.some(
        (record) =>
          record.resolvedTo?.uid === suspect.uid &&
          record.node === suspect.node &&
          record.lock !== undefined &&
          podKey(lockOwner(record.lock) ?? { namespace: '', name: '' }) === suspect.owner,
      );
      if (explained) return false;
      if (now - suspect.seenAt < graceMs) return true;
      violations.push(suspect.violation);
      return false;
    });
    return violations;
  }

  private whyStale(node: string, lock: TrackedLock, byName: Map<string, ObservedPod>): string | undefined {
    if (lock.owner === undefined) return undefined;
    const pod = byName.get(podKey(lock.owner));
    if (pod === undefined) return 'was gone';
    if (lock.ownerUid !== undefined && pod.uid !== lock.ownerUid) return REPLACED;
    if (isTerminal(pod)) return `was ${pod.phase ?? 'terminal'}`;
    // Being deleted while bound here and awaiting Allocate, the lock must stay: kubelet may still
    // admit the pod and the plugin find it through the lock.
    if (pod.deleting && !(pod.nodeName === node && pod.annotations[BIND_PHASE_ANNOTATION] === 'allocating'))
      return 'was being deleted';
    if (pod.nodeName !== undefined && pod.nodeName !== node) return `was bound to ${pod.nodeName}`;
    return undefined;
  }

  private checkRelease(
    node: string,
    lock: TrackedLock,
    byName: Map<string, ObservedPod>,
    allocated: Set<string>,
    now: number,
  ): Omit<SuspectRelease, 'seenAt'> | undefined {
    if (lock.owner === undefined) return undefined;
    const pod = byName.get(podKey(lock.owner));
    if (pod === undefined || pod.uid !== (lock.ownerUid ?? pod.uid) || pod.nodeName !== node || isTerminal(pod))
      return undefined;
    if (pod.annotations[BIND_PHASE_ANNOTATION] !== 'allocating' || allocated.has(pod.uid)) return undefined;
    if (this.options.forceAfterMs !== undefined && now - lock.firstSeen >= this.options.forceAfterMs) return undefined;
    const violation: Violation = {
      invariant: 'released-while-awaiting',
      message: `the lock ${lock.raw} on ${node} went away while ${podKey(pod)} was bound there awaiting Allocate (no Allocate recorded for it)`,
      subjects: [`node/${node}`, podKey(pod)],
    };
    return { violation, node, owner: podKey(pod), uid: pod.uid };
  }
}
