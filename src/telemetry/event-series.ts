/**
 * The bookkeeping behind EventRecorder's aggregation, without I/O or timers: which occurrences are
 * one Event, how many of them the API already carries, and when the next write may go out.
 *
 * Like client-go's EventCorrelator (core/v1 Events, `count`) and the events.k8s.io broadcaster that
 * kube-scheduler uses (`series`): occurrences with the same key (object, type, reason, reporting
 * component; not the message) are one Event whose count grows. The first occurrence is written at
 * once (whoever runs `kubectl describe` right after the failure sees it); later ones are folded
 * into at most one write per interval, carrying the total count and the latest message. Unlike
 * client-go, which patches on every repeat and leans on a token bucket against spam, a burst of
 * any size costs at most two API writes per interval and key. Pure but for the clock values the
 * caller passes in.
 */

export interface SeriesLimits {
  /** Shortest time between two API writes for one series. */
  intervalMs: number;
  /**
   * A series not seen for this long is forgotten; its next occurrence starts a new Event. An hour
   * by default: the apiserver deletes Events an hour after their last write (--event-ttl).
   */
  idleExpiryMs: number;
  /** Most series remembered; the least recently seen one goes first (client-go keeps 4096). */
  maxEntries: number;
}

export interface Series<S> {
  readonly key: string;
  /** What the writer needs about the object, type and reason; fixed by the key. */
  readonly subject: S;
  /** The latest occurrence's message: an Event says what is happening now. */
  message: string;
  /** Occurrences since the series began. */
  count: number;
  firstAt: number;
  lastAt: number;
  /** Occurrences the API carries already. */
  writtenCount: number;
  /** The first occurrence not written yet (the firstTimestamp of a create-only Event). */
  pendingSince: number;
  /** The Event's name once created: later writes patch it. */
  name: string | undefined;
  /** When the last write started; the next may start intervalMs later. */
  writtenAt: number | undefined;
  /** The count a write under way will leave in the API; undefined while none is. */
  inFlightUpTo: number | undefined;
  /** A write is scheduled for this time. */
  dueAt: number | undefined;
  /** Failed writes in a row. */
  failures: number;
}

/** One API write: create a new Event, or patch the series' Event. */
export interface PlannedWrite {
  action: 'create' | 'patch';
  /** The Event to patch (action patch). */
  name: string | undefined;
  count: number;
  firstAt: number;
  lastAt: number;
  message: string;
  /** The series' count when planned: what the API carries once this write succeeds. */
  upTo: number;
  /** The series' pendingSince when planned, restored if the write fails and is retried. */
  pendingSince: number;
}

/** How a write ended: a created Event's name; a failure the caller may retry or not. */
export type WriteOutcome = { ok: true; name?: string } | { ok: false; retry: boolean };

/** Retries of a failed write (one per interval) before its occurrences are given up. */
export const MAX_WRITE_ATTEMPTS = 3;

/**
 * The write plan for a series. With patch, the series' Event carries the total (client-go: the
 * count since the first occurrence; a deleted Event is created again with it). Without patch
 * (`canPatch` false: RBAC grants only create) every write is a new Event carrying the occurrences
 * since the previous one, so no occurrence is counted twice across Events.
 */
export function planWrite<S>(series: Series<S>, canPatch: boolean): PlannedWrite {
  const whole: PlannedWrite = {
    action: 'create',
    name: undefined,
    count: series.count,
    firstAt: series.firstAt,
    lastAt: series.lastAt,
    message: series.message,
    upTo: series.count,
    pendingSince: series.pendingSince,
  };
  if (!canPatch) return createSinceWritten(whole, series.writtenCount);
  return series.name === undefined ? whole : { ...whole, action: 'patch', name: series.name };
}

/**
 * `plan` as the create that carries only the occurrences no Event carries yet (`writtenCount` of
 * the series' count is written): what a write without patch sends, and so counts nothing twice.
 */
export function createSinceWritten(plan: PlannedWrite, writtenCount: number): PlannedWrite {
  return { ...plan, action: 'create', name: undefined, count: plan.upTo - writtenCount, firstAt: plan.pendingSince };
}

export class SeriesBook<S> {
  /** In order of last occurrence, oldest first: expiry and eviction both take from the front. */
  private readonly entries = new Map<string, Series<S>>();

  constructor(
    private readonly limits: SeriesLimits,
    /** Told about every series dropped by expiry or the size cap (to cancel its timer). */
    private readonly onDrop: (series: Series<S>) => void = () => undefined,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** Whether `series` is still the one kept for its key (not dropped meanwhile). */
  holds(series: Series<S>): boolean {
    return this.entries.get(series.key) === series;
  }

  /** Series with occurrences the API does not carry yet and no write under way. */
  pending(): Series<S>[] {
    return [...this.entries.values()].filter(
      (series) => series.inFlightUpTo === undefined && series.count > series.writtenCount,
    );
  }

  /**
   * One occurrence. Returns the series and when a write should go out for it: `now` (at once),
   * later (the interval since the last write has not passed), or undefined when one is already
   * scheduled or under way (it will pick this occurrence up).
   */
  observe(key: string, subject: S, message: string, now: number): { series: Series<S>; dueAt: number | undefined } {
    this.expire(now);
    let series = this.entries.get(key);
    if (series === undefined) {
      series = {
        key,
        subject,
        message,
        count: 0,
        firstAt: now,
        lastAt: now,
        writtenCount: 0,
        pendingSince: now,
        name: undefined,
        writtenAt: undefined,
        inFlightUpTo: undefined,
        dueAt: undefined,
        failures: 0,
      };
    } else {
      this.entries.delete(key);
    }
    this.entries.set(key, series);
    this.evictOverCap();
    // The first occurrence past what the API has (or will have once the write under way lands).
    if (series.count === (series.inFlightUpTo ?? series.writtenCount)) series.pendingSince = now;
    series.count++;
    series.lastAt = now;
    series.message = message;
    return { series, dueAt: this.nextDue(series, now) };
  }

  /** Starts a write: nothing while one is under way or nothing is pending. */
  begin(series: Series<S>, now: number, canPatch: boolean): PlannedWrite | undefined {
    if (series.inFlightUpTo !== undefined || series.count === series.writtenCount) return undefined;
    series.inFlightUpTo = series.count;
    series.writtenAt = now;
    series.dueAt = undefined;
    return planWrite(series, canPatch);
  }

  /**
   * Ends a write. Returns when the next write is due, if occurrences arrived meanwhile or a
   * failed write is to be retried; undefined when the series is up to date (or was dropped).
   */
  end(series: Series<S>, plan: PlannedWrite, outcome: WriteOutcome, now: number): number | undefined {
    series.inFlightUpTo = undefined;
    if (outcome.ok) {
      series.failures = 0;
      series.writtenCount = plan.upTo;
      if (outcome.name !== undefined) series.name = outcome.name;
    } else if (!outcome.retry || ++series.failures >= MAX_WRITE_ATTEMPTS) {
      // Given up: these occurrences stay unwritten, and a retry loop never outlives its cause.
      series.failures = 0;
      series.writtenCount = plan.upTo;
    } else {
      series.pendingSince = Math.min(series.pendingSince, plan.pendingSince);
    }
    return this.holds(series) ? this.nextDue(series, now) : undefined;
  }

  /** The series' Event is gone (deleted, or expired by the apiserver): the next write creates one. */
  forgetName(series: Series<S>): void {
    series.name = undefined;
  }

  private nextDue(series: Series<S>, now: number): number | undefined {
    if (series.inFlightUpTo !== undefined || series.dueAt !== undefined || series.count === series.writtenCount)
      return undefined;
    const dueAt = series.writtenAt === undefined ? now : Math.max(now, series.writtenAt + this.limits.intervalMs);
    series.dueAt = dueAt;
    return dueAt;
  }

  private expire(now: number): void {
    for (const series of this.entries.values()) {
      if (now - series.lastAt < this.limits.idleExpiryMs) return;
      this.drop(series);
    }
  }

  private evictOverCap(): void {
    for (const series of this.entries.values()) {
      if (this.entries.size <= this.limits.maxEntries) return;
      this.drop(series);
    }
  }

  private drop(series: Series<S>): void {
    this.entries.delete(series.key);
    this.onDrop(series);
  }
}
