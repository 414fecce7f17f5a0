import { CronJob } from 'cron';
import { describeError } from '../base/errors.js';
import { sweepOnce, type SweepDeps, type SweepReport } from './sweep-pass.js';

export interface SweepScheduleDeps extends SweepDeps {
  /** cron expression, 5 fields or 6 with leading seconds (SWEEP_SCHEDULE). */
  schedule: string;
  /** Only the elected leader sweeps. */
  isLeader: () => boolean;
  onReport?: (report: SweepReport, durationMs: number) => void;
  onError?: (error: string) => void;
}

/**
 * Runs sweepOnce on a cron schedule, on the leader only. waitForCompletion makes cron skip ticks
 * while a pass still runs, so passes never overlap.
 */
export class SweepSchedule {
  private job: CronJob | undefined;
  private running: Promise<void> | undefined;

  constructor(private readonly deps: SweepScheduleDeps) {}

  start(): void {
    this.job = CronJob.from({
      cronTime: this.deps.schedule,
      timeZone: 'UTC',
      waitForCompletion: true,
      unrefTimeout: true,
      start: true,
      onTick: () => this.tick(),
      errorHandler: (error) => {
        this.deps.onError?.(describeError(error));
      },
    });
  }

  /** Runs one pass now if this replica leads (also what each cron tick does). */
  async tick(): Promise<void> {
    if (!this.deps.isLeader() || this.running !== undefined) return;
    const started = performance.now();
    this.running = sweepOnce({ ...this.deps, stillLeading: () => this.deps.isLeader() && this.deps.stillLeading() })
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

  async stop(): Promise<void> {
    await this.job?.stop();
    await this.running;
  }
}
