import { Backoff } from '../base/backoff.js';
import { V1MicroTime, type CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import { WardenError } from '../base/errors.js';
import { withSignal } from '../kube/call-options.js';
import { apiStatusOf, httpStatusOf, isConflict, isNotFound } from '../kube/errors.js';
import { apiCondition, failureText } from '../telemetry/api-failure.js';
import { ConditionLog, type ConditionReporter } from '../telemetry/condition-log.js';

export interface LeaderElectionDeps {
  api: CoordinationV1Api;
  namespace: string;
  name: string;
  /** Unique per replica: pod name plus a random suffix. */
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /**
   * One deadline for the Lease calls of a round (default: half the renew deadline). Without it a
   * request that never answers (a half-open connection, an apiserver restarting under it) stopped
   * the loop for good: in the chaos suite a follower sat on one for 80 s while the leader was dead,
   * and nobody swept. Half the renew deadline leaves a leader time for one more round.
   */
  roundTimeoutMs?: number;
  clock?: () => number;
  onStartedLeading?: () => void;
  onStoppedLeading?: () => void;
  log?: (message: string) => void;
  /**
   * Where a failing Lease loop reports its condition (one warning with backoff, shared with the
   * other components that reach the apiserver); by default a ConditionLog of its own writing to `log`.
   */
  conditions?: ConditionReporter;
  /** The setting that chose `namespace`, named when the namespace does not exist (e.g. POD_NAMESPACE). */
  namespaceSetting?: string;
}

/** A round of Lease calls ran out of its deadline (the request was aborted). */
export class LeaseRoundTimeoutError extends WardenError {}

/** The reason a term's signal aborts: this replica no longer holds the Lease (or stopped campaigning). */
export class LeadershipLostError extends WardenError {}

/** Why the Lease loop cannot work right now. */
interface Failure {
  since: number;
  message: string;
  /** Retrying cannot fix it by itself (a missing namespace, a missing right): readiness says so at once. */
  definite: boolean;
}

interface Observed {
  holder: string;
  renewTime: string;
  transitions: number;
  /** Our clock when the record last changed: expiry is judged on our clock, not the holder's (skew). */
  at: number;
}

/**
 * Leader election on a coordination.k8s.io Lease, with client-go's semantics (lease 15 s, renew
 * deadline 10 s, retry 2 s by default): the holder renews every retry period; others take over only
 * when the record has not changed for a whole lease duration as seen on their own clock; every
 * write carries the Lease's resourceVersion, so two candidates cannot both win. A leader that cannot
 * renew within the renew deadline stops leading at once, before anyone else may take over.
 */
export class LeaderElector {
  private leading = false;
  /** Aborted when the current term ends; undefined while following. */
  private term: AbortController | undefined;
  private readonly electedListeners = new Set<(term: AbortSignal) => void>();
  /** Ends the term once the renew deadline passes without a renewal, whatever the Lease round is doing. */
  private renewDeadlineTimer: NodeJS.Timeout | undefined;
  private lastRenew = 0;
  private observed: Observed | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = true;
  private failure: Failure | undefined;
  private failures = 0;
  /** A follower's pause after failed rounds: the retry period, doubling up to a lease duration. */
  private readonly followerBackoff: Backoff;
  private readonly conditions: ConditionReporter;
  private readonly clock: () => number;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly roundTimeoutMs: number;

  constructor(private readonly deps: LeaderElectionDeps) {
    this.clock = deps.clock ?? Date.now;
    this.leaseDurationMs = deps.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = deps.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = deps.retryPeriodMs ?? 2_000;
    this.roundTimeoutMs = deps.roundTimeoutMs ?? this.renewDeadlineMs / 2;
    this.conditions =
      deps.conditions ??
      new ConditionLog({
        clock: this.clock,
        emit: (_level, message) => {
          deps.log?.(message);
        },
      }).reporter('leader election');
    this.followerBackoff = new Backoff({
      initialMs: this.retryPeriodMs,
      factor: 2,
      capMs: Math.max(this.retryPeriodMs, this.leaseDurationMs),
    });
  }

  get identity(): string {
    return this.deps.identity;
  }

  /** Leading, and the last renewal is recent enough that nobody else can have taken over. */
  isLeader(): boolean {
    return this.leading && this.clock() - this.lastRenew < this.renewDeadlineMs;
  }

  /**
   * Leadership as terms (lifecycle's Leadership): `elected` gets each term's signal, which aborts
   * with LeadershipLostError as soon as the term ends (a lost or unrenewed Lease, stop()); at once
   * with the current term when leading already. Returns how to stop listening.
   */
  onElected(elected: (term: AbortSignal) => void): () => void {
    this.electedListeners.add(elected);
    if (this.term !== undefined) elected(this.term.signal);
    return () => {
      this.electedListeners.delete(elected);
    };
  }

  /**
   * Why leader election cannot work, for readiness: at once for a definite failure (the namespace
   * does not exist, the Lease API is forbidden), after a whole lease duration of failures otherwise
   * (a blip must not make the replica unready). undefined while the Lease API answers.
   */
  problem(): string | undefined {
    const failure = this.failure;
    if (failure === undefined) return undefined;
    return failure.definite || this.clock() - failure.since >= this.leaseDurationMs ? failure.message : undefined;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    void this.loop();
  }

  /** Stops campaigning; with `release`, hands the lease back so a follower takes over at once. */
  async stop(options: { release: boolean } = { release: true }): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.renewDeadlineTimer);
    const wasLeading = this.leading;
    this.setLeading(false);
    if (options.release && wasLeading) {
      try {
        await this.withinRound('releasing', async (signal) => {
          const lease = await this.deps.api.readNamespacedLease(
            { name: this.deps.name, namespace: this.deps.namespace },
            withSignal(signal),
          );
          if (lease.spec?.holderIdentity === this.deps.identity) {
            const now = new V1MicroTime(this.clock());
            lease.spec = {
              ...lease.spec,
              holderIdentity: '',
              leaseDurationSeconds: 1,
              renewTime: now,
              acquireTime: now,
            };
            await this.deps.api.replaceNamespacedLease(
              { name: this.deps.name, namespace: this.deps.namespace, body: lease },
              withSignal(signal),
            );
          }
        });
      } catch (error) {
        this.deps.log?.(`could not release lease ${this.deps.namespace}/${this.deps.name}: ${failureText(error)}`);
      }
    }
  }

  private async loop(): Promise<void> {
    if (this.stopped) return;
    try {
      const held = await this.withinRound('acquiring or renewing', (signal) => this.tryAcquireOrRenew(signal));
      this.succeeded();
      if (held) {
        this.lastRenew = this.clock();
        this.setLeading(true);
        this.armRenewDeadline();
      } else if (this.leading) {
        this.setLeading(false);
      }
    } catch (error) {
      this.failed(error);
    }
    if (this.leading && this.clock() - this.lastRenew >= this.renewDeadlineMs) this.setLeading(false);
    if (!this.campaigning) return;
    // Up to 20 % jitter so replicas started together do not hit the Lease in lockstep.
    this.timer = setTimeout(
      () => {
        void this.loop();
      },
      this.nextPauseMs() * (1 + 0.2 * Math.random()),
    );
    this.timer.unref();
  }

  /**
   * The retry period; a follower whose rounds keep failing backs off up to a lease duration (nobody
   * can take over faster than that anyway). A leader must retry within its renew deadline: no backoff.
   */
  private nextPauseMs(): number {
    if (this.leading || this.failures === 0) {
      this.followerBackoff.reset();
      return this.retryPeriodMs;
    }
    return this.followerBackoff.next();
  }

  private succeeded(): void {
    this.failures = 0;
    this.failure = undefined;
    this.conditions.ok();
  }

  private failed(error: unknown): void {
    this.failures++;
    const { namespace, name } = this.deps;
    const status = httpStatusOf(error);
    const missingNamespace = status === 404 && /^namespaces? "[^"]*" not found/.test(apiStatusOf(error)?.message ?? '');
    let reported: { condition: string; message: string; definite: boolean };
    if (missingNamespace) {
      const setting = this.deps.namespaceSetting === undefined ? '' : ` (${this.deps.namespaceSetting})`;
      reported = {
        condition: 'lease namespace missing',
        message:
          `leader election cannot work: namespace ${JSON.stringify(namespace)}${setting} does not exist, ` +
          `so Lease ${name} cannot be created; the lock sweeper does not run until it does`,
        definite: true,
      };
    } else {
      const { condition, message } = apiCondition(`leader election (Lease ${namespace}/${name})`, error);
      reported = { condition, message, definite: status === 401 || status === 403 };
    }
    this.failure = {
      since: this.failure?.since ?? this.clock(),
      message: reported.message,
      definite: reported.definite,
    };
    this.conditions.fail(reported.condition, reported.message);
  }

  // A getter, so the check after an await is not narrowed away: stop() may run meanwhile.
  private get campaigning(): boolean {
    return !this.stopped;
  }

  /**
   * Runs `round` with a signal that aborts its requests after roundTimeoutMs, and gives up on it then
   * even if a request ignores the signal, so the loop always goes on.
   */
  private async withinRound<T>(what: string, round: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new LeaseRoundTimeoutError(
          `${what} Lease ${this.deps.namespace}/${this.deps.name} got no answer within ${this.roundTimeoutMs} ms`,
        );
        controller.abort(error);
        reject(error);
      }, this.roundTimeoutMs);
      timer.unref();
    });
    try {
      return await Promise.race([round(controller.signal), timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    const { api, namespace, name, identity } = this.deps;
    const now = this.clock();
    const leaseSeconds = Math.ceil(this.leaseDurationMs / 1000);
    let lease: V1Lease;
    try {
      lease = await api.readNamespacedLease({ name, namespace }, withSignal(signal));
    } catch (error) {
      if (!isNotFound(error)) throw error;
      try {
        await api.createNamespacedLease(
          {
            namespace,
            body: {
              metadata: { name, namespace },
              spec: {
                holderIdentity: identity,
                leaseDurationSeconds: leaseSeconds,
                acquireTime: new V1MicroTime(now),
                renewTime: new V1MicroTime(now),
                leaseTransitions: 0,
              },
            },
          },
          withSignal(signal),
        );
        return true;
      } catch (createError) {
        if (isConflict(createError)) return false;
        throw createError;
      }
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    const transitions = spec.leaseTransitions ?? 0;
    if (this.heldByAnother(spec, now)) return false;

    const mine = holder === identity;
    lease.spec = {
      ...spec,
      holderIdentity: identity,
      leaseDurationSeconds: leaseSeconds,
      // MicroTime must go out with six fractional digits; a plain Date's three are refused (400).
      renewTime: new V1MicroTime(now),
      acquireTime: new V1MicroTime(mine && spec.acquireTime !== undefined ? new Date(spec.acquireTime).getTime() : now),
      leaseTransitions: mine ? transitions : transitions + 1,
    };
    try {
      await api.replaceNamespacedLease({ name, namespace, body: lease }, withSignal(signal));
      return true;
    } catch (error) {
      // 409: another candidate wrote first; it leads, and our next round will observe it.
      if (isConflict(error)) return false;
      throw error;
    }
  }

  /**
   * client-go's renew deadline as a timer: a leader whose rounds hang (each gives up only after its
   * round deadline) still ends its term when the deadline passes, not at the next round's end.
   */
  private armRenewDeadline(): void {
    clearTimeout(this.renewDeadlineTimer);
    this.renewDeadlineTimer = setTimeout(() => {
      if (this.leading && !this.isLeader()) this.setLeading(false);
    }, this.renewDeadlineMs);
    this.renewDeadlineTimer.unref();
  }

  /**
   * Whether another candidate holds the Lease and its record changed within its lease duration, as
   * seen on our clock (the holder's renewTime is not compared with our clock: skew).
   */
  private heldByAnother(spec: NonNullable<V1Lease['spec']>, now: number): boolean {
    const holder = spec.holderIdentity ?? '';
    const renewTime = spec.renewTime === undefined ? '' : new Date(spec.renewTime).toISOString();
    const transitions = spec.leaseTransitions ?? 0;
    const observed = this.observed;
    if (observed?.holder !== holder || observed.renewTime !== renewTime || observed.transitions !== transitions) {
      this.observed = { holder, renewTime, transitions, at: now };
    }
    const recordDurationMs = (spec.leaseDurationSeconds ?? Math.ceil(this.leaseDurationMs / 1000)) * 1000;
    return holder !== '' && holder !== this.deps.identity && (this.observed?.at ?? now) + recordDurationMs > now;
  }

  private setLeading(leading: boolean): void {
    if (leading === this.leading) return;
    this.leading = leading;
    const lease = `lease ${this.deps.namespace}/${this.deps.name}`;
    const line = `${this.deps.identity} ${leading ? 'became' : 'is no longer'} the leader of ${lease}`;
    this.deps.log?.(line);
    if (leading) {
      this.term = new AbortController();
      this.deps.onStartedLeading?.();
      for (const elected of [...this.electedListeners]) this.tell(elected, this.term.signal);
    } else {
      clearTimeout(this.renewDeadlineTimer);
      this.term?.abort(new LeadershipLostError(line));
      this.term = undefined;
      this.deps.onStoppedLeading?.();
    }
  }

  private tell(elected: (term: AbortSignal) => void, term: AbortSignal): void {
    try {
      elected(term);
    } catch (error) {
      this.deps.log?.(`a part started on election failed: ${failureText(error)}`);
    }
  }
}
