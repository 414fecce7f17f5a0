import { CronJob } from 'cron';
import { describeError } from '../base/errors.js';
import { untilAborted } from '../base/abort.js';
import { sweepOnce, type SweepDeps, type SweepReport } from './sweep-pass.js';

export interface SweepScheduleDeps extends Omit<SweepDeps, 'signal'> {
  /** cron expression, 5 fields or 6 with leading seconds (SWEEP_SCHEDULE). */
  schedule: string;
  onReport?: (report: SweepReport, durationMs: number) => void;
  onError?: (error: string) => void;
}

/**
 * Runs sweepOnce on a cron schedule, on the leader only: a runnable that needs a leader, started
 * with the term's signal, whose end stops the schedule and abandons the pass in progress.
 * waitForCompletion makes cron skip ticks while a pass still runs, so passes never overlap.
 */
export class SweepSchedule {
  readonly name = 'lock sweeper';
  readonly needsLeader = true;
  private running: Promise<void> | undefined;

  constructor(private readonly deps: SweepScheduleDeps) {}

  /** Sweeps on the schedule until `signal` aborts; resolves once the pass in progress has ended. */
  async start(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    const job = CronJob.from({
      cronTime: this.deps.schedule,
      timeZone: 'UTC',
      waitForCompletion: true,
      unrefTimeout: true,
      start: true,
      onTick: () => this.tick(signal),
      errorHandler: (error) => {
        this.deps.onError?.(describeError(error));
      },
    });
    await untilAborted(signal);
    await job.stop();
    await this.running;
  }

  /** Runs one pass now, within `signal` (also what each cron tick does); none while one runs. */
  async tick(signal: AbortSignal): Promise<void> {
    if (signal.aborted || this.running !== undefined) return;
    const started = performance.now();
    this.running = sweepOnce({ ...this.deps, signal })
      .then((report) => {
        this.deps.onReport?.(report, performance.now() - started);
      })
      .catch((error: unknown) => {
        this.deps.onError?.(describeError(error));
      })
      .finally(() => {
        this.running = undefined;
      });
    await this.running;
  }
}
