/**
 * Stops registered resources when the process ends: on SIGINT/SIGTERM it runs their async stop
 * (newest first, one at a time, all within one bound), then exits with the conventional code; on
 * 'exit' (any other way out, including an uncaught error) it runs their synchronous kill. Listeners
 * exist only while something is registered.
 */
export interface ShutdownTarget {
  on(event: 'exit', listener: () => void): unknown;
  on(event: 'SIGINT' | 'SIGTERM', listener: (signal: NodeJS.Signals) => void): unknown;
  off(event: 'exit', listener: () => void): unknown;
  off(event: 'SIGINT' | 'SIGTERM', listener: (signal: NodeJS.Signals) => void): unknown;
  exit(code: number): never;
}

export interface ShutdownResource {
  name: string;
  stop: () => Promise<void>;
  killSync: () => void;
}

const SIGNAL_EXIT_CODES: Record<'SIGINT' | 'SIGTERM', number> = { SIGINT: 130, SIGTERM: 143 };

export class ShutdownHooks {
  private readonly resources = new Set<ShutdownResource>();
  private stopping = false;

  constructor(
    private readonly target: ShutdownTarget,
    private readonly stopTimeoutMs = 20_000,
    private readonly report: (line: string) => void = () => undefined,
  ) {}

  register(resource: ShutdownResource): () => void {
    if (this.resources.size === 0) this.attach();
    this.resources.add(resource);
    return () => {
      this.resources.delete(resource);
      if (this.resources.size === 0) this.detach();
    };
  }

  /**
   * Stops every registered resource now, newest first, one at a time, within the same bound as on
   * a signal, and forgets them; the process goes on. For a start that failed half-way: what came
   * up stops instead of keeping the process (and its children) alive.
   */
  async stopAll(): Promise<void> {
    const order = [...this.resources].reverse();
    this.resources.clear();
    this.detach();
    await this.stopEach(order);
  }

  /**
   * Newest first, one after another: what was started on top of something (vgpu-warden on the
   * control plane, nodes on kube-apiserver) stops while what it talks to is still up, so it does
   * not log "apiserver unreachable" and failed Event writes on its way out. A stop that fails does
   * not keep the others from stopping; all of them together get `stopTimeoutMs`.
   */
  private async stopEach(order: readonly ShutdownResource[]): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.stopTimeoutMs).unref();
    });
    const stopped = (async () => {
      for (const resource of order) await resource.stop().catch(() => undefined);
    })();
    await Promise.race([stopped, timeout]);
    clearTimeout(timer);
  }

  private readonly onExit = (): void => {
    for (const resource of this.resources) {
      try {
        resource.killSync();
      } catch {
        // Best effort: the process is exiting and cannot report anything any more.
      }
    }
  };

  private readonly onSignal = (signal: NodeJS.Signals): void => {
    const code = signal === 'SIGTERM' ? SIGNAL_EXIT_CODES.SIGTERM : SIGNAL_EXIT_CODES.SIGINT;
    if (this.stopping) {
      // A second Ctrl-C means "now": the exit listener kills what is left.
      this.target.exit(code);
    }
    this.stopping = true;
    const order = [...this.resources].reverse();
    this.report(`received ${signal}; stopping ${order.map((r) => r.name).join(', ')}`);
    void this.stopEach(order).finally(() => this.target.exit(code));
  };

  private attach(): void {
    this.target.on('exit', this.onExit);
    this.target.on('SIGINT', this.onSignal);
    this.target.on('SIGTERM', this.onSignal);
  }

  private detach(): void {
    this.target.off('exit', this.onExit);
    this.target.off('SIGINT', this.onSignal);
    this.target.off('SIGTERM', this.onSignal);
  }
}
