import { Backoff } from '../base/backoff.js';
/**
 * Which stalled locks have been announced, so that a lock every sweep finds stalled (every 30 s by
 * default, and on each bind refused by it) is one warning line and one Event when it stalls, then
 * reminders with backoff (5, 10, 20, then every 30 min by default), and one line when it ends.
 * Keyed by node: a node carries one lock at a time, so the table is as big as the number of nodes
 * with a stalled lock, and a cap bounds it anyway. Pure but for the clock values passed in.
 */

export interface StalledLockLimits {
  /** First reminder after this long; each later one waits twice as long. */
  firstRepeatMs: number;
  /** Longest wait between reminders. */
  maxRepeatMs: number;
  /**
   * A stall not reported for this long is forgotten without a line (its end was never seen, e.g.
   * the sweeper runs on another replica); reported again, it is announced as new.
   */
  forgetAfterMs: number;
  /** Most stalls tracked; the least recently reported goes first. */
  maxEntries: number;
}

export const DEFAULT_STALLED_LIMITS: StalledLockLimits = {
  firstRepeatMs: 5 * 60_000,
  maxRepeatMs: 30 * 60_000,
  forgetAfterMs: 60 * 60_000,
  maxEntries: 10_000,
};

export interface Stall {
  node: string;
  value: string;
  /** When this replica first saw it stalled. */
  since: number;
  lastReportAt: number;
  nextAt: number;
  /** The waits between announcements: the first repeat, doubling up to the longest. */
  repeats: Backoff;
  /** Reports since the last announcement. */
  unlogged: number;
}

/** What a report asks for: announce (first time, or a reminder is due) or stay quiet. */
export interface StallReport {
  announce: 'first' | 'reminder' | undefined;
  stall: Stall;
  /** Reports left unannounced before this reminder. */
  unlogged: number;
  /** A different stalled lock this node had before (its lock changed without us seeing it go). */
  replaced: Stall | undefined;
}

export class StalledLocks {
  /** Oldest report first. */
  private readonly stalls = new Map<string, Stall>();

  constructor(private readonly limits: StalledLockLimits = DEFAULT_STALLED_LIMITS) {}

  get size(): number {
    return this.stalls.size;
  }

  report(node: string, value: string, now: number): StallReport {
    this.forgetOld(now);
    const previous = this.stalls.get(node);
    const replaced = previous !== undefined && previous.value !== value ? previous : undefined;
    let stall = replaced === undefined ? previous : undefined;
    this.stalls.delete(node);
    if (stall === undefined) {
      const repeats = new Backoff({ initialMs: this.limits.firstRepeatMs, factor: 2, capMs: this.limits.maxRepeatMs });
      stall = { node, value, since: now, lastReportAt: now, nextAt: now + repeats.next(), repeats, unlogged: 0 };
      this.stalls.set(node, stall);
      this.evictOverCap();
      return { announce: 'first', stall, unlogged: 0, replaced };
    }
    this.stalls.set(node, stall);
    stall.lastReportAt = now;
    if (now < stall.nextAt) {
      stall.unlogged++;
      return { announce: undefined, stall, unlogged: stall.unlogged, replaced };
    }
    const unlogged = stall.unlogged;
    stall.unlogged = 0;
    stall.nextAt = now + stall.repeats.next();
    return { announce: 'reminder', stall, unlogged, replaced };
  }

  /** The lock on `node` was released: its stall, if it had one with this value (any value when undefined). */
  released(node: string, value: string | undefined): Stall | undefined {
    const stall = this.stalls.get(node);
    if (stall === undefined || (value !== undefined && stall.value !== value)) return undefined;
    this.stalls.delete(node);
    return stall;
  }

  /**
   * A complete sweep saw every locked node: stalls it did not find again (same node, same value)
   * have ended, except on nodes it could not check. Returns the ended ones, forgotten here.
   */
  sweepCompleted(
    stillStalled: readonly { node: string; value: string | undefined }[],
    unchecked: ReadonlySet<string>,
  ): Stall[] {
    const seen = new Map(stillStalled.map((entry) => [entry.node, entry.value]));
    const ended: Stall[] = [];
    for (const stall of this.stalls.values()) {
      // A value the pass could not tell (undefined) is taken as the same lock: no false "ended".
      const found =
        seen.has(stall.node) && (seen.get(stall.node) === undefined || seen.get(stall.node) === stall.value);
      if (found || unchecked.has(stall.node)) continue;
      ended.push(stall);
    }
    for (const stall of ended) this.stalls.delete(stall.node);
    return ended;
  }

  private forgetOld(now: number): void {
    for (const stall of this.stalls.values()) {
      if (now - stall.lastReportAt < this.limits.forgetAfterMs) return;
      this.stalls.delete(stall.node);
    }
  }

  private evictOverCap(): void {
    for (const node of this.stalls.keys()) {
      if (this.stalls.size <= this.limits.maxEntries) return;
      this.stalls.delete(node);
    }
  }
}
