/**
 * How a real node starts host programs: a port its caller implements (the project's process runner,
 * which the control plane's processes run under too), so that this package shares no code with the
 * product it stands beside.
 */

/** A program started under a guard: `pid` is the guard's, the program is its child (descendant depth 1). */
export interface HostProcess {
  readonly name: string;
  readonly pid: number;
  readonly hasExited: boolean;
  /** Settles when the guard has exited. */
  readonly exited: Promise<unknown>;
  /** SIGKILL to the whole process group, now. */
  killNow(): void;
  /** The end of the program's log, for errors. */
  lastLogLines(): string;
  /**
   * Until `url` answers 200 within `timeoutMs`; rejects when the program exits first, with an error
   * that ProcessHost.portTaken() recognises when its log shows `portFailureLog` (its port was taken).
   */
  untilReady(probe: { url: string; timeoutMs: number; portFailureLog: string }): Promise<void>;
}

export interface HostProcessOptions {
  /** Short name used in errors, e.g. "kubelet of gpu-node-1". */
  name: string;
  command: string;
  args: readonly string[];
  /** stdout and stderr of the program go here. */
  logFile: string;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

export interface ProcessHost {
  start(options: HostProcessOptions): HostProcess;
  /** `count` loopback ports free at the time of asking. */
  freePorts(count: number): Promise<number[]>;
  /** Runs `start` again (with the attempt number, 1 first) while it fails only because a port was taken. */
  retryWhilePortTaken<T>(start: (attempt: number) => Promise<T>, progress: (line: string) => void): Promise<T>;
  /** Whether `error` says a program's port was taken before it bound it. */
  portTaken(error: unknown): boolean;
}

/** What a node registers to be stopped on SIGINT/SIGTERM and killed on process exit. */
export interface ShutdownRegistry {
  register(resource: { name: string; stop: () => Promise<void>; killSync: () => void }): () => void;
}
