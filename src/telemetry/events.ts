import { PatchStrategy, setHeaderOptions, type CoreV1Api, type CoreV1Event } from '@kubernetes/client-node';
import { WardenError } from '../base/errors.js';
import { httpStatusOf, isTransientApiError } from '../kube/errors.js';
import { clip } from '../base/user-text.js';
import { failureText } from './api-failure.js';
import { ConditionLog, type ConditionReporter } from './condition-log.js';
import { createSinceWritten, SeriesBook, type PlannedWrite, type Series, type WriteOutcome } from './event-series.js';
import { type Clock, systemClock } from '../base/clock.js';

export interface EventTarget {
  kind: 'Pod' | 'Node';
  name: string;
  namespace?: string;
  uid?: string;
}

export type EventType = 'Normal' | 'Warning';

/** The two calls the recorder makes; CoreV1Api has them (tests pass a stand-in). */
export type EventsApi = Pick<CoreV1Api, 'createNamespacedEvent' | 'patchNamespacedEvent'>;

/** A timer the recorder can cancel; injected so tests drive time by hand. */
export type ScheduleFn = (run: () => void, delayMs: number) => { cancel(): void };

export interface EventRecorderOptions {
  /** Shortest time between two writes of one Event (same object, type and reason); default 60 s. */
  intervalMs?: number;
  /** An Event not repeated for this long is forgotten, the next occurrence creates a new one; default 1 h. */
  idleExpiryMs?: number;
  /** Most Events remembered at once; default 4096, like client-go. */
  maxEntries?: number;
  /** Milliseconds now. */
  clock?: Clock;
  schedule?: ScheduleFn;
  /**
   * Where write failures go: one warning with backoff and one line on recovery. Defaults to a
   * ConditionLog writing through `log`; `serve` can pass its own so /readyz-style reporting agrees.
   */
  failures?: ConditionReporter;
}

export const DEFAULT_EVENT_INTERVAL_MS = 60_000;
export const DEFAULT_EVENT_IDLE_EXPIRY_MS = 60 * 60_000;
export const DEFAULT_EVENT_MAX_ENTRIES = 4096;
/** The apiserver's limit for an Event's message is 1 KiB in events.k8s.io; core/v1 is kept as short. */
const MESSAGE_CHARS = 1024;
const FAILURE_CONDITION = 'events not written';

export class EventRecorderSettingsError extends WardenError {}

interface Subject {
  target: EventTarget;
  namespace: string;
  type: EventType;
  reason: string;
}

const defaultSchedule: ScheduleFn = (run, delayMs) => {
  const timer = setTimeout(run, delayMs);
  // A pending count must never keep a stopping process alive.
  timer.unref();
  return {
    cancel: () => {
      clearTimeout(timer);
    },
  };
};

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

function positive(name: string, value: number | undefined, fallback: number): number {
  const chosen = value ?? fallback;
  if (!Number.isFinite(chosen) || chosen <= 0)
    throw new EventRecorderSettingsError(`invalid EventRecorder ${name}=${String(value)}: must be a positive number`);
  return chosen;
}

function keyOf(component: string, target: EventTarget, type: EventType, reason: string): string {
  return JSON.stringify([component, target.kind, target.namespace ?? '', target.name, target.uid ?? '', type, reason]);
}

/**
 * Writes core/v1 Events (what `kubectl describe` shows), aggregated as kube-scheduler's recorder
 * does: repeats of one (object, type, reason) from this component are one Event whose `count`
 * grows, patched at most once per interval with the latest message (event-series.ts has the
 * rules). Fire and forget: record() never throws and never waits; a failed write is logged (once,
 * then with backoff) and never fails the operation it describes.
 *
 * Needs `create` and `patch` on events. Where RBAC grants only `create`, the first 403 on a patch
 * switches to creating one new Event per interval that carries the occurrences since the last one.
 */
export class EventRecorder {
  private readonly intervalMs: number;
  private readonly clock: Clock;
  private readonly schedule: ScheduleFn;
  private readonly book: SeriesBook<Subject>;
  private readonly timers = new Map<Series<Subject>, { cancel(): void }>();
  private readonly failures: ConditionReporter;
  private readonly writes = new Set<Promise<void>>();
  private canPatch = true;
  private closed = false;

  constructor(
    private readonly api: EventsApi,
    private readonly component: string,
    private readonly log: (message: string) => void = () => undefined,
    options: EventRecorderOptions = {},
  ) {
    this.intervalMs = positive('intervalMs', options.intervalMs, DEFAULT_EVENT_INTERVAL_MS);
    const idleExpiryMs = positive('idleExpiryMs', options.idleExpiryMs, DEFAULT_EVENT_IDLE_EXPIRY_MS);
    if (idleExpiryMs < this.intervalMs) {
      throw new EventRecorderSettingsError(
        `invalid EventRecorder idleExpiryMs=${idleExpiryMs}: must be at least intervalMs (${this.intervalMs})`,
      );
    }
    const maxEntries = Math.floor(positive('maxEntries', options.maxEntries, DEFAULT_EVENT_MAX_ENTRIES));
    this.clock = options.clock ?? systemClock;
    this.schedule = options.schedule ?? defaultSchedule;
    this.book = new SeriesBook<Subject>({ intervalMs: this.intervalMs, idleExpiryMs, maxEntries }, (series) => {
      this.cancelTimer(series);
    });
    this.failures =
      options.failures ??
      new ConditionLog({
        clock: this.clock,
        emit: (_level, message) => {
          this.log(message);
        },
      }).reporter('events');
  }

  /** Events remembered now (bounded by maxEntries). */
  get size(): number {
    return this.book.size;
  }

  record(target: EventTarget, type: EventType, reason: string, message: string): void {
    if (this.closed) return;
    try {
      const now = this.clock();
      const subject: Subject = { target, namespace: target.namespace ?? 'default', type, reason };
      const { series, dueAt } = this.book.observe(
        keyOf(this.component, target, type, reason),
        subject,
        clip(message, MESSAGE_CHARS),
        now,
      );
      this.arrange(series, dueAt, now);
    } catch (error) {
      // Nothing here should throw; if it does, the operation being described must not fail for it.
      this.failures.fail(FAILURE_CONDITION, `could not record Event ${clip(reason)}: ${failureText(error)}`);
    }
  }

  /** Writes every count not written yet, ignoring the interval (at shutdown); resolves when all writes settled. */
  async flush(): Promise<void> {
    for (const series of this.book.pending()) {
      this.cancelTimer(series);
      this.write(series);
    }
    while (this.writes.size > 0) await Promise.allSettled([...this.writes]);
  }

  /** Flushes, then stops: later records are dropped and no timer is left behind. */
  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
    for (const timer of this.timers.values()) timer.cancel();
    this.timers.clear();
  }

  private arrange(series: Series<Subject>, dueAt: number | undefined, now: number): void {
    if (dueAt === undefined) return;
    if (dueAt <= now) {
      this.write(series);
      return;
    }
    this.timers.set(
      series,
      this.schedule(() => {
        this.timers.delete(series);
        if (this.book.holds(series)) this.write(series);
      }, dueAt - now),
    );
  }

  private cancelTimer(series: Series<Subject>): void {
    this.timers.get(series)?.cancel();
    this.timers.delete(series);
  }

  private write(series: Series<Subject>): void {
    const plan = this.book.begin(series, this.clock(), this.canPatch);
    if (plan === undefined) return;
    const done = this.send(series, plan).then((outcome) => {
      if (this.closed) return;
      const now = this.clock();
      this.arrange(series, this.book.end(series, plan, outcome, now), now);
    });
    this.writes.add(done);
    void done.finally(() => this.writes.delete(done));
  }

  /** One write and its fallbacks; resolves with the outcome, never rejects. */
  private async send(series: Series<Subject>, plan: PlannedWrite): Promise<WriteOutcome> {
    try {
      if (plan.action === 'patch' && plan.name !== undefined) {
        const patched = await this.patch(series, plan, plan.name);
        if (patched !== undefined) return this.succeeded(patched);
      }
      const name = await this.create(series, plan.action === 'patch' ? this.fallbackCreate(series, plan) : plan);
      return this.succeeded({ ok: true, name });
    } catch (error) {
      const { target, reason } = series.subject;
      this.failures.fail(
        FAILURE_CONDITION,
        `could not write Event ${clip(reason)} for ${target.kind} ` +
          `${clip(series.subject.namespace)}/${clip(target.name)}: ${failureText(error)}`,
      );
      return { ok: false, retry: isTransientApiError(error) };
    }
  }

  /**
   * A patch turned into a create. The Event was gone: it is created again with the whole count.
   * Patch is forbidden: the new Event carries only what the last one did not.
   */
  private fallbackCreate(series: Series<Subject>, plan: PlannedWrite): PlannedWrite {
    if (this.canPatch) return { ...plan, action: 'create', name: undefined };
    return createSinceWritten(plan, series.writtenCount);
  }

  private succeeded(outcome: WriteOutcome): WriteOutcome {
    this.failures.ok();
    return outcome;
  }

  /**
   * Patches count, lastTimestamp and message. Undefined when a create must follow: the Event is
   * gone (deleted, or past the apiserver's --event-ttl: client-go creates it again too) or RBAC
   * grants no patch (then no later write tries one either).
   */
  private async patch(series: Series<Subject>, plan: PlannedWrite, name: string): Promise<WriteOutcome | undefined> {
    try {
      const body = { count: plan.count, lastTimestamp: new Date(plan.lastAt).toISOString(), message: plan.message };
      await this.api.patchNamespacedEvent({ name, namespace: series.subject.namespace, body }, mergePatch);
      return { ok: true };
    } catch (error) {
      const status = httpStatusOf(error);
      if (status === 404) {
        this.book.forgetName(series);
        return undefined;
      }
      if (status !== 403) throw error;
      this.canPatch = false;
      this.log(
        `cannot patch Events (${failureText(error)}): repeats now create one new Event per ` +
          `${Math.round(this.intervalMs / 1000)} s instead of counting on one; grant "patch" on events to the ` +
          `ServiceAccount (manifests/rbac.yaml)`,
      );
      return undefined;
    }
  }

  private async create(series: Series<Subject>, plan: PlannedWrite): Promise<string | undefined> {
    const { target, namespace, type, reason } = series.subject;
    const body: CoreV1Event = {
      metadata: { generateName: `${target.name}.`, namespace },
      involvedObject: {
        kind: target.kind,
        name: target.name,
        namespace: target.namespace,
        uid: target.uid,
        apiVersion: 'v1',
      },
      reason,
      message: plan.message,
      type,
      source: { component: this.component },
      reportingComponent: this.component,
      firstTimestamp: new Date(plan.firstAt),
      lastTimestamp: new Date(plan.lastAt),
      count: plan.count,
    };
    const created = await this.api.createNamespacedEvent({ namespace, body });
    return created.metadata.name;
  }
}
