import { KeyedMutex } from './keyed-mutex.js';
import { describeError } from '../base/errors.js';
import {
  LockContentionError,
  LockOutcomeUnknownError,
  NodeBusyError,
  NodeNotFoundError,
  WriteConflictError,
  WriteRejectedError,
} from './lock-errors.js';
import type { KubeletAdmissionCheck } from './kubelet-admission.js';
import { classifyLock, type LockClassification, type LockRulesConfig, type ReleaseReason } from './lock-rules.js';
import { formatLockValue, isOwnedBy, parseLockValue, type LockValue, type PodRef } from './lock-value.js';
import type { LockView, NodeLockApi, NodeSnapshot } from './node-lock-api.js';
import { lockWrittenAt } from './lock-written-at.js';
import type { OwnerPod } from './owner-pod.js';
import { resolveLockOwner, type LockOwner } from './lock-owner.js';
import type {
  ReleasePath,
  LockEvent,
  LockObserver,
  AcquireOptions,
  ReleaseOptions,
  AcquireResult,
  ReleaseResult,
  ConditionalReleaseResult,
  LockInspection,
} from './lock-events.js';
import { DEFAULT_RETRY, RetryBudget, type RetryPolicy } from './retry-budget.js';
import { sleep } from '../base/abort.js';
import { systemClock, type Clock } from '../base/clock.js';

/** What NodeLocks works with: the API port, the state store's view, the rules' settings and the kubelet checks. */
export interface NodeLocksDeps {
  api: NodeLockApi;
  /** The state store: first reads come from it, and our writes are fed back to it. */
  view?: LockView;
  config: LockRulesConfig;
  /**
   * Asked, on API reads only, before a lock whose owner is gone counts as releasable: the node's
   * kubelet may still admit that pod (kubelet-admission.ts). Without it such a lock is released.
   */
  kubeletAdmission?: KubeletAdmissionCheck;
  clock?: Clock;
  observer?: LockObserver;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  retry?: RetryPolicy;
}

/** What one pass of the read-classify-write loop decided. */
type LockStep<R> =
  | { kind: 'done'; result: R }
  /** The view's answer is not enough to act on: read the node and its owner from the API. */
  | { kind: 'reread-from-api' }
  /**
   * Write `value` (null: remove the lock) over `resourceVersion`; `written` makes the result,
   * `refused` undoes bookkeeping.
   */
  | {
      kind: 'write';
      resourceVersion: string;
      value: string | null;
      written: (result: NodeSnapshot) => R;
      refused?: (error: unknown) => void;
      /** The UID of the pod a lock value is written for (the state store remembers it). */
      writtenFor?: string | undefined;
    };

/** A pod as acquire takes it: by name, as the lock names it, and by UID, the incarnation the bind is for. */
export type LockingPod = PodRef & { uid?: string | undefined };

/** The pod whose DELETE is being admitted right now (the webhook): it counts as being deleted. */
export type DeletedPod = PodRef & { uid: string };

/** One run of the read-classify-write loop: the node, what it is for, and where its first read comes from. */
interface LockPass {
  node: string;
  signal: AbortSignal | undefined;
  /** Start from the state store (a step may still ask for an API read). */
  fromViewAtStart: boolean;
  /** What the pass does, for the retry budget's error. */
  what: string;
}

/** One pass of acquire's step: the call and the node state it read. */
interface AcquireAttempt {
  node: string;
  pod: LockingPod;
  options: AcquireOptions;
  /** Every value this call wrote, or may have written (an answer lost). */
  written: string[];
  snapshot: NodeSnapshot;
  fromView: boolean;
  budget: RetryBudget;
}

/** How acquire writes its value: on a free node, over its own incarnation's lock, or over a releasable one. */
type AcquireWrite =
  | { kind: 'fresh' }
  | { kind: 're-stamp'; previous: string }
  | { kind: 'takeover'; replaced: NonNullable<AcquireResult['replaced']> };

/** The pod carrying the lock's name as already read (undefined: none), so that it is read once. */
interface NamedRead {
  pod: OwnerPod | undefined;
}

/** How classify reads the lock's holder. */
interface ClassifyOptions {
  /** Where the holder is read from: the state store or the API (default). */
  source?: 'view' | 'api';
  signal?: AbortSignal | undefined;
  /** A pod whose DELETE is being admitted, so being deleted already. */
  deleted?: DeletedPod | undefined;
  /** The holder as the caller read it already from `source`. */
  named?: NamedRead | undefined;
}

/**
 * HAMi's node lock over the Kubernetes API, with the rules of lock-rules.ts deciding takeovers and
 * releases. Every write is an RV-guarded merge patch; after a 409 or a lost response the node is
 * read again and the decision made anew. Calls on one node are serialised in this process; other
 * processes are kept honest by the resourceVersion.
 */
export class NodeLocks {
  private readonly mutex = new KeyedMutex();
  private readonly clock: Clock;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;
  private readonly retry: RetryPolicy;

  constructor(private readonly deps: NodeLocksDeps) {
    this.clock = deps.clock ?? systemClock;
    this.sleep = deps.sleep ?? sleep;
    this.random = deps.random ?? Math.random;
    this.retry = deps.retry ?? DEFAULT_RETRY;
  }

  /**
   * Takes the lock on `node` for `pod`: takes over a releasable lock (confirmed by API reads first),
   * re-stamps a lock that already names the pod (an RV-guarded write, so a retried bind renews the
   * lock's age instead of keeping an old stamp), and throws LockContentionError (without retrying)
   * while another pod holds it. The first read comes from the state store when there is one.
   */
  acquire(node: string, pod: LockingPod, options: AcquireOptions = {}): Promise<AcquireResult> {
    const written: string[] = [];
    return this.mutex
      .run(node, () => this.acquireLocked(node, pod, options, written))
      .catch((error: unknown) => {
        // A busy node was read after our writes and shows none of them: nothing of ours is there.
        if (
          written.length === 0 ||
          error instanceof LockContentionError ||
          error instanceof NodeBusyError ||
          error instanceof LockOutcomeUnknownError
        )
          throw error;
        throw new LockOutcomeUnknownError(
          `the lock write on node ${node} for ${pod.namespace}/${pod.name} may have landed: ${describeError(error)}`,
          written,
          { cause: error },
        );
      });
  }

  private acquireLocked(
    node: string,
    pod: LockingPod,
    options: AcquireOptions,
    written: string[],
  ): Promise<AcquireResult> {
    const pass: LockPass = {
      node,
      signal: options.signal,
      fromViewAtStart: this.viewIsCurrent(),
      what: `acquire the lock on node ${node} for ${pod.namespace}/${pod.name}`,
    };
    return this.readClassifyWrite<AcquireResult>(pass, async (fromView, budget) => {
      const snapshot =
        (fromView ? this.deps.view?.node(node) : undefined) ?? (await this.deps.api.readNode(node, options.signal));
      const attempt: AcquireAttempt = { node, pod, options, written, snapshot, fromView, budget };
      const current = snapshot.lock;
      if (current === undefined) return this.writeAcquisition(attempt, { kind: 'fresh' });
      const value = parseLockValue(current);
      // Our own earlier write whose answer was lost still counts as this call's acquisition.
      if (isOwnedBy(value, pod) && written.includes(current)) {
        return { kind: 'done', result: this.acquired(attempt, snapshot, current) };
      }
      const how = await this.overHolder(attempt, value);
      return how === 'reread-from-api' ? { kind: 'reread-from-api' } : this.writeAcquisition(attempt, how);
    });
  }

  /**
   * How acquire may write over the lock it found, `value`: as a re-stamp of a lock written for this
   * very incarnation, or as a takeover of a releasable one (confirmed by an API read first). Throws
   * LockContentionError while its holder may still need it.
   */
  private async overHolder(attempt: AcquireAttempt, value: LockValue): Promise<AcquireWrite | 'reread-from-api'> {
    const { node, pod, options, snapshot, fromView } = attempt;
    const source = fromView ? 'view' : 'api';
    let named: NamedRead | undefined;
    // A lock of this name is ours to re-stamp only when it was written for this very incarnation:
    // one written for an earlier pod of the name may still be used by kubelet to admit that pod
    // (invariant 9), so it is judged like any other pod's lock, from the same read of the pod.
    // Without a UID to compare (a caller that knows only the name) the name decides.
    if (value.kind === 'owned' && isOwnedBy(value, pod)) {
      if (pod.uid !== undefined) named = { pod: await this.namedPod(value, source, options.signal) };
      if (pod.uid === undefined || this.writtenForThisPod(snapshot, value, pod.uid, named?.pod)) {
        const ageMs = this.ageOf(node, value) ?? 0;
        if (options.mayReenter?.() === false)
          this.refuse(attempt, value, { state: 'held', reason: 'bind-in-progress', ageMs });
        return { kind: 're-stamp', previous: value.raw };
      }
    }
    const { classification } = await this.classify(snapshot, value, { source, signal: options.signal, named });
    if (classification.state !== 'releasable') return this.refuse(attempt, value, classification);
    if (classification.reason === 'allocation-finished' && options.takeOverFinished?.(node, value.raw) === false) {
      return this.refuse(attempt, value, {
        state: 'held',
        reason: 'release-pending',
        ageMs: classification.ageMs ?? 0,
      });
    }
    // Never free another pod's lock on the word of a possibly lagging view.
    if (fromView) return 'reread-from-api';
    return { kind: 'takeover', replaced: { value: value.raw, reason: classification.reason } };
  }

  /** Reports the contention (and a stalled holder) and refuses: the holder may still need its lock. */
  private refuse(attempt: AcquireAttempt, holder: LockValue, classification: LockClassification): never {
    const { node, pod } = attempt;
    this.emit({ type: 'contention', node, pod, holder: holder.raw, holderValue: holder, classification });
    if (classification.state === 'stalled') this.emitStalled(node, holder, classification);
    throw new LockContentionError(node, pod, holder, classification);
  }

  /** The write of a new lock value for the pod, and the result it makes once it lands. */
  private async writeAcquisition(attempt: AcquireAttempt, how: AcquireWrite): Promise<LockStep<AcquireResult>> {
    const { node, pod, options, written, snapshot } = attempt;
    if (how.kind !== 're-stamp') await options.beforeWrite?.(snapshot, options.signal);
    const value = formatLockValue(new Date(this.clock()), pod);
    const fresh = !written.includes(value);
    if (fresh) written.push(value);
    return {
      kind: 'write',
      resourceVersion: snapshot.resourceVersion,
      value,
      writtenFor: pod.uid,
      written: (result) => {
        if (how.kind === 'fresh') return this.acquired(attempt, result, value);
        if (how.kind === 'takeover') return this.acquired(attempt, result, value, how.replaced);
        this.emit({ type: 'reentrant', node, pod, value, previous: how.previous });
        return {
          outcome: 'reentrant',
          node,
          value,
          resourceVersion: result.resourceVersion,
          writtenOver: snapshot.resourceVersion,
          attempts: attempt.budget.attempts,
        };
      },
      // A definite refusal wrote nothing: forget that value again.
      refused: (error) => {
        if (fresh && isDefiniteRefusal(error)) written.splice(written.indexOf(value), 1);
      },
    };
  }

  /**
   * Removes `pod`'s lock from `node`. Owner-checked (another pod's lock is never touched, even one
   * taken while we retried), RV-guarded and idempotent; `expectValues` narrows it further.
   */
  release(
    node: string,
    pod: PodRef,
    path: ReleasePath = 'owner',
    options: ReleaseOptions = {},
  ): Promise<ReleaseResult> {
    const { signal } = options;
    // A caller releasing its own write (a failed bind) reads the API: the view may not show that
    // write yet, and a missed release would keep the node locked until the bind grace is over.
    const fromViewAtStart = this.viewIsCurrent() && options.expectValues === undefined;
    const what = `release the lock on node ${node} for ${pod.namespace}/${pod.name}`;
    return this.mutex.run(node, () =>
      this.readClassifyWrite<ReleaseResult>({ node, signal, fromViewAtStart, what }, async (fromView) => {
        const snapshot = fromView ? this.lockedFromView(node) : await this.readLockedNode(node, signal);
        if (snapshot === undefined) return { kind: 'done', result: { outcome: 'not-locked', node } };
        const current = snapshot.lock;
        const value = parseLockValue(current);
        if (!isOwnedBy(value, pod)) return { kind: 'done', result: { outcome: 'not-owner', node, value: current } };
        if (options.expectValues !== undefined && !options.expectValues.includes(current))
          return { kind: 'done', result: { outcome: 'not-owner', node, value: current } };
        return this.removal(
          { node, snapshot, parsed: value, reason: 'owner-request', path, ageMs: () => this.ageOf(node, value) },
          (resourceVersion) => ({ outcome: 'released', node, value: current, resourceVersion }),
        );
      }),
    );
  }

  /**
   * Releases the node's lock only if the rules say nobody will use it (sweeper, webhook, watch).
   * With a state store, a lock the store shows as held costs no API call; one it shows as
   * releasable is confirmed by reading the node and its owner from the API before it is freed.
   */
  releaseIfReleasable(
    node: string,
    path: ReleasePath,
    options: { signal?: AbortSignal; deleted?: DeletedPod } = {},
  ): Promise<ConditionalReleaseResult> {
    const { signal, deleted } = options;
    return this.mutex.run(node, () =>
      this.readClassifyWrite<ConditionalReleaseResult>(
        { node, signal, fromViewAtStart: this.viewIsCurrent(), what: `release the releasable lock on node ${node}` },
        async (fromView) => {
          const snapshot = fromView ? this.lockedFromView(node) : await this.readLockedNode(node, signal);
          if (snapshot === undefined)
            return fromView ? { kind: 'reread-from-api' } : { kind: 'done', result: { outcome: 'not-locked', node } };
          const current = snapshot.lock;
          const value = parseLockValue(current);
          // On behalf of a pod being deleted, only that pod's lock: another pod's lock is the sweeper's.
          if (deleted !== undefined && !isOwnedBy(value, deleted))
            return { kind: 'done', result: { outcome: 'not-owner', node, value: current } };
          const { classification } = await this.classify(snapshot, value, {
            source: fromView ? 'view' : 'api',
            signal,
            deleted,
          });
          if (classification.state !== 'releasable') {
            if (classification.state === 'stalled') this.emitStalled(node, value, classification);
            return {
              kind: 'done',
              result: {
                outcome: 'kept',
                node,
                value: current,
                classification,
                resourceVersion: snapshot.resourceVersion,
              },
            };
          }
          // Confirmed by reading the node and its owner from the API before it is freed.
          if (fromView) return { kind: 'reread-from-api' };
          const { reason, ageMs } = classification;
          return this.removal(
            { node, snapshot, parsed: value, reason, path, ageMs: () => ageMs },
            (resourceVersion) => ({ outcome: 'released', node, value: current, classification, resourceVersion }),
          );
        },
      ),
    );
  }

  /**
   * The one loop behind acquire, release and releaseIfReleasable: read the node (from the state
   * store while `fromView`), let `step` classify it and decide, and make the write it asks for,
   * RV-guarded on the node state it read. Any failed write, and any step that asks, reads again from
   * the API (a view may lag); the retry budget paces errors and conflicts, and says when to give up.
   */
  private async readClassifyWrite<R>(
    pass: LockPass,
    step: (fromView: boolean, budget: RetryBudget) => Promise<LockStep<R>>,
  ): Promise<R> {
    const { node, signal, what } = pass;
    const budget = this.budget();
    let fromView = pass.fromViewAtStart;
    for (;;) {
      signal?.throwIfAborted();
      const next = await step(fromView, budget);
      if (next.kind === 'done') return next.result;
      if (next.kind === 'reread-from-api') {
        fromView = false;
        continue;
      }
      try {
        const result = await this.deps.api.writeLock(node, next.resourceVersion, next.value, signal);
        this.deps.view?.observeWrite(result, next.writtenFor);
        return next.written(result);
      } catch (error) {
        fromView = false;
        next.refused?.(error);
        await this.pause(budget.next(error, what), signal);
      }
    }
  }

  /** The node's lock, its holder's state and the classification; writes nothing. */
  async inspect(node: string): Promise<LockInspection> {
    const snapshot = await this.deps.api.readNode(node);
    if (snapshot.lock === undefined) {
      return {
        node,
        resourceVersion: snapshot.resourceVersion,
        raw: undefined,
        value: undefined,
        owner: undefined,
        classification: undefined,
      };
    }
    const value = parseLockValue(snapshot.lock);
    const { owner, classification } = await this.classify(snapshot, value);
    return { node, resourceVersion: snapshot.resourceVersion, raw: snapshot.lock, value, owner, classification };
  }

  /**
   * The step that removes the lock `snapshot` carries (`parsed`); once written, it is reported
   * released (`ageMs` is asked then) and `result` makes the caller's answer from the new resourceVersion.
   */
  private removal<R>(
    release: {
      node: string;
      snapshot: NodeSnapshot & { lock: string };
      parsed: LockValue;
      reason: ReleaseReason | 'owner-request';
      path: ReleasePath;
      ageMs: () => number | undefined;
    },
    result: (resourceVersion: string) => R,
  ): LockStep<R> {
    const { node, snapshot, parsed, reason, path } = release;
    return {
      kind: 'write',
      resourceVersion: snapshot.resourceVersion,
      value: null,
      written: (written) => {
        this.emit({ type: 'released', node, value: snapshot.lock, parsed, reason, path, ageMs: release.ageMs() });
        return result(written.resourceVersion);
      },
    };
  }

  private lockedFromView(node: string): (NodeSnapshot & { lock: string }) | undefined {
    const snapshot = this.deps.view?.node(node);
    return snapshot?.lock === undefined ? undefined : { ...snapshot, lock: snapshot.lock };
  }

  /** The node when it exists and carries a lock; undefined when there is nothing to release. */
  private async readLockedNode(
    node: string,
    signal?: AbortSignal,
  ): Promise<(NodeSnapshot & { lock: string }) | undefined> {
    try {
      const snapshot = await this.deps.api.readNode(node, signal);
      return snapshot.lock === undefined ? undefined : { ...snapshot, lock: snapshot.lock };
    } catch (error) {
      if (error instanceof NodeNotFoundError) return undefined;
      throw error;
    }
  }

  /**
   * The lock's holder (read from the view or the API, unless the caller read it already), whom the
   * lock was written for (lock-owner.ts), and what the rules say. Only an `owned` value names a pod,
   * and parseLockValue makes every owner a possible pod name first, so a malformed value or an
   * impossible owner costs no API call at all.
   */
  private async classify(
    snapshot: NodeSnapshot,
    value: LockValue,
    options: ClassifyOptions = {},
  ): Promise<{ owner: OwnerPod | null | undefined; classification: LockClassification }> {
    const holder = value.kind === 'owned' ? await this.holderOf(snapshot, value, options) : undefined;
    const now = new Date(this.clock());
    const rules = (kubeletMayAdmitLater: boolean) =>
      classifyLock({
        lock: value,
        owner: holder?.owner ?? undefined,
        node: snapshot.name,
        now,
        config: this.deps.config,
        seenAt: this.seenAt(snapshot, value, now),
        ownerReplaced: holder?.replaced ?? false,
        goneOwnerMayBeAdmitted: holder?.mayBeAdmitted ?? false,
        kubeletMayAdmitLater,
      });
    const classification = rules(false);
    // NODELOCK_FORCE_AFTER only where kubelet will not serve a queued pod through a lock naming
    // another (a Lease read and a LIST, only for a lock the rules would force; kubelet-admission.ts).
    const forced = classification.state === 'releasable' && classification.reason === 'forced-after-stall';
    if (forced && value.kind === 'owned' && !(await this.mayForce(snapshot, value, options))) {
      return { owner: holder?.owner, classification: rules(true) };
    }
    return { owner: holder?.owner, classification };
  }

  /**
   * Whom an owned lock was written for (null: an incarnation that is gone), and for a gone one
   * whether it was replaced by a later pod of its name and whether the node's kubelet may still
   * admit it. `deleted`: a pod whose DELETE is being admitted, so being deleted already.
   */
  private async holderOf(
    snapshot: NodeSnapshot,
    value: Extract<LockValue, { kind: 'owned' }>,
    options: ClassifyOptions,
  ): Promise<{ owner: OwnerPod | null; replaced: boolean; mayBeAdmitted: boolean }> {
    const { source = 'api', signal, deleted } = options;
    let named = options.named === undefined ? await this.namedPod(value, source, signal) : options.named.pod;
    if (named !== undefined && deleted !== undefined && named.uid === deleted.uid && isOwnedBy(value, deleted))
      named = { ...named, deleting: true };
    const resolved = this.resolveOwner(snapshot, value, named);
    if (resolved.kind === 'named') return { owner: resolved.owner, replaced: false, mayBeAdmitted: false };
    // Only on an API read: a gone owner seen in the view is confirmed by one before anything is freed.
    const admission = source === 'api' ? this.deps.kubeletAdmission : undefined;
    const mayBeAdmitted =
      admission !== undefined &&
      (await admission.mayStillAdmit(
        {
          node: snapshot.name,
          owner: value.owner,
          lockValue: value.raw,
          candidates: resolved.candidates,
          lockWrittenAt: lockWrittenAt(snapshot.object),
        },
        signal,
      ));
    return { owner: null, replaced: resolved.replaced, mayBeAdmitted };
  }

  /** Whether a lock the rules would force may go: on an API read, only when kubelet-admission.ts agrees. */
  private async mayForce(
    snapshot: NodeSnapshot,
    value: Extract<LockValue, { kind: 'owned' }>,
    options: ClassifyOptions,
  ): Promise<boolean> {
    const admission = (options.source ?? 'api') === 'api' ? this.deps.kubeletAdmission : undefined;
    if (admission === undefined) return true;
    return admission.mayForce(snapshot.name, value.owner, lockWrittenAt(snapshot.object), options.signal);
  }

  /** Whom the lock value was written for: the pod carrying its name now, or an incarnation that is gone. */
  private resolveOwner(
    snapshot: NodeSnapshot,
    value: Extract<LockValue, { kind: 'owned' }>,
    named: OwnerPod | undefined,
  ): LockOwner {
    const known = this.deps.view?.lockOwnerFacts?.(snapshot.name, value.raw, value.owner, named?.uid);
    return resolveLockOwner({
      gone: [],
      ...known,
      named,
      // The value is on the node at the version read, so it was written no later than that.
      lockSeenVersion: known?.lockSeenVersion ?? snapshot.resourceVersion,
      lockWrittenAt: lockWrittenAt(snapshot.object),
    });
  }

  /**
   * Whether a lock naming `pod` was written for this incarnation (its UID), so that a retried bind
   * may re-stamp it: `named` is the pod carrying the name, as read.
   */
  private writtenForThisPod(
    snapshot: NodeSnapshot,
    value: Extract<LockValue, { kind: 'owned' }>,
    uid: string,
    named: OwnerPod | undefined,
  ): boolean {
    const resolved = this.resolveOwner(snapshot, value, named);
    return resolved.kind === 'named' && resolved.proven && resolved.owner.uid === uid;
  }

  /** The pod carrying the name a lock value gives, from the state store or the API. */
  private async namedPod(
    value: Extract<LockValue, { kind: 'owned' }>,
    source: 'view' | 'api',
    signal: AbortSignal | undefined,
  ): Promise<OwnerPod | undefined> {
    const pod =
      source === 'view' ? this.deps.view?.ownerPod(value.owner) : await this.deps.api.readPod(value.owner, signal);
    return pod ?? undefined;
  }

  private emitStalled(
    node: string,
    holder: LockValue,
    classification: Extract<LockClassification, { state: 'stalled' }>,
  ): void {
    this.emit({
      type: 'stalled',
      node,
      holder: holder.raw,
      holderValue: holder,
      ageMs: classification.ageMs,
      ...(classification.forceWithheld === undefined ? {} : { forceWithheld: classification.forceWithheld }),
    });
  }

  /**
   * Decisions start from the state store only while it is current. Found by the chaos suite: the
   * leader's pod watch was down for 40 s (relists failing through faults), and every sweep kept,
   * at no API cost, the lock of a pod deleted meanwhile, as the bind in progress its store showed.
   */
  private viewIsCurrent(): boolean {
    return this.deps.view !== undefined && this.deps.view.current?.() !== false;
  }

  /**
   * When this process first saw the value (the state store). Without one, the writer's stamp is
   * the age, unless it lies in the future: then the apiserver's record of the write is used, so a
   * one-off reader (`vgpu-warden locks`) sees the lock age instead of "0s" forever.
   */
  private seenAt(snapshot: NodeSnapshot, value: LockValue, now: Date): Date | undefined {
    const seen = this.deps.view?.lockSeenAt(snapshot.name, value.raw);
    if (seen !== undefined || value.kind === 'malformed' || value.time <= now) return seen;
    return lockWrittenAt(snapshot.object);
  }

  private async pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
    signal?.throwIfAborted();
    await this.sleep(ms);
    signal?.throwIfAborted();
  }

  /**
   * The result of an acquisition that landed (`result`: the node as written; the node read, for a
   * lost answer found in place), with its events: a lock taken over is released first.
   */
  private acquired(
    attempt: AcquireAttempt,
    result: NodeSnapshot,
    value: string,
    replaced?: AcquireResult['replaced'],
  ): AcquireResult {
    const { node, pod } = attempt;
    const attempts = attempt.budget.attempts;
    const replacedValue = replaced === undefined ? undefined : parseLockValue(replaced.value);
    if (replaced && replacedValue) {
      this.emit({
        type: 'released',
        node,
        value: replaced.value,
        parsed: replacedValue,
        reason: replaced.reason,
        path: 'takeover',
        ageMs: this.ageOf(node, replacedValue),
      });
    }
    this.emit({
      type: 'acquired',
      node,
      pod,
      value,
      attempts,
      ...(replaced && replacedValue ? { replaced: { ...replaced, parsed: replacedValue } } : {}),
    });
    return {
      outcome: replaced ? 'taken-over' : 'acquired',
      node,
      value,
      resourceVersion: result.resourceVersion,
      writtenOver: attempt.snapshot.resourceVersion,
      attempts,
      ...(replaced ? { replaced } : {}),
    };
  }

  private budget(): RetryBudget {
    return new RetryBudget(this.retry, this.random);
  }

  private ageOf(node: string, value: LockValue): number | undefined {
    if (value.kind === 'malformed') return undefined;
    const since = this.deps.view?.lockSeenAt(node, value.raw) ?? value.time;
    return Math.max(0, this.clock() - since.getTime());
  }

  private emit(event: LockEvent): void {
    try {
      this.deps.observer?.onLockEvent(event);
    } catch {
      // Telemetry must never change a lock decision.
    }
  }
}

/** A write error that proves nothing was written. */
function isDefiniteRefusal(error: unknown): boolean {
  return (
    error instanceof WriteConflictError || error instanceof WriteRejectedError || error instanceof NodeNotFoundError
  );
}
