// `--load`: chaos runs one after another beside the suite for the whole soak, so the suite's tests
// are measured on a loaded machine and the chaos invariants are checked while the suite runs.
// The command is a parameter so the start/restart/stop logic is tested with a dummy command.
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { ProcessGroup, readLogTail } from './process-group.js';
import type { ChaosResult } from './step-outcome.js';
import { lastMeaningfulLines } from './step-output.js';

export interface ChaosCommand {
  file: string;
  args: string[];
}

export interface ChaosBesideOptions {
  command: (seed: number) => ChaosCommand;
  firstSeed: number;
  cwd: string;
  logDir: string;
  env?: NodeJS.ProcessEnv;
  killAfterMs?: number;
  /**
   * A run that ends sooner than this (chaos crashing at start) is followed by restartDelayMs of
   * pause, so a broken chaos cannot spin through seeds and fill the log directory.
   */
  quickExitMs?: number;
  restartDelayMs?: number;
  onRunEnd?: (result: ChaosResult) => void;
}

export class ChaosBeside {
  private readonly results: ChaosResult[] = [];
  private current: ProcessGroup | undefined;
  private stopping = false;
  private loop: Promise<void> | undefined;
  private readonly pause = new AbortController();

  constructor(private readonly options: ChaosBesideOptions) {}

  start(): void {
    this.loop ??= this.runAll();
  }

  /** Stops the running chaos (SIGTERM to its group, SIGKILL later) and returns every run's result. */
  async stop(): Promise<readonly ChaosResult[]> {
    this.stopping = true;
    this.pause.abort();
    await this.current?.stop();
    await this.loop;
    return this.results;
  }

  /** For the soak's second Ctrl-C: kill without waiting. */
  signalNow(signal: NodeJS.Signals): void {
    this.stopping = true;
    this.pause.abort();
    this.current?.signalNow(signal);
  }

  get pid(): number | undefined {
    return this.current?.pid;
  }

  // A method rather than the field, so the checks after an await are not narrowed away: stop()
  // sets the field while runAll() waits.
  private isStopping(): boolean {
    return this.stopping;
  }

  private async runAll(): Promise<void> {
    const { quickExitMs = 60_000, restartDelayMs = 30_000 } = this.options;
    for (let seed = this.options.firstSeed; !this.isStopping(); seed++) {
      const { file, args } = this.options.command(seed);
      const logPath = join(this.options.logDir, `chaos-seed-${seed}.log`);
      const group = new ProcessGroup(file, args, {
        cwd: this.options.cwd,
        env: this.options.env,
        logPath,
        killAfterMs: this.options.killAfterMs,
      });
      this.current = group;
      const exit = await group.finished;
      this.current = undefined;
      const result: ChaosResult = {
        seed,
        durationMs: exit.durationMs,
        exit: { code: exit.code, signal: exit.signal },
        stoppedBySoak: exit.stoppedBySoak,
        lastLines: lastMeaningfulLines(readLogTail(logPath, 256 * 1024), 5),
        logPath,
      };
      this.results.push(result);
      this.options.onRunEnd?.(result);
      if (!this.isStopping() && exit.durationMs < quickExitMs) {
        await delay(restartDelayMs, undefined, { signal: this.pause.signal }).catch(() => undefined);
      }
    }
  }
}
