import type { LockValue } from './lock-value.js';
import type { OwnerPod } from './owner-pod.js';

/**
 * The lock rules of ARCHITECTURE.md §5 as one pure function. A lock is
 * - held: its owner may still need it (a bind in progress, or bound and waiting for Allocate);
 * - stalled: held, but older than the expiry. HAMi would take it over; we do not, because the
 *   device plugin would then serve the old owner's Allocate with the new owner's GPUs (HAMi #3096);
 * - releasable: nobody will ever use it again, with the reason why.
 */
export interface LockRulesConfig {
  /** A lock younger than this is a bind in progress (above the extender's 30 s httpTimeout). */
  bindGraceMs: number;
  /** NODELOCK_EXPIRE: legacy locks older than this are released, held ones become stalled. */
  expireMs: number;
  /** NODELOCK_FORCE_AFTER: opt-in age at which even a stalled lock is released. */
  forceAfterMs?: number | undefined;
}

/**
 * Why a lock is held. 'release-pending' is not a rule of classifyLock: NodeLocks.acquire reports it
 * when its caller chose to wait for the device plugin to delete a lock whose allocation is over
 * (AcquireOptions.takeOverFinished) rather than race the plugin's own write.
 */
export type HeldReason =
  'bind-in-progress' | 'awaiting-allocation' | 'kubelet-may-admit' | 'legacy-fresh' | 'release-pending';

export type ReleaseReason =
  | 'owner-not-found'
  | 'owner-replaced'
  | 'owner-bound-elsewhere'
  | 'owner-terminal'
  | 'owner-deleting'
  | 'allocation-finished'
  | 'owner-admitted'
  | 'owner-not-allocating'
  | 'legacy-expired'
  | 'malformed'
  | 'forced-after-stall';

export type LockClassification =
  | { state: 'held'; reason: HeldReason; ageMs: number; clockSkewMs?: number }
  | {
      state: 'stalled';
      reason: 'awaiting-allocation-past-expiry';
      ageMs: number;
      clockSkewMs?: number;
      /** Set when NODELOCK_FORCE_AFTER has passed but is withheld: the node's kubelet may still admit the owner from its queue. */
      forceWithheld?: 'kubelet-queue';
    }
  | { state: 'releasable'; reason: ReleaseReason; ageMs: number | undefined; clockSkewMs?: number };

/** Everything classifyLock decides from, as one value (see classifyLock). */
export interface LockFacts {
  lock: LockValue;
  /** The incarnation the lock was written for (lock-owner.ts); undefined when it is gone. */
  owner: OwnerPod | undefined;
  node: string;
  now: Date;
  config: LockRulesConfig;
  /** When this process first saw this exact value (the state store); undefined for a one-off read. */
  seenAt?: Date | undefined;
  /** The owner is gone and a later incarnation carries its name (lock-owner.ts). */
  ownerReplaced?: boolean;
  /** The owner is gone, but the node's kubelet may still admit it (kubelet-admission.ts). */
  goneOwnerMayBeAdmitted?: boolean;
  /** The node's kubelet may still admit the owner from its queue: NODELOCK_FORCE_AFTER is withheld. */
  kubeletMayAdmitLater?: boolean;
}

export const RELEASE_REASON_TEXT: Record<ReleaseReason, string> = {
  'owner-not-found': 'the pod named by the lock does not exist',
  'owner-replaced':
    'the lock was written for an earlier incarnation of the pod, which is gone (or the pod of that name is not bound here and the bind grace is over)',
  'owner-bound-elsewhere': 'the pod is bound to another node, so no bind to this node can still be running',
  'owner-terminal': 'the pod has Succeeded or Failed',
  'owner-deleting': 'the pod is being deleted',
  'allocation-finished':
    'the pod is bound here and its allocation is over (bind-phase success or failed); the lock was left behind',
  'owner-admitted':
    'kubelet has admitted the pod here (status.startTime set, or a container started), so its Allocate was answered, but bind-phase was never set to success: the device plugin left the lock behind',
  'owner-not-allocating': 'the pod is bound here without bind-phase=allocating and the bind grace is over',
  'legacy-expired': 'a legacy lock (no owner) older than the expiry',
  malformed: 'the value is not a lock any HAMi component can read',
  'forced-after-stall': 'a stalled lock older than NODELOCK_FORCE_AFTER',
};

/**
 * Classifies `lock` on `node` at `now`, from one facts value. `owner` is ignored for legacy and
 * malformed values, which name no pod.
 *
 * `seenAt` is when this process first saw this exact lock value (the state store records it). Age
 * is judged from it, by our own clock, so a writer whose clock runs behind cannot make a fresh lock
 * look expired. Without it (a one-off read, e.g. `vgpu-warden locks`) the writer's stamp is used,
 * unless it lies in the future: then NodeLocks passes the apiserver's record of the write, and
 * without that record the lock counts as written now. `clockSkewMs` says how far ahead a stamp is.
 *
 * `owner` is the incarnation the lock was written for (lock-owner.ts decides it by UID and
 * resourceVersion): undefined when that incarnation is gone, even if a later pod carries the name
 * now (`ownerReplaced` then says so in the reason).
 *
 * `goneOwnerMayBeAdmitted` is true when the owner is gone from the API but the node's kubelet may
 * still admit it (see kubelet-admission.ts): it vanished while bound here and allocating, and kubelet
 * has not yet shown that it is past it. kubelet admits such a pod from the watch event it queued and
 * calls Allocate for it; the device plugin resolves "the pod" through this lock, so a lock naming the
 * next pod by then would hand the dead pod that pod's allocation (found on a real kubelet with HAMi's
 * plugin: the next pod then failed with UnexpectedAdmissionError). While the lock still names the
 * dead pod, its Allocate fails harmlessly with `pods "…" not found`.
 *
 * `kubeletMayAdmitLater` is true when the node's kubelet may still admit the owner from its queue
 * (kubelet-admission.ts mayForce: its Lease not renewed since the lock was written, or another pod
 * there awaiting its Allocate). NODELOCK_FORCE_AFTER is then withheld: measured on a real kubelet, a
 * lock forced while kubelet was frozen let the next pod be bound, and once kubelet ran it admitted
 * the two in creation order, so HAMi's plugin gave the first the second's GPU, and with v2.10's
 * pod-list fallback the second the first's (3 of 3 runs; real-reordered-admission.test.ts).
 */
export function classifyLock(facts: LockFacts): LockClassification {
  const {
    lock,
    owner,
    node: nodeName,
    now,
    config,
    seenAt,
    ownerReplaced = false,
    goneOwnerMayBeAdmitted = false,
    kubeletMayAdmitLater = false,
  } = facts;
  if (lock.kind === 'malformed') return { state: 'releasable', reason: 'malformed', ageMs: undefined };

  const stampAgeMs = now.getTime() - lock.time.getTime();
  const skew = stampAgeMs < 0 ? { clockSkewMs: -stampAgeMs } : {};
  const ageMs = Math.max(0, seenAt === undefined ? stampAgeMs : now.getTime() - seenAt.getTime());

  if (lock.kind === 'legacy') {
    return ageMs > config.expireMs
      ? { state: 'releasable', reason: 'legacy-expired', ageMs, ...skew }
      : { state: 'held', reason: 'legacy-fresh', ageMs, ...skew };
  }

  const releasable = (reason: ReleaseReason): LockClassification => ({ state: 'releasable', reason, ageMs, ...skew });
  // Past the expiry and still awaited: stalled, or forced free once NODELOCK_FORCE_AFTER has passed
  // and the node's kubelet will not admit the owner later through a lock that names another pod.
  const stalledOrForced = (): LockClassification => {
    const pastForce = config.forceAfterMs !== undefined && ageMs > config.forceAfterMs;
    if (pastForce && !kubeletMayAdmitLater) return releasable('forced-after-stall');
    return {
      state: 'stalled',
      reason: 'awaiting-allocation-past-expiry',
      ageMs,
      ...skew,
      ...(pastForce ? { forceWithheld: 'kubelet-queue' as const } : {}),
    };
  };
  if (owner === undefined) {
    if (!goneOwnerMayBeAdmitted) return releasable(ownerReplaced ? 'owner-replaced' : 'owner-not-found');
    // Held like a lock awaiting allocation, with the same expiry: kubelet may be frozen or cut off.
    if (ageMs <= config.expireMs) return { state: 'held', reason: 'kubelet-may-admit', ageMs, ...skew };
    return stalledOrForced();
  }
  if (owner.phase === 'Succeeded' || owner.phase === 'Failed') return releasable('owner-terminal');
  const boundHere = owner.nodeName === nodeName;
  // A pod being deleted gracefully while it is bound here and not yet allocated can still be admitted
  // by kubelet (it admits pods that arrive with a deletionTimestamp), and its Allocate resolves the
  // pod through this lock: freed now, the lock could name the next pod by then and hand it that
  // pod's GPUs (HAMi #3096). It stays held, by the rules below, until the pod is gone or allocated.
  if (owner.deleting && !(boundHere && owner.bindPhase === 'allocating')) return releasable('owner-deleting');
  // Bound elsewhere decides at once, before any age rule: kube-scheduler has re-placed the pod (e.g.
  // after our bind died mid-way), so no bind to this node can still be running for it.
  if (owner.nodeName !== undefined && owner.nodeName !== nodeName) return releasable('owner-bound-elsewhere');
  // Only a pod bound to this node can have finished allocating *here*; an unbound pod may still
  // carry bind-phase from an earlier attempt while a new bind runs.
  if (boundHere && (owner.bindPhase === 'success' || owner.bindPhase === 'failed'))
    return releasable('allocation-finished');
  // kubelet allocates every container's devices when it admits a pod, before it reports any status
  // of it: a pod it reports on is past its Allocate calls, even when the plugin never flipped
  // bind-phase (HAMi v2.10 returns early when its re-read of the pod fails, keeping the lock).
  if (boundHere && owner.bindPhase === 'allocating' && owner.admitted === true) return releasable('owner-admitted');
  if (ageMs < config.bindGraceMs) return { state: 'held', reason: 'bind-in-progress', ageMs, ...skew };
  if (boundHere && owner.bindPhase === 'allocating') {
    if (ageMs <= config.expireMs) return { state: 'held', reason: 'awaiting-allocation', ageMs, ...skew };
    return stalledOrForced();
  }
  return releasable(boundHere ? 'owner-not-allocating' : 'owner-replaced');
}
