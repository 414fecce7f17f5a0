import { Backoff } from '../base/backoff.js';
import { formatAge } from '../base/human-age.js';
import { type Clock, systemClock } from '../base/clock.js';

/**
 * One warning line for a persistent condition instead of one per retry. A component that retries
 * (a reflector, the leader elector, the start-up retry) reports each failure under a condition key
 * ("apiserver unreachable", "lease namespace missing"); the first report is logged at once, repeats
 * only after 1 min, then 2, 4, 8 and at most every 10 min; when every component that reported the
 * condition has succeeded again, one info line says it recovered. The apiserver being down is thus
 * one line, whichever of the pod and node reflectors and the Lease loop fails first.
 *
 * A condition that comes back soon after it recovered (a flapping watch) stays inside the same
 * backoff: it is announced again only once its next repeat is due, so it cannot log a pair of lines
 * per flap. Pure but for the injected clock and output.
 */
export interface ConditionLogDeps {
  emit: (level: 'warn' | 'info', message: string, condition: string) => void;
  clock?: Clock;
  /** First repeat after this long (default 60 s); each later one waits twice as long. */
  firstRepeatMs?: number;
  /** Longest wait between repeats (default 10 min). */
  maxRepeatMs?: number;
  /** Appended to a condition's warning lines, e.g. which apiserver and kubeconfig were used. */
  context?: (condition: string) => string | undefined;
}

/** What one component reports: at most one condition at a time, the one its last attempt hit. */
export interface ConditionReporter {
  /** The last attempt failed with this condition (replacing any other this component held). */
  fail(condition: string, message: string): void;
  /** The last attempt succeeded: this component no longer holds any condition. */
  ok(): void;
}

interface Episode {
  holders: Set<string>;
  /** When the current episode began (or undefined while the condition is resolved). */
  since: number | undefined;
  /** Whether the current episode has been announced, so that a recovery is worth a line. */
  announced: boolean;
  message: string;
  /** When the next warning may be logged. */
  nextAt: number;
  /** The waits after each warning: the first repeat, doubling up to the longest. */
  repeats: Backoff;
  /** Reports not logged since the last line. */
  unlogged: number;
  /** When the condition was last held; a long quiet period afterwards forgets its backoff. */
  lastHeldAt: number;
}

export const DEFAULT_FIRST_REPEAT_MS = 60_000;
export const DEFAULT_MAX_REPEAT_MS = 10 * 60_000;

export class ConditionLog {
  private readonly clock: Clock;
  private readonly firstRepeatMs: number;
  private readonly maxRepeatMs: number;
  private readonly episodes = new Map<string, Episode>();
  private readonly held = new Map<string, string>();

  constructor(private readonly deps: ConditionLogDeps) {
    this.clock = deps.clock ?? systemClock;
    this.firstRepeatMs = deps.firstRepeatMs ?? DEFAULT_FIRST_REPEAT_MS;
    this.maxRepeatMs = deps.maxRepeatMs ?? DEFAULT_MAX_REPEAT_MS;
  }

  /** A reporter for one component; its name only tells holders apart. */
  reporter(component: string): ConditionReporter {
    return {
      fail: (condition, message) => {
        this.fail(component, condition, message);
      },
      ok: () => {
        this.release(component);
      },
    };
  }

  /** The conditions held now, oldest first, with their latest message. */
  active(): { condition: string; message: string; since: number }[] {
    const active: { condition: string; message: string; since: number }[] = [];
    for (const [condition, episode] of this.episodes) {
      if (episode.holders.size > 0 && episode.since !== undefined)
        active.push({ condition, message: episode.message, since: episode.since });
    }
    return active.sort((a, b) => a.since - b.since);
  }

  private fail(component: string, condition: string, message: string): void {
    const previous = this.held.get(component);
    if (previous !== undefined && previous !== condition) this.release(component);
    this.held.set(component, condition);
    const now = this.clock();
    let episode = this.episodes.get(condition);
    // Quiet for longer than the longest repeat: a new occurrence starts from the first backoff step.
    if (episode !== undefined && episode.holders.size === 0 && now - episode.lastHeldAt >= this.maxRepeatMs)
      episode = undefined;
    if (episode === undefined) {
      episode = {
        holders: new Set(),
        since: undefined,
        announced: false,
        message,
        nextAt: now,
        repeats: new Backoff({ initialMs: this.firstRepeatMs, factor: 2, capMs: this.maxRepeatMs }),
        unlogged: 0,
        lastHeldAt: now,
      };
      this.episodes.set(condition, episode);
    }
    episode.holders.add(component);
    episode.message = message;
    episode.lastHeldAt = now;
    episode.since ??= now;
    if (now < episode.nextAt) {
      episode.unlogged++;
      return;
    }
    const context = this.deps.context?.(condition);
    this.deps.emit(
      'warn',
      `${message}${context === undefined ? '' : ` ${context}`}${this.repeatNote(episode, now)}`,
      condition,
    );
    episode.announced = true;
    episode.unlogged = 0;
    episode.nextAt = now + episode.repeats.next();
  }

  private repeatNote(episode: Episode, now: number): string {
    const unlogged = episode.unlogged > 0 ? `${episode.unlogged} more not logged` : undefined;
    if (episode.announced) {
      const since = formatAge((now - (episode.since ?? now)) / 1000);
      return ` (still, for ${since}${unlogged === undefined ? '' : `; ${unlogged}`})`;
    }
    return unlogged === undefined ? '' : ` (again; ${unlogged} since the last line)`;
  }

  private release(component: string): void {
    const condition = this.held.get(component);
    if (condition === undefined) return;
    this.held.delete(component);
    const episode = this.episodes.get(condition);
    if (episode === undefined) return;
    episode.holders.delete(component);
    if (episode.holders.size > 0) return;
    const now = this.clock();
    episode.lastHeldAt = now;
    if (episode.announced && episode.since !== undefined) {
      this.deps.emit('info', `recovered after ${formatAge((now - episode.since) / 1000)}: ${condition}`, condition);
    }
    episode.since = undefined;
    episode.announced = false;
  }
}
