import type { PodRef } from './lock-value.js';
import { mayBeAdmittedOn, type GoneIncarnation } from './lock-owner.js';
import { systemClock, type Clock } from '../base/clock.js';

/**
 * May the kubelet of a node still admit a pod that is gone from the API, and so call the device
 * plugin's Allocate while the node lock resolves "the pod"?
 *
 * kubelet admits pods from its watch, in order. A pod bound to the node and force-deleted before
 * kubelet took it (kubelet frozen, slow or cut off) is still admitted from the queued event, and
 * kubelet calls Allocate for it (19 of 19 on a real kubelet v1.34). HAMi's plugin serves whichever
 * pod the lock names then: if the lock has moved on to the next pod, the dead pod consumes the next
 * pod's allocation and the next pod fails (UnexpectedAdmissionError). So such a lock is kept until
 * one of these shows that the kubelet is past the dead pod:
 * - the state store saw the incarnations the lock may have been written for go (by UID: a later
 *   incarnation of the name created and deleted in between does not hide an earlier one), and none
 *   was left bound here waiting for Allocate (never bound: kubelet never had it; allocated or
 *   failed: the plugin is done with it; lock-owner.ts mayBeAdmittedOn);
 * - no kubelet ever ran on the node: it has no kubelet Lease and reports no kubelet version (a
 *   node object made by hand, or a simulated one). A kubelet creates its Lease some seconds after it
 *   registers (12 s seen here), so a missing Lease alone proves nothing;
 * - the kubelet recorded an Event about that pod incarnation (its Allocate was answered
 *   `pods "…" not found` and kubelet rejected it): the fast path, milliseconds after kubelet resumes;
 * - the kubelet renewed its Lease after the pod was gone, and `aliveMarginMs` passed after we saw
 *   that without such an Event: kubelet was running and had time to drain its queue (it restarted
 *   and relisted, so it never saw the pod). This one is a judgement, not a proof: a kubelet whose
 *   pod watch lags its Lease by more than the margin could still admit the pod later;
 * - with no last state of the pod (this process started after it went), the same judgement from the
 *   apiserver's own records, so that a restart of ours does not start it over: the Lease was renewed
 *   more than `aliveMarginMs` after the lock was written (both times as the apiserver recorded them in
 *   managedFields, so no clock of ours or kubelet's is compared with another) and at least
 *   `aliveMarginMs` (plus a second of rounding) before the apiserver answered the Lease read (its
 *   Date header; our clock only when it sends none). Found by chaos on real nodes: with replicas
 *   SIGKILLed every few seconds each new process started its wait for a renewal afresh, and a lock
 *   stayed 90 s.
 * Without any of them the lock stays held (and stalls at NODELOCK_EXPIRE like any lock awaiting
 * allocation), which costs the next pod time but never its GPUs.
 */

/** The node's kubelet Lease as kubelet-admission reads it. */
export interface NodeLeaseRecord {
  resourceVersion: string;
  /** When the apiserver last recorded a write of it (its newest managedFields time), if it says. */
  renewedAt: Date | undefined;
  /**
   * The apiserver's clock when it answered the read (its Date header, whole seconds), so that how
   * long ago the Lease was renewed is judged on one clock: ours may be off by minutes.
   */
  readAt?: Date | undefined;
}

/** The kubelet's own traces in the API. */
export interface KubeletEvidenceApi {
  /** The node's Lease in kube-node-lease; undefined when there is none. */
  nodeLease(node: string, signal?: AbortSignal): Promise<NodeLeaseRecord | undefined>;
  /** Whether a kubelet ever registered the node (status.nodeInfo.kubeletVersion is set). */
  kubeletRegistered(node: string, signal?: AbortSignal): Promise<boolean>;
  /** Whether the kubelet of `node` recorded an Event about this pod incarnation. */
  kubeletReportedOn(node: string, pod: PodRef & { uid: string }, signal?: AbortSignal): Promise<boolean>;
  /**
   * The pods HAMi-style binds placed on `node` that its kubelet has not acknowledged yet
   * (kubelet-acknowledgement.ts).
   */
  awaitingAcknowledgement(node: string, signal?: AbortSignal): Promise<PodRef[]>;
}

/** A lock on `node` whose owner is gone, as mayStillAdmit is asked about it. */
export interface GoneOwnerLock {
  node: string;
  /** The pod the lock names. */
  owner: PodRef;
  /** The lock's value as on the node. */
  lockValue: string;
  /** The gone incarnations the lock may have been written for (empty: the store saw none go). */
  candidates: readonly GoneIncarnation[];
  /** The apiserver's record of the lock's write (the node's managedFields), if known. */
  lockWrittenAt?: Date | undefined;
}

/** The questions NodeLocks asks of the kubelet's traces before it frees a lock that may still be used. */
export interface KubeletAdmissionCheck {
  /** Before it frees a lock whose owner is gone. */
  mayStillAdmit(lock: GoneOwnerLock, signal?: AbortSignal): Promise<boolean>;
  /**
   * Before NODELOCK_FORCE_AFTER frees the stalled lock of `owner` (bound to `node`, or gone from
   * there while allocating): may it go without kubelet later serving a queued pod through a lock that
   * names another? Yes when no kubelet ever ran on the node. Otherwise only when both hold:
   * - the kubelet's Lease was renewed more than the margin after the lock was written
   *   (`lockWrittenAt`, the apiserver's record, else the lock's stamp): a kubelet that has not renewed
   *   since is frozen or cut off, and admits the owner from its queue once it runs;
   * - no other pod placed on the node awaits kubelet's acknowledgement: kubelet admits one pod at a
   *   time, so such a pod is the one whose Allocate is stuck, and the owner waits behind it. Only the
   *   pod inside the stuck call has been resolved through the lock already.
   */
  mayForce(node: string, owner: PodRef, lockWrittenAt: Date | undefined, signal?: AbortSignal): Promise<boolean>;
}

/**
 * The candidates kubelet may still admit on `node`; undefined when the store saw none of them go, so
 * that their last states are unknown and any of them may be.
 */
export function admissibleCandidates(
  candidates: readonly GoneIncarnation[],
  node: string,
): GoneIncarnation[] | undefined {
  return candidates.length === 0 ? undefined : candidates.filter((candidate) => mayBeAdmittedOn(candidate, node));
}

export interface KubeletAdmissionDeps {
  api: KubeletEvidenceApi;
  clock?: Clock;
  /** How long after a Lease renewal is seen kubelet gets to report on the pod; default 5 s. */
  aliveMarginMs?: number;
  /** Nodes whose Lease is tracked at most (oldest dropped first); default 10,000. */
  maxTracked?: number;
}

interface LeaseTrack {
  lockValue: string;
  /** The Lease's version when the owner was first found gone with this lock in place. */
  firstVersion: string;
  /** When we first saw a later version: kubelet has run since the owner was gone. */
  renewalSeenAtMs?: number;
}

export const DEFAULT_KUBELET_ALIVE_MARGIN_MS = 5_000;

export class KubeletAdmission implements KubeletAdmissionCheck {
  private readonly tracks = new Map<string, LeaseTrack>();
  private readonly clock: Clock;
  private readonly marginMs: number;
  private readonly maxTracked: number;

  constructor(private readonly deps: KubeletAdmissionDeps) {
    this.clock = deps.clock ?? systemClock;
    this.marginMs = deps.aliveMarginMs ?? DEFAULT_KUBELET_ALIVE_MARGIN_MS;
    this.maxTracked = deps.maxTracked ?? 10_000;
  }

  async mayStillAdmit(lock: GoneOwnerLock, signal?: AbortSignal): Promise<boolean> {
    const { node } = lock;
    const admissible = admissibleCandidates(lock.candidates, node);
    if (admissible?.length === 0) return false;
    const found = await this.deps.api.nodeLease(node, signal);
    if (found === undefined && !(await this.deps.api.kubeletRegistered(node, signal))) return this.forget(node);
    if (admissible !== undefined && (await this.allReportedOn(node, lock.owner, admissible, signal))) return false;
    const now = this.clock();
    // managedFields times are whole seconds, cut down: the renewal may be up to a second later than
    // recorded. How long ago it was is read on the apiserver's clock when it says (Date header, also
    // whole seconds: the one second more covers both), else on ours.
    const renewedSince =
      renewedWellAfter(found?.renewedAt, lock.lockWrittenAt, this.marginMs) &&
      renewedLongAgo(found, now, this.marginMs);
    if (admissible === undefined && renewedSince) return this.forget(node);
    // A kubelet without a Lease yet: its creation will count as the renewal.
    return this.awaitingRenewal(node, lock.lockValue, found?.resourceVersion ?? '', now);
  }

  /** Stops tracking the node's Lease: kubelet is past the gone owner. */
  private forget(node: string): false {
    this.tracks.delete(node);
    return false;
  }

  /**
   * Whether kubelet has not yet been seen running long enough since the owner went: no Lease
   * version after the one of the first look at this lock, or one seen less than the margin ago.
   */
  private awaitingRenewal(node: string, lockValue: string, lease: string, now: number): boolean {
    const track = this.tracks.get(node);
    if (track?.lockValue !== lockValue) {
      // The first look at this lock with its owner gone: only a later renewal proves kubelet ran since.
      this.tracks.delete(node);
      this.tracks.set(node, { lockValue, firstVersion: lease });
      while (this.tracks.size > this.maxTracked) {
        const oldest = this.tracks.keys().next().value;
        if (oldest === undefined) break;
        this.tracks.delete(oldest);
      }
      return true;
    }
    if (lease !== track.firstVersion) track.renewalSeenAtMs ??= now;
    return track.renewalSeenAtMs === undefined || now - track.renewalSeenAtMs < this.marginMs;
  }

  /** Whether kubelet recorded an Event about each of these incarnations (one that has no UID never counts). */
  private async allReportedOn(
    node: string,
    owner: PodRef,
    incarnations: readonly GoneIncarnation[],
    signal?: AbortSignal,
  ): Promise<boolean> {
    for (const { uid } of incarnations) {
      if (uid === undefined || !(await this.deps.api.kubeletReportedOn(node, { ...owner, uid }, signal))) return false;
    }
    return true;
  }

  async mayForce(node: string, owner: PodRef, lockWrittenAt: Date | undefined, signal?: AbortSignal): Promise<boolean> {
    const found = await this.deps.api.nodeLease(node, signal);
    if (found === undefined) return !(await this.deps.api.kubeletRegistered(node, signal));
    // Renewed well after the lock's write, and that renewal at least the margin ago: a kubelet that
    // was frozen renews its Lease first thing when it runs again, before it admits the pods it
    // queued; forced at that moment, the lock would name the next pod by the time kubelet calls
    // Allocate for the owner (seen on a real kubelet under load, real-reordered-admission.test.ts).
    if (
      !renewedWellAfter(found.renewedAt, lockWrittenAt, this.marginMs) ||
      !renewedLongAgo(found, this.clock(), this.marginMs)
    )
      return false;
    const waiting = await this.deps.api.awaitingAcknowledgement(node, signal);
    return !waiting.some((pod) => pod.namespace !== owner.namespace || pod.name !== owner.name);
  }
}

/**
 * Whether the Lease's last renewal was at least `marginMs` before the apiserver answered its read
 * (the Date header; our clock `nowMs` only when it sends none): both whole seconds, one more covers it.
 */
function renewedLongAgo(lease: NodeLeaseRecord | undefined, nowMs: number, marginMs: number): boolean {
  const renewedAt = lease?.renewedAt?.getTime();
  return renewedAt !== undefined && (lease?.readAt?.getTime() ?? nowMs) - renewedAt >= marginMs + 1000;
}

/**
 * Whether the Lease's last recorded write is more than `marginMs` after the lock's, both by the
 * apiserver's managedFields (whole seconds: one second more covers the rounding of both).
 */
function renewedWellAfter(renewedAt: Date | undefined, lockWrittenAt: Date | undefined, marginMs: number): boolean {
  return (
    renewedAt !== undefined &&
    lockWrittenAt !== undefined &&
    renewedAt.getTime() - lockWrittenAt.getTime() > marginMs + 1000
  );
}
