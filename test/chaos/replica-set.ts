import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { findFreePorts } from '../../src/local/free-port.js';

const main = resolve(import.meta.dirname, '..', '..', 'src', 'main.ts');

export interface ReplicaPorts {
  webhook: number;
  extender: number;
  metrics: number;
}

/** One vgpu-warden replica: a real `serve` process, talking to the apiserver through its own kubeconfig. */
interface Replica {
  index: number;
  ports: ReplicaPorts;
  kubeconfig: string;
  child: ChildProcess | undefined;
  starts: number;
  /** Set while a kill or stop is under way: that exit is ours, not a crash. */
  expectingExit: boolean;
  /** Crash restarts in a row, for kubelet-like backoff. */
  crashes: number;
}

/**
 * Runs vgpu-warden replicas as real processes (as a Deployment would: shared certificate Secret,
 * leader election on), and kills and restarts them. A replica's ports stay the same across
 * restarts, so the balancers in front keep working.
 */

/** The three listener ports of one replica, distinct from each other. */
async function distinctServePorts(): Promise<{ webhook: number; extender: number; metrics: number }> {
  const [webhook = 0, extender = 0, metrics = 0] = await findFreePorts(3);
  return { webhook, extender, metrics };
}

export class ReplicaSet {
  private readonly replicas: Replica[] = [];
  private readonly log: WriteStream;

  /** `onLine`: each whole line a replica prints (stdout or stderr), with its index. */
  constructor(
    private readonly options: {
      env: Record<string, string>;
      logFile: string;
      onLine?: (index: number, line: string) => void;
    },
  ) {
    this.log = createWriteStream(options.logFile, { flags: 'a' });
  }

  async add(kubeconfig: string): Promise<number> {
    const index = this.replicas.length;
    this.replicas.push({
      index,
      kubeconfig,
      child: undefined,
      starts: 0,
      expectingExit: false,
      crashes: 0,
      ports: await distinctServePorts(),
    });
    return index;
  }

  ports(index: number): ReplicaPorts {
    return this.replica(index).ports;
  }

  get size(): number {
    return this.replicas.length;
  }

  isUp(index: number): boolean {
    const child = this.replica(index).child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  start(index: number): void {
    const replica = this.replica(index);
    if (this.isUp(index)) return;
    replica.starts++;
    const child = spawn(process.execPath, ['--import', 'tsx', main, 'serve'], {
      env: {
        ...process.env,
        ...this.options.env,
        KUBECONFIG: replica.kubeconfig,
        POD_NAME: `replica-${index}`,
        WEBHOOK_HOST: '127.0.0.1',
        WEBHOOK_PORT: String(replica.ports.webhook),
        EXTENDER_PORT: String(replica.ports.extender),
        METRICS_HOST: '127.0.0.1',
        METRICS_PORT: String(replica.ports.metrics),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const tag = `[replica-${index}#${replica.starts}] `;
    // Whole lines: a chunk may end mid-line, and the tag must not land inside one.
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
        if (line === '') return;
        this.log.write(`${tag}${line}\n`);
        try {
          this.options.onLine?.(index, line);
        } catch {
          // A reader of the log must not stop the replica's output.
        }
      });
    }
    replica.child = child;
    replica.expectingExit = false;
    const startedAt = Date.now();
    // A replica that exits on its own is restarted as kubelet restarts a crashed container: after
    // 1 s, doubling up to 10 s for crashes in a row (CrashLoopBackOff, compressed for the run).
    child.once('exit', (code, signal) => {
      if (replica.expectingExit || this.stopping) return;
      replica.crashes = Date.now() - startedAt > 60_000 ? 1 : replica.crashes + 1;
      const pauseMs = Math.min(10_000, 1_000 * 2 ** (replica.crashes - 1));
      this.crashRestarts++;
      this.log.write(
        `[replica-${index}#${replica.starts}] exited on its own (${signal ?? `code ${String(code)}`}); restarting in ${pauseMs} ms\n`,
      );
      setTimeout(() => {
        if (!this.stopping && replica.child === child) this.start(index);
      }, pauseMs);
    });
  }

  /** Restarts after a replica exited on its own (not killed by the fault plan). */
  crashRestarts = 0;
  private stopping = false;

  /** SIGKILL: no shutdown hooks, no lock clean-up, as an OOM kill or a node loss. */
  async kill(index: number): Promise<void> {
    const replica = this.replica(index);
    const child = replica.child;
    if (child === undefined || !this.isUp(index)) return;
    replica.expectingExit = true;
    const exited = new Promise((done) => child.once('exit', done));
    child.kill('SIGKILL');
    await exited;
  }

  async stopAll(): Promise<void> {
    this.stopping = true;
    await Promise.all(
      this.replicas.map(async (replica) => {
        const child = replica.child;
        if (child === undefined || !this.isUp(replica.index)) return;
        const exited = new Promise((done) => child.once('exit', done));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      }),
    );
    // end()'s callback may never come for a stream that already failed; do not wait on it forever.
    await new Promise<void>((done) => {
      this.log.end(done);
      setTimeout(done, 2_000).unref();
    });
  }

  private replica(index: number): Replica {
    const replica = this.replicas[index];
    if (replica === undefined) throw new RangeError(`no replica ${index}`);
    return replica;
  }
}
