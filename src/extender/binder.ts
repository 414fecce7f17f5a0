import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import type { ClusterCache } from '../cluster/cluster-cache.js';
import {
  ALLOCATED_ANNOTATION,
  BIND_PHASE_ANNOTATION,
  BIND_TIME_ANNOTATION,
  TO_ALLOCATE_ANNOTATION,
  VGPU_NODE_ANNOTATION,
  VGPU_TIME_ANNOTATION,
} from '../hami/wire.js';
import { kubeletRegistered, type UnacknowledgedPod } from '../cluster/unacknowledged-allocations.js';
import { nodeAwaitingAcknowledgement } from '../lock/kubelet-acknowledgement.js';
import { encodeAllocation, type PodAllocation } from '../devices/allocation-codec.js';
import { describeProblems, gpuRequestProblems, initLayout } from '../devices/requests.js';
import { podDeviceUsage, type GpuUse } from '../devices/usage.js';
import { describeError, WardenError } from '../base/errors.js';
import { withSignal } from '../kube/call-options.js';
import { apiStatusOf, httpStatusOf, isNotFound } from '../kube/errors.js';
import { isNewerVersion } from '../base/resource-version.js';
import { LockContentionError, LockOutcomeUnknownError, NodeBusyError } from '../lock/lock-errors.js';
import { LockWaiter } from '../lock/lock-waiter.js';
import { timeoutSignal } from '../base/abort.js';
import { podKey, type PodRef } from '../lock/lock-value.js';
import type { NodeSnapshot } from '../lock/node-lock-api.js';
import type { LockingPod, NodeLocks } from '../lock/node-locks.js';
import type { EventRecorder, EventTarget } from '../telemetry/events.js';
import {
  evaluateNode,
  viewPod,
  type NodeEvaluation,
  type PlacementDefaults,
  type PlacementStore,
  type PodView,
} from './gpu-placement.js';
import type { BindingArgs } from './protocol.js';
import type { AcquireResult } from '../lock/lock-events.js';
import type { BoundPod } from './binding-label-follow-up.js';
import { type Clock, systemClock } from '../base/clock.js';

export class BindError extends WardenError {}
/** The bind ran out of its one deadline. */
export class BindDeadlineError extends BindError {}

/**
 * The binder's narrow port to the API: the pod read (the incarnation check and the re-read after a
 * failed Binding), the Binding, and the node's pods where the store may lag.
 */
export type BindingApi = Pick<
  CoreV1Api,
  'readNamespacedPod' | 'createNamespacedPodBinding' | 'listPodForAllNamespaces'
>;

/** What a bind reads of the state store and the assumptions it keeps there (kube-scheduler's cache calls). */
export type BinderStore = PlacementStore &
  Pick<
    ClusterCache,
    | 'assumePod'
    | 'finishBinding'
    | 'forgetPod'
    | 'goneIncarnation'
    | 'node'
    | 'onLockChange'
    | 'pod'
    | 'podsSeenThrough'
    | 'quotaBudget'
    | 'unacknowledgedOn'
    | 'unacknowledgedSince'
    | 'usageIncluding'
  >;

export interface BinderDeps {
  core: BindingApi;
  cache: BinderStore;
  locks: NodeLocks;
  events: EventRecorder;
  defaults: PlacementDefaults;
  /** How long a bind waits for a held lock on the node (BIND_LOCK_WAIT). */
  lockWaitMs: number;
  /** The whole bind, clean-up included (BIND_TIMEOUT): below the extender httpTimeout and BIND_GRACE. */
  timeoutMs: number;
  /** Part of timeoutMs kept for clean-up after a failure (re-read the pod, release the lock). */
  cleanupReserveMs?: number;
  /**
   * How long a pod past the lock may keep the node's next bind waiting for its kubelet's
   * acknowledgement (NODELOCK_EXPIRE, like a lock awaiting allocation); default 5 minutes.
   */
  acknowledgementMaxAgeMs?: number;
  /** A waiter re-checks the lock this often even without a change (ages alone can make it releasable). */
  waitPollMs?: number;
  clock?: Clock;
  /** Successful binds at info; everything that went wrong (or was recovered) at warn. */
  log?: (level: 'info' | 'warn', message: string) => void;
  /**
   * Makes sure a bound GPU pod carries the hami.io/vgpu-node label, which its Binding carries too
   * (binding-label-follow-up.ts); without it the label comes only from the Binding.
   */
  labels?: { follow(pod: BoundPod): void };
  /** HAMi's BindingSucceed Event on every successful bind (SUCCESS_EVENTS); off by default. */
  successEvents?: boolean;
  /**
   * A wait for the lock shorter than this is routine (the pods of a burst queue for their nodes'
   * locks) and gets no NodeLockWait Event; default 5 s.
   */
  lockWaitEventAfterMs?: number;
  /**
   * How long a bind leaves a lock whose allocation is over to the device plugin, which deletes it
   * itself right after writing bind-phase, before taking it over; default 2 s.
   */
  pluginReleaseWaitMs?: number;
}

export type BindOutcome = { error?: string };

const DEFAULT_ACKNOWLEDGEMENT_MAX_AGE_MS = 5 * 60_000;
const DEFAULT_LOCK_WAIT_EVENT_AFTER_MS = 5000;
const DEFAULT_PLUGIN_RELEASE_WAIT_MS = 2000;

/** One bind attempt: what it validated and what it holds, so that unreserve undoes exactly that. */
interface BindAttempt {
  args: BindingArgs;
  target: EventTarget;
  signal: AbortSignal;
  pod: V1Pod;
  view: PodView;
  ref: LockingPod;
  /** Marks this call as the owner of the node's lock in this process (lockOwners). */
  token: symbol;
  /** The pod's share is assumed in the store (the reservation, then the fit under the lock). */
  reserved: boolean;
  /** The lock this attempt took. */
  lock?: AcquireResult;
  /** The lock values this attempt wrote or may have written: what unreserve releases. */
  lockValues: readonly string[];
  /** The Binding: not sent, refused for sure, or possibly committed (then nothing is undone). */
  binding: 'not-sent' | 'sent' | 'refused' | 'maybe-bound';
  /** The node's pods read from the API before the lock write, when the store lagged. */
  readForWrite: { pods?: PodsReadForWrite };
  /** The allocation as HAMi's annotation encodes it, once assumed. */
  encoded?: string;
}

/** The node's pods as read from the API for one lock write, and the node state they were read against. */
interface PodsReadForWrite {
  resourceVersion: string;
  items: V1Pod[];
}

/**
 * Whether the apiserver certainly did not apply a request that failed: it answered with a client
 * error (bad request, forbidden, not found, conflict, unprocessable, throttled) or said it is not
 * serving (503). A timeout, a cut connection or another 5xx may have committed.
 */
function refusedForSure(error: unknown): boolean {
  const code = httpStatusOf(error);
  if (code === undefined) return false;
  return (code >= 400 && code < 500 && code !== 408) || code === 503;
}

function apiMessage(error: unknown): string {
  return apiStatusOf(error)?.message ?? describeError(error);
}

/**
 * The extender's bind (ARCHITECTURE §6) under one deadline passed to every API call:
 * 1. the pod from the state store (the API only when the store lags); already bound here → success,
 *    bound elsewhere → error with nothing written;
 * 2. the pod's share reserved on the node in the store (the GPUs the store's usage gives it now), then
 *    the node lock, taken or re-stamped (an RV-guarded write either way), waiting in the node's FIFO
 *    while another pod holds it or while a pod placed there earlier has not been acknowledged by the
 *    node's kubelet (cluster/unacknowledged-allocations.ts);
 * 3. GPUs chosen from the store (bound plus assumed usage) and assumed; when the store's pod watch
 *    cannot show it has seen every bind made under earlier locks, the node's pods are listed too;
 * 4. one Binding whose annotations carry HAMi's and whose labels carry hami.io/vgpu-node, with the
 *    pod UID as precondition: kube-apiserver writes them together with spec.nodeName (labels from
 *    1.35 on; binding-label-follow-up.ts patches the label in afterwards where they were dropped),
 *    so nothing ever lands on another incarnation.
 * Any failure after the lock: re-read the pod when the outcome is unknown, and release the lock only
 * when the pod is certainly not bound here, and only the exact value this bind wrote.
 *
 * API requests per bind on the happy path: the lock write and the Binding (plus one LIST of the
 * node's pods when the store lags the node, and the label patch off the bind's path where the
 * apiserver drops a Binding's labels).
 */
export class Binder {
  private readonly clock: Clock;
  private readonly waiter: LockWaiter;
  /** node → the bind call in this process that owns its lock (incarnations of one name never share it). */
  private readonly lockOwners = new Map<string, symbol>();
  /**
   * node → a finished allocation's lock a waiting bind leaves to
   * the device plugin, and since when (this process's clock).
   */
  private readonly releasePending = new Map<string, { value: string; sinceMs: number }>();

  constructor(private readonly deps: BinderDeps) {
    this.clock = deps.clock ?? systemClock;
    this.waiter = new LockWaiter({
      locks: deps.locks,
      onLockChange: (node, listener) => deps.cache.onLockChange(node, listener),
      lockWaitMs: deps.lockWaitMs,
      ...(deps.waitPollMs === undefined ? {} : { waitPollMs: deps.waitPollMs }),
    });
  }

  /** Clean-up's share of the deadline: 3 s, or a quarter of a short BIND_TIMEOUT. */
  private get cleanupReserveMs(): number {
    return this.deps.cleanupReserveMs ?? Math.min(3000, this.deps.timeoutMs / 4);
  }

  /** `signal`: the request's (kube-scheduler gave up on it); it ends the bind as its deadline does. */
  async bind(args: BindingArgs, signal?: AbortSignal): Promise<BindOutcome> {
    const cleanupReserveMs = this.cleanupReserveMs;
    const deadline = timeoutSignal(
      this.deps.timeoutMs - cleanupReserveMs,
      () =>
        new BindDeadlineError(
          `bind of ${args.podNamespace}/${args.podName} to ${args.node} ran out of its ` +
            `${Math.round(this.deps.timeoutMs / 1000)}s deadline`,
        ),
    );
    const target: EventTarget = { kind: 'Pod', name: args.podName, namespace: args.podNamespace, uid: args.podUid };
    try {
      const within = signal === undefined ? deadline.signal : AbortSignal.any([deadline.signal, signal]);
      const outcome = await this.bindWithin(args, target, within);
      // HAMi's reason and message (recordScheduleBindingResultEvent), so scripts matching either agree.
      if (outcome.error === undefined && this.deps.successEvents === true)
        this.deps.events.record(
          target,
          'Normal',
          'BindingSucceed',
          `Successfully binding node [${args.node}] to ${args.podNamespace}/${args.podName}`,
        );
      return outcome;
    } catch (error) {
      const why =
        error instanceof LockContentionError || error instanceof NodeBusyError ? error.message : apiMessage(error);
      const message = `binding ${args.podNamespace}/${args.podName} to ${args.node} failed: ${why}`;
      this.deps.events.record(target, 'Warning', 'BindingFailed', message);
      return { error: message };
    } finally {
      deadline.clear();
    }
  }

  /**
   * The bind's named steps over one attempt record (kube-scheduler's Reserve → Permit → PreBind →
   * Bind → PostBind): reserve, acquire, assume, bind, postBind; any failure runs the one unreserve,
   * which undoes exactly what the attempt holds.
   */
  private async bindWithin(args: BindingArgs, target: EventTarget, signal: AbortSignal): Promise<BindOutcome> {
    const attempt = await this.prepare(args, target, signal);
    if (attempt === undefined) return {};
    try {
      this.reserve(attempt);
      await this.acquire(attempt);
      const annotations = await this.assume(attempt);
      await this.bindPod(attempt, annotations);
    } catch (error) {
      await this.unreserve(attempt);
      throw error;
    } finally {
      if (this.lockOwners.get(args.node) === attempt.token) this.lockOwners.delete(args.node);
    }
    this.postBind(attempt, attempt.encoded ?? '');
    return {};
  }

  /**
   * The pod as this bind validates it; undefined when there is nothing more to do: already bound
   * here, or a pod that names no GPU (kube-scheduler sends only pods with a managed resource), which
   * gets a plain Binding. Bound elsewhere or an unreadable request: an error, nothing written.
   */
  private async prepare(args: BindingArgs, target: EventTarget, signal: AbortSignal): Promise<BindAttempt | undefined> {
    const pod = await this.currentPod(args, signal);
    const boundTo = pod.spec?.nodeName;
    if (boundTo !== undefined && boundTo !== '') {
      if (boundTo === args.node) return undefined;
      throw new BindError(`pod is already bound to node ${boundTo}`);
    }
    const problems = gpuRequestProblems(pod, this.deps.defaults.requestDefaults);
    if (problems.length > 0) throw new BindError(`unreadable GPU request: ${describeProblems(problems)}`);
    const view = viewPod(pod, this.deps.defaults, this.deps.cache);
    if (!view.wantsGpu) {
      await this.createBinding(args, {}, signal);
      return undefined;
    }
    // The UID too: a lock of this name is re-stamped only when it was written for this incarnation.
    const ref: LockingPod = { namespace: args.podNamespace, name: args.podName, uid: args.podUid };
    return {
      args,
      target,
      signal,
      pod,
      view,
      ref,
      token: Symbol(args.podUid),
      reserved: false,
      lockValues: [],
      binding: 'not-sent',
      readForWrite: {},
    };
  }

  /**
   * Reserve: the pod's share is counted on the node while the bind waits for the lock, so that
   * filter and prioritize of the pods kube-scheduler places meanwhile count it: a burst would
   * otherwise send a node more pods than it has room for, and their binds would fail one by one once
   * each got the lock. The fit under the lock (assume) replaces the reservation.
   */
  private reserve(attempt: BindAttempt): void {
    this.countFit(attempt, evaluateNode(this.deps.cache, attempt.args.node, attempt.view));
    attempt.reserved = true;
  }

  /**
   * The pod's share of a fit on the bind's node, counted in the store at once (assumePod: it
   * replaces what was counted for the pod before); a pod that no longer fits is refused.
   */
  private countFit(attempt: BindAttempt, evaluation: NodeEvaluation): PodAllocation {
    const { args, view, pod } = attempt;
    if (!evaluation.fits) throw new BindError(`pod no longer fits on node ${args.node}: ${evaluation.reason}`);
    this.deps.cache.assumePod(
      args.podUid,
      args.node,
      podDeviceUsage(evaluation.allocation, initLayout(view.requests)),
      args.podNamespace,
      pod,
    );
    return evaluation.allocation;
  }

  /** Acquire: the node's lock in its FIFO turn, with the kubelet precondition (acquireInTurn). */
  private async acquire(attempt: BindAttempt): Promise<void> {
    try {
      const lock = await this.acquireInTurn(attempt);
      attempt.lock = lock;
      attempt.lockValues = [lock.value];
    } catch (error) {
      // A lock write that may have landed: ours to clean up (the pod is certainly not bound yet).
      if (error instanceof LockOutcomeUnknownError) attempt.lockValues = error.written;
      throw error;
    }
    this.lockOwners.set(attempt.args.node, attempt.token);
  }

  /**
   * Assume: the GPUs chosen under the lock, from the store's usage (and the node's pods read from
   * the API where the store may lag), and counted at once: no await between this fit and the
   * assumption, so the namespace's next quota check already counts this pod. Returns HAMi's
   * annotations for the Binding.
   */
  private async assume(attempt: BindAttempt): Promise<Record<string, string>> {
    const { args, view, pod, signal } = attempt;
    if (attempt.lock === undefined) throw new BindError('assume without the lock');
    const usage = await this.usageForBind(args, attempt.lock, signal, attempt.readForWrite.pods);
    const evaluation = evaluateNode(
      this.deps.cache,
      args.node,
      { ...view, quota: this.deps.cache.quotaBudget(view.namespace, view.uid, pod) },
      usage,
    );
    const encoded = encodeAllocation(this.countFit(attempt, evaluation));
    attempt.encoded = encoded;
    const seconds = String(Math.floor(this.clock() / 1000));
    return {
      [VGPU_NODE_ANNOTATION]: args.node,
      [VGPU_TIME_ANNOTATION]: seconds,
      [TO_ALLOCATE_ANNOTATION]: encoded,
      [ALLOCATED_ANNOTATION]: encoded,
      [BIND_PHASE_ANNOTATION]: 'allocating',
      [BIND_TIME_ANNOTATION]: seconds,
    };
  }

  /**
   * Bind: one Binding carrying HAMi's annotations and the hami.io/vgpu-node label, with the pod's
   * UID as precondition. After an error the pod is re-read: bound here after all (its answer was
   * lost) is a success; a definite refusal leaves nothing bound; anything else (cut off by the
   * deadline, a lost answer, a 5xx) may still be committed by the apiserver after the re-read
   * (issue #42 item 6), and unreserve then leaves the lock to the rules.
   */
  private async bindPod(attempt: BindAttempt, annotations: Record<string, string>): Promise<void> {
    const { args, signal } = attempt;
    attempt.binding = 'sent';
    try {
      await this.createBinding(args, annotations, signal, { [VGPU_NODE_ANNOTATION]: args.node });
      this.deps.cache.finishBinding(args.podUid);
    } catch (error) {
      const bound = await this.boundHereAfterAll(args);
      if (bound === true) {
        this.deps.cache.finishBinding(args.podUid);
        this.deps.log?.(
          'warn',
          `the Binding of ${args.podNamespace}/${args.podName} failed (${apiMessage(error)}), but the pod is bound ` +
            `to ${args.node}: success`,
        );
        return;
      }
      attempt.binding = bound === false && refusedForSure(error) ? 'refused' : 'maybe-bound';
      throw error;
    }
  }

  /** PostBind: the label follow-up (where the apiserver drops a Binding's labels) and the log line. */
  private postBind(attempt: BindAttempt, encoded: string): void {
    const { args } = attempt;
    this.deps.labels?.follow({ namespace: args.podNamespace, name: args.podName, uid: args.podUid, node: args.node });
    this.deps.log?.('info', `bound ${args.podNamespace}/${args.podName} to ${args.node} with GPUs ${encoded}`);
  }

  /**
   * Unreserve, the one undo of a failed attempt: idempotent, it undoes what the attempt holds. A pod
   * that is or may be bound here keeps everything (the device plugin needs its lock; the assumed
   * usage expires by itself). Otherwise the assumed usage is forgotten and exactly the lock values
   * this attempt wrote are released: before its Binding was sent the bind cannot have bound the pod
   * (a second bind of it waits for this one's lock), so nothing needs re-reading.
   */
  private async unreserve(attempt: BindAttempt): Promise<void> {
    const { args, ref } = attempt;
    if (attempt.binding === 'maybe-bound') {
      // Counted from now on as a pod whose Binding went out: it expires unless the watch shows it bound.
      this.deps.cache.finishBinding(args.podUid);
      this.deps.log?.(
        'warn',
        `kept the lock on ${args.node} after a failed bind of ${ref.namespace}/${ref.name}: the pod may be bound there`,
      );
      return;
    }
    if (attempt.reserved) this.deps.cache.forgetPod(args.podUid);
    attempt.reserved = false;
    const values = attempt.lockValues;
    attempt.lockValues = [];
    if (values.length > 0) await this.release(args, ref, values);
  }

  /**
   * The node's usage to fit against once the lock is ours. The store's (undefined here) when its pod
   * watch has caught up with the node state our lock write replaced: a pod bound to this node under
   * an earlier lock was bound before that lock was released, so no later than that state. Otherwise
   * (a pod watch lagging or relisting, or a lock taken over from a holder that may have bound after
   * the state we replaced) the node's pods are read from the API and counted too: another replica's
   * bind that the store has not delivered yet must not be overcommitted (found by the chaos suite).
   * The pods read before the write (`readBefore`, against the state the write replaced) serve when
   * no holder was taken over: nothing can bind on the node between that state and our write.
   */
  private async usageForBind(
    args: BindingArgs,
    lock: AcquireResult,
    signal: AbortSignal,
    readBefore: PodsReadForWrite | undefined,
  ): Promise<ReadonlyMap<string, GpuUse> | undefined> {
    if (lock.outcome !== 'taken-over' && this.deps.cache.podsSeenThrough(lock.writtenOver)) return undefined;
    const items =
      lock.outcome !== 'taken-over' && readBefore?.resourceVersion === lock.writtenOver
        ? readBefore.items
        : (
            await this.deps.core.listPodForAllNamespaces(
              { fieldSelector: `spec.nodeName=${args.node}` },
              withSignal(signal),
            )
          ).items;
    return this.deps.cache.usageIncluding(args.node, args.podUid, items);
  }

  /**
   * The lock write's precondition: no pod placed on the node earlier is past the lock and still
   * unacknowledged by the node's kubelet, which could call Allocate for it again after a restart
   * and be served the next pod's GPUs. Read from the store when its pod watch has seen everything up
   * to `snapshot` (every earlier allocation there happened under a lock released by then), else
   * from the API (kept in `readForWrite` for the fit).
   */
  private async checkAcknowledged(
    args: BindingArgs,
    snapshot: NodeSnapshot,
    signal: AbortSignal | undefined,
    readForWrite: { pods?: PodsReadForWrite },
  ): Promise<void> {
    const cache = this.deps.cache;
    if (!kubeletRegistered(cache.node(args.node))) return;
    const maxAgeMs = this.deps.acknowledgementMaxAgeMs ?? DEFAULT_ACKNOWLEDGEMENT_MAX_AGE_MS;
    let waiting: UnacknowledgedPod[];
    if (cache.podsSeenThrough(snapshot.resourceVersion)) {
      waiting = cache.unacknowledgedOn(args.node, maxAgeMs, args.podUid);
    } else {
      const listed = await this.deps.core.listPodForAllNamespaces(
        { fieldSelector: `spec.nodeName=${args.node}` },
        withSignal(signal),
      );
      readForWrite.pods = { resourceVersion: snapshot.resourceVersion, items: listed.items };
      const now = this.clock();
      waiting = listed.items.flatMap((pod): UnacknowledgedPod[] => {
        const uid = pod.metadata?.uid;
        if (uid === undefined || uid === args.podUid || nodeAwaitingAcknowledgement(pod) !== args.node) return [];
        // Age from when the store first saw it waiting: a pod's own stamps are its owner's to write.
        const sinceMs = cache.unacknowledgedSince(uid) ?? now;
        return now - sinceMs <= maxAgeMs
          ? [{ namespace: pod.metadata?.namespace ?? '', name: pod.metadata?.name ?? '', uid, sinceMs }]
          : [];
      });
    }
    const first = waiting[0];
    if (first === undefined) return;
    const more = waiting.length > 1 ? ` and ${waiting.length - 1} more` : '';
    throw new NodeBusyError(
      args.node,
      `node ${args.node} is free, but its kubelet has not acknowledged the allocation of ${podKey(first)}${more} ` +
        `(${Math.round((this.clock() - first.sinceMs) / 1000)}s): restarted now, kubelet would call Allocate for it ` +
        `again and be served the next pod's GPUs; ${args.podNamespace}/${args.podName} must wait`,
    );
  }

  /** The pod from the store when it has this incarnation, else from the API. */
  private async currentPod(args: BindingArgs, signal: AbortSignal): Promise<V1Pod> {
    const cached = this.deps.cache.pod(args.podNamespace, args.podName);
    if (cached?.metadata?.uid === args.podUid) return cached;
    let pod: V1Pod;
    try {
      pod = await this.deps.core.readNamespacedPod(
        { name: args.podName, namespace: args.podNamespace },
        withSignal(signal),
      );
    } catch (error) {
      if (isNotFound(error)) throw new BindError('pod not found', { cause: error });
      throw error;
    }
    if (pod.metadata?.uid !== args.podUid)
      throw new BindError(`pod was recreated (uid ${pod.metadata?.uid ?? 'none'}, bind asked for ${args.podUid})`);
    return pod;
  }

  /**
   * Throws when the store shows a newer incarnation under this name: this bind is for a pod that is
   * gone. A store that still shows an older incarnation (it lags the pod we read from the API) is no
   * reason to stop. resourceVersions are compared as the integers every etcd-backed apiserver uses;
   * when one is not, the bind stops (kube-scheduler retries it).
   */
  private checkIncarnation(args: BindingArgs, validatedVersion: string | undefined): void {
    const cached = this.deps.cache.pod(args.podNamespace, args.podName);
    // The store saw this very pod's DELETED event: no Binding of it can succeed, and a lock taken
    // for it now would outlive it if this process died before the failed Binding released it
    // (chaos on real nodes, seed 23: a waiting bind took the lock 4 s after its pod was gone).
    if (
      cached === undefined &&
      this.deps.cache.goneIncarnation(args.podNamespace, args.podName, args.podUid) !== undefined
    ) {
      throw new BindError('pod was deleted while this bind waited');
    }
    if (cached?.metadata?.uid !== undefined && cached.metadata.uid !== args.podUid) {
      if (isNewerVersion(validatedVersion, cached.metadata.resourceVersion)) return;
      throw new BindError(
        `pod was recreated while this bind waited (uid ${cached.metadata.uid}, bind asked for ${args.podUid})`,
      );
    }
  }

  /**
   * Takes the lock in the node's FIFO turn (lock/lock-waiter.ts), re-checking before each try that
   * the pod is still the incarnation the bind validated; one event per kind of wait (a held lock,
   * then a node whose kubelet lags, say different things).
   */
  private async acquireInTurn(attempt: BindAttempt): Promise<AcquireResult> {
    const { args, ref, token, target, signal, readForWrite } = attempt;
    const validatedVersion = attempt.pod.metadata?.resourceVersion;
    const node = args.node;
    const announced = new Set<string>();
    const waitStarted = this.clock();
    const routineMs = this.deps.lockWaitEventAfterMs ?? DEFAULT_LOCK_WAIT_EVENT_AFTER_MS;
    try {
      return await this.waiter.acquire({
        node,
        pod: ref,
        signal,
        options: {
          mayReenter: () => {
            const owner = this.lockOwners.get(node);
            return owner === undefined || owner === token;
          },
          beforeWrite: (snapshot, writeSignal) => this.checkAcknowledged(args, snapshot, writeSignal, readForWrite),
          takeOverFinished: (_node, value) => this.pluginHadItsTurn(node, value),
        },
        beforeEachTry: () => {
          this.checkIncarnation(args, validatedVersion);
        },
        onBusy: (reason) => {
          if (announced.has(reason.name) || this.clock() - waitStarted < routineMs) return;
          announced.add(reason.name);
          this.deps.events.record(
            target,
            'Normal',
            'NodeLockWait',
            `waiting for the lock on node ${node}: ${reason.message}`,
          );
        },
        turnTimedOut: () =>
          new BindDeadlineError(
            `gave up waiting for the lock on node ${node} after ${Math.round(this.deps.lockWaitMs / 1000)}s`,
          ),
        gaveUp: (last) =>
          new BindError(`${last.message} (waited ${Math.round(this.deps.lockWaitMs / 1000)}s)`, { cause: last }),
      });
    } finally {
      // This bind's turn is over: the lock it waited on is gone, or it gave up; the next waiter starts afresh.
      this.releasePending.delete(node);
    }
  }

  /**
   * Whether a lock whose allocation is over has been left to the device plugin long enough: true
   * once this process has seen that very value finished for pluginReleaseWaitMs. The plugin's own
   * release wakes the waiting bind well before that (measured in bench:extender's binpack burst: it
   * removed 140 conflicting lock writes per 200 pods, each followed by two reads); a plugin that died
   * before its release is taken over after the wait. One entry per node with a waiting bind.
   */
  private pluginHadItsTurn(node: string, value: string): boolean {
    const waitMs = this.deps.pluginReleaseWaitMs ?? DEFAULT_PLUGIN_RELEASE_WAIT_MS;
    const now = this.clock();
    const pending = this.releasePending.get(node);
    if (pending?.value !== value) {
      this.releasePending.set(node, { value, sinceMs: now });
      return waitMs <= 0;
    }
    return now - pending.sinceMs >= waitMs;
  }

  private async createBinding(
    args: BindingArgs,
    annotations: Record<string, string>,
    signal: AbortSignal,
    labels?: Record<string, string>,
  ): Promise<void> {
    await this.deps.core.createNamespacedPodBinding(
      {
        name: args.podName,
        namespace: args.podNamespace,
        body: {
          metadata: {
            name: args.podName,
            uid: args.podUid,
            ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
            ...(labels === undefined ? {} : { labels }),
          },
          target: { apiVersion: 'v1', kind: 'Node', name: args.node },
        },
      },
      withSignal(signal),
    );
  }

  /**
   * After a Binding error: is this incarnation bound to the node anyway (the Binding committed and
   * its answer was lost, or an earlier try of this bind succeeded)? Reads the pod with its own short
   * budget, since the bind's deadline may be what failed. A read that fails counts as "maybe".
   */
  private async boundHereAfterAll(args: BindingArgs): Promise<boolean | undefined> {
    const budget = timeoutSignal(this.cleanupReserveMs, () => new BindDeadlineError('re-reading the pod timed out'));
    try {
      const pod = await this.deps.core.readNamespacedPod(
        { name: args.podName, namespace: args.podNamespace },
        withSignal(budget.signal),
      );
      return pod.metadata?.uid === args.podUid && pod.spec?.nodeName === args.node;
    } catch (error) {
      if (isNotFound(error)) return false;
      this.deps.log?.(
        'warn',
        `could not re-read ${args.podNamespace}/${args.podName} after a failed Binding: ${apiMessage(error)}`,
      );
      return undefined;
    } finally {
      budget.clear();
    }
  }

  private async release(args: BindingArgs, ref: PodRef, values: readonly string[]): Promise<void> {
    const budget = timeoutSignal(this.cleanupReserveMs, () => new BindDeadlineError('releasing the lock timed out'));
    try {
      await this.deps.locks.release(args.node, ref, 'bind-failure', { expectValues: values, signal: budget.signal });
    } catch (error) {
      this.deps.log?.(
        'warn',
        `could not release the lock on ${args.node} after a failed bind of ${ref.namespace}/${ref.name} (the ` +
          `sweeper will): ${describeError(error)}`,
      );
    } finally {
      budget.clear();
    }
  }
}
