import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ControlPlane, SchedulerConfiguration, SchedulerHandle } from '../../src/local/control-plane.js';

/** Why kube-scheduler exited on its own: its exit and the last error line it logged. */
export interface SchedulerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  lastError: string;
  /** Its whole log, kept in the run folder (the control plane's own folder goes with it). */
  log: string;
}

/**
 * kube-scheduler as its Deployment runs it: restarted when it exits on its own. kube-scheduler
 * exits by design on some states it cannot reconcile; 1.37 does so when a relist of its pod
 * informer turns a pod deleted and recreated under the same name, while the watch was down, into
 * an update of the old pod (cache.go: "Pod updated on a different node than previously added to",
 * then FlushAndExit; 1.34 filtered that into a delete). In a cluster the kubelet restarts it; a
 * chaos run without a restart would report every later pod as not bound. Each exit is kept (with
 * its log) for the summary, so a new cause shows instead of being hidden.
 */
export class SchedulerSupervisor {
  readonly exits: SchedulerExit[] = [];
  private current: SchedulerHandle | undefined;
  private stopping = false;
  private watching: Promise<void> = Promise.resolve();

  private constructor(
    private readonly plane: ControlPlane,
    private readonly config: SchedulerConfiguration,
    private readonly logDir: string,
    private readonly log: (line: string) => void,
    private readonly restartDelayMs: number,
  ) {}

  static async start(
    plane: ControlPlane,
    config: SchedulerConfiguration,
    options: { logDir: string; log: (line: string) => void; restartDelayMs?: number },
  ): Promise<SchedulerSupervisor> {
    const supervisor = new SchedulerSupervisor(
      plane,
      config,
      options.logDir,
      options.log,
      options.restartDelayMs ?? 1000,
    );
    await supervisor.run();
    return supervisor;
  }

  /** The running kube-scheduler (the newest one after a restart). */
  get handle(): SchedulerHandle | undefined {
    return this.current;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.current?.stop();
    await this.watching;
    // A restart that was starting when stop() came has finished by now: stop what it started.
    await this.current?.stop();
  }

  private stopRequested(): boolean {
    return this.stopping;
  }

  private async run(): Promise<void> {
    const handle = await this.plane.startScheduler(this.config);
    this.current = handle;
    this.watching = handle.process.exited
      .then(async (exit) => {
        if (this.stopping) return;
        const log = join(this.logDir, `kube-scheduler-exit-${this.exits.length + 1}.log`);
        copyFileSync(handle.process.logFile, log);
        const lastError =
          handle.process
            .lastLogLines(200)
            .split('\n')
            .filter((line) => /^[EF]\d{4} /.test(line))
            .at(-1)
            ?.slice(0, 400) ?? '(no error logged)';
        this.exits.push({ code: exit.code, signal: exit.signal, lastError, log });
        this.log(
          `kube-scheduler exited (code ${String(exit.code)}, signal ${String(exit.signal)}); restarting it as its Deployment would. Its last error: ${lastError} (log: ${log})`,
        );
        await handle.stop();
        await new Promise((done) => setTimeout(done, this.restartDelayMs));
        // stop() may have come during the delay (the flag is read again, not narrowed).
        if (!this.stopRequested()) await this.run();
      })
      .catch((error: unknown) => {
        this.log(`kube-scheduler could not be restarted: ${(error as Error).message}`);
      });
  }
}
