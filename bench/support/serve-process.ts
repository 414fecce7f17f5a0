// Runs `vgpu-warden serve` as its own process, as it runs in a cluster, so that a benchmark's load
// generator and device-plugin simulator do not share its event loop (they did, and inflated every
// gap between kube-scheduler's calls). Resolves once /readyz on the metrics port answers 200.
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { sleep } from '../../src/base/abort.js';
import { deployedNodeOptions } from './deployed-node-options.js';
import { InspectorSession, inspectorUrlIn } from './inspector-session.js';

const REPO = resolve(import.meta.dirname, '..', '..');

/**
 * How serve is started: from the TypeScript sources through tsx (default), or, with
 * BENCH_SERVE=dist, from the compiled `dist/bin.js` the image runs (`npm run build` first): tsx's
 * loader and source maps are part of the first one's memory.
 */
function serveCommand(): string[] {
  if (process.env.BENCH_SERVE === 'dist') return [resolve(REPO, 'dist', 'bin.js'), 'serve'];
  return ['--import', 'tsx', resolve(REPO, 'src', 'main.ts'), 'serve'];
}

export interface ServeProcess {
  readonly metricsUrl: string;
  /** With `inspect`: the V8 heap that survives a full GC, in bytes. */
  liveHeapBytes(): Promise<number>;
  /** The child's pid (its /proc/<pid>/status has the resident set sizes a benchmark reports). */
  readonly pid: number;
  /** The Prometheus exposition, for the rows a benchmark reports. */
  metrics(): Promise<string>;
  stop(): Promise<void>;
}

/**
 * serve's Node options: those manifests/deployment.yaml sets, or BENCH_SERVE_NODE_OPTIONS (for serve
 * alone, not the harness; empty for V8's own sizes).
 */
export function serveNodeOptions(): string {
  return process.env.BENCH_SERVE_NODE_OPTIONS ?? deployedNodeOptions();
}

function nodeOptionsEnv(): { NODE_OPTIONS?: string } {
  const options = serveNodeOptions();
  return options === '' ? {} : { NODE_OPTIONS: options };
}

/** `inspect`: start serve with the V8 inspector on a free loopback port, for liveHeapBytes. */
export async function startServeProcess(
  env: Record<string, string>,
  options: { readyTimeoutMs?: number; inspect?: boolean } = {},
): Promise<ServeProcess> {
  const metricsPort = env.METRICS_PORT;
  if (metricsPort === undefined) throw new TypeError('startServeProcess needs METRICS_PORT');
  // BENCH_SERVE_PROFILE=<dir>: a CPU profile of serve, written there when it stops.
  const profile = process.env.BENCH_SERVE_PROFILE;
  const child: ChildProcess = spawn(
    process.execPath,
    [
      ...(profile ? ['--cpu-prof', `--cpu-prof-dir=${profile}`] : []),
      ...(options.inspect === true ? ['--inspect=127.0.0.1:0'] : []),
      ...serveCommand(),
    ],
    {
      env: { ...process.env, LOG_LEVEL: 'warn', METRICS_HOST: '127.0.0.1', ...nodeOptionsEnv(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  // The last lines of its log (stdout) and stderr, for the error when it does not come up.
  let output = '';
  let inspectorUrl: string | undefined;
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', (chunk: Buffer) => {
    keep(chunk);
    inspectorUrl ??= inspectorUrlIn(output);
  });
  const metricsUrl = `http://127.0.0.1:${metricsPort}`;
  let lastReadiness: string;
  const deadline = Date.now() + (options.readyTimeoutMs ?? 120_000);
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`serve exited before it was ready: ${output}`);
    const answer = await fetch(`${metricsUrl}/readyz`).then(
      async (response) => ({ status: response.status, text: await response.text() }),
      (error: unknown) => ({ status: 0, text: String(error) }),
    );
    if (answer.status === 200) break;
    lastReadiness = `${answer.status}: ${answer.text.slice(0, 500)}`;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(
        `serve not ready after ${options.readyTimeoutMs ?? 120_000} ms (readyz ${lastReadiness}): ${output}`,
      );
    }
    await sleep(100);
  }
  return {
    metricsUrl,
    pid: child.pid ?? 0,
    metrics: async () => (await fetch(`${metricsUrl}/metrics`)).text(),
    liveHeapBytes: async () => {
      if (inspectorUrl === undefined)
        throw new Error('serve was not started with inspect, or has not printed its inspector address');
      const session = await InspectorSession.connect(inspectorUrl);
      try {
        return await session.liveHeapBytes();
      } finally {
        session.close();
      }
    },
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((done) => child.once('exit', done));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
