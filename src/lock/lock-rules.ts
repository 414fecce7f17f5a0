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
      /**
       * Set when NODELOCK_FORCE_AFTER has passed but is withheld:
       * the node's kubelet may still admit the owner from its queue.
       */
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
    'the lock was written for an earlier incarnation of the pod, which is gone (or the pod of that name is not ' +
    'bound here and the bind grace is over)',
  'owner-bound-elsewhere': 'the pod is bound to another node, so no bind to this node can still be running',
  'owner-terminal': 'the pod has Succeeded or Failed',
  'owner-deleting': 'the pod is being deleted',
  'allocation-finished':
    'the pod is bound here and its allocation is over (bind-phase success or failed); the lock was left behind',
  'owner-admitted':
    'kubelet has admitted the pod here (status.startTime set, or a container started), so its Allocate was ' +
    'answered, but bind-phase was never set to success: the device plugin left the lock behind',
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
  const { lock, now, seenAt, config } = facts;
  if (lock.kind === 'malformed') return { state: 'releasable', reason: 'malformed', ageMs: undefined };

  const stampAgeMs = now.getTime() - lock.time.getTime();
  const skew = stampAgeMs < 0 ? { clockSkewMs: -stampAgeMs } : {};
  const ageMs = Math.max(0, seenAt === undefined ? stampAgeMs : now.getTime() - seenAt.getTime());
  const verdict = verdictsAt(ageMs, skew, config, facts.kubeletMayAdmitLater ?? false);

  if (lock.kind === 'legacy') {
    return ageMs > config.expireMs ? verdict.releasable('legacy-expired') : verdict.held('legacy-fresh');
  }
  if (facts.owner === undefined) return goneOwnerRule(facts, ageMs, verdict);
  const judged: OwnerCase = {
    owner: facts.owner,
    boundHere: facts.owner.nodeName === facts.node,
    elsewhere: facts.owner.nodeName !== undefined && facts.owner.nodeName !== facts.node,
    ageMs,
    config,
    verdict,
  };
  for (const rule of OWNER_RULES) {
    const decided = rule(judged);
    if (decided !== undefined) return decided;
  }
  return verdict.releasable(judged.boundHere ? 'owner-not-allocating' : 'owner-replaced');
}

/** The classifications of a lock whose age is known (its age and clock skew filled in). */
interface Verdicts {
  held(reason: HeldReason): LockClassification;
  releasable(reason: ReleaseReason): LockClassification;
  /**
   * Past the expiry and still awaited: stalled, or forced free once NODELOCK_FORCE_AFTER has passed
   * and the node's kubelet will not admit the owner later through a lock that names another pod.
   */
  stalledOrForced(): LockClassification;
}

function verdictsAt(
  ageMs: number,
  skew: { clockSkewMs?: number },
  config: LockRulesConfig,
  kubeletMayAdmitLater: boolean,
): Verdicts {
  const releasable = (reason: ReleaseReason): LockClassification => ({ state: 'releasable', reason, ageMs, ...skew });
  return {
    held: (reason) => ({ state: 'held', reason, ageMs, ...skew }),
    releasable,
    stalledOrForced: () => {
      const pastForce = config.forceAfterMs !== undefined && ageMs > config.forceAfterMs;
      if (pastForce && !kubeletMayAdmitLater) return releasable('forced-after-stall');
      return {
        state: 'stalled',
        reason: 'awaiting-allocation-past-expiry',
        ageMs,
        ...skew,
        ...(pastForce ? { forceWithheld: 'kubelet-queue' as const } : {}),
      };
    },
  };
}

/**
 * The owner is gone: releasable, unless the node's kubelet may still admit it. Then it is held like
 * a lock awaiting allocation, with the same expiry: kubelet may be frozen or cut off.
 */
function goneOwnerRule(facts: LockFacts, ageMs: number, verdict: Verdicts): LockClassification {
  if (facts.goneOwnerMayBeAdmitted !== true) {
    return verdict.releasable(facts.ownerReplaced === true ? 'owner-replaced' : 'owner-not-found');
  }
  return ageMs <= facts.config.expireMs ? verdict.held('kubelet-may-admit') : verdict.stalledOrForced();
}

/** A lock naming a live incarnation, as each of OWNER_RULES sees it. */
interface OwnerCase {
  owner: OwnerPod;
  /** The owner is bound to the lock's node. */
  boundHere: boolean;
  /** The owner is bound to another node. */
  elsewhere: boolean;
  ageMs: number;
  config: LockRulesConfig;
  verdict: Verdicts;
}

/** One rule: the classification when it decides the lock, undefined to leave it to the next. */
type OwnerRule = (judged: OwnerCase) => LockClassification | undefined;

/** Bound here and waiting for the device plugin's Allocate. */
const allocatingHere = ({ owner, boundHere }: OwnerCase): boolean => boundHere && owner.bindPhase === 'allocating';

const ownerTerminal: OwnerRule = ({ owner, verdict }) =>
  owner.phase === 'Succeeded' || owner.phase === 'Failed' ? verdict.releasable('owner-terminal') : undefined;

// A pod being deleted gracefully while it is bound here and not yet allocated can still be admitted
// by kubelet (it admits pods that arrive with a deletionTimestamp), and its Allocate resolves the
// pod through this lock: freed now, the lock could name the next pod by then and hand it that
// pod's GPUs (HAMi #3096). It stays held, by the rules below, until the pod is gone or allocated.
const ownerDeleting: OwnerRule = (judged) =>
  judged.owner.deleting && !allocatingHere(judged) ? judged.verdict.releasable('owner-deleting') : undefined;

// Bound elsewhere decides at once, before any age rule: kube-scheduler has re-placed the pod (e.g.
// after our bind died mid-way), so no bind to this node can still be running for it.
const ownerBoundElsewhere: OwnerRule = ({ elsewhere, verdict }) =>
  elsewhere ? verdict.releasable('owner-bound-elsewhere') : undefined;

// Only a pod bound to this node can have finished allocating *here*; an unbound pod may still
// carry bind-phase from an earlier attempt while a new bind runs.
const allocationFinished: OwnerRule = ({ owner, boundHere, verdict }) =>
  boundHere && (owner.bindPhase === 'success' || owner.bindPhase === 'failed')
    ? verdict.releasable('allocation-finished')
    : undefined;

// kubelet allocates every container's devices when it admits a pod, before it reports any status
// of it: a pod it reports on is past its Allocate calls, even when the plugin never flipped
// bind-phase (HAMi v2.10 returns early when its re-read of the pod fails, keeping the lock).
const ownerAdmitted: OwnerRule = (judged) =>
  allocatingHere(judged) && judged.owner.admitted === true ? judged.verdict.releasable('owner-admitted') : undefined;

const bindInProgress: OwnerRule = ({ ageMs, config, verdict }) =>
  ageMs < config.bindGraceMs ? verdict.held('bind-in-progress') : undefined;

const awaitingAllocation: OwnerRule = (judged) => {
  if (!allocatingHere(judged)) return undefined;
  const { ageMs, config, verdict } = judged;
  return ageMs <= config.expireMs ? verdict.held('awaiting-allocation') : verdict.stalledOrForced();
};

/**
 * The rules for a lock whose owner exists, in order: the first that decides wins. A lock none of
 * them decides is past the bind grace with no allocation here to wait for: owner-not-allocating
 * when its pod is bound here, owner-replaced when the pod of that name is not bound at all.
 */
const OWNER_RULES: readonly OwnerRule[] = [
  ownerTerminal,
  ownerDeleting,
  ownerBoundElsewhere,
  allocationFinished,
  ownerAdmitted,
  bindInProgress,
  awaitingAllocation,
];
