import { request as httpsRequest } from 'node:https';
import { request as httpRequest } from 'node:http';
import { WardenError } from '../base/errors.js';
import type { ManagedProcess } from './managed-process.js';
import { sleep } from '../base/abort.js';

export class ReadinessError extends WardenError {}

/**
 * The process exited because its port was taken between the moment we asked the kernel for a free
 * one and the moment it bound it (another process got it first). The caller can pick fresh ports
 * and start again; any other exit is a real failure.
 */
export class PortTakenError extends ReadinessError {}

/**
 * How often a component is started on fresh ports after another process took its port between
 * our picking a free one and the component binding it. Each try picks anew, so two losses in a
 * row already need two unrelated races.
 */
const PORT_ATTEMPTS = 3;

function portWasTaken(error: unknown): boolean {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth++) {
    if (current instanceof PortTakenError) return true;
  }
  return false;
}

/**
 * Runs `start` again while it fails only because a port was taken; `attempt` (1 first) lets a
 * start keep its ports on the first try and pick fresh ones after. Each start cleans up after
 * itself when it fails.
 */
export async function retryWhilePortTaken<T>(
  start: (attempt: number) => Promise<T>,
  progress: (line: string) => void,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start(attempt);
    } catch (error) {
      if (attempt >= PORT_ATTEMPTS || !portWasTaken(error)) throw error;
      progress(
        'a port was taken before the component bound it; ' +
          `starting again on fresh ports (try ${attempt + 1} of ${PORT_ATTEMPTS})`,
      );
    }
  }
}

// What Go's net package (every Kubernetes component, etcd) logs for EADDRINUSE.
const PORT_TAKEN_LOG = 'bind: address already in use';

export interface ReadinessProbe {
  url: string;
  /** CA PEM to verify the server with; without it, TLS verification is skipped (self-signed health ports). */
  caPem?: string;
  timeoutMs: number;
  /** Body that must appear in the 200 answer, e.g. `"health":"true"` for etcd. */
  expectBody?: string;
  /**
   * For a process that keeps running when it cannot bind the probed port: the log line it writes
   * then (kubelet logs `Failed to start healthz server ... bind: address already in use` every 5 s and
   * would never answer). Seen with Go's EADDRINUSE text, it ends the wait with PortTakenError; the
   * caller stops the process and starts it again on fresh ports.
   */
  portFailureLog?: string;
}

function portTakenWhileRunning(process: ManagedProcess, probe: ReadinessProbe): boolean {
  const failure = probe.portFailureLog;
  if (failure === undefined) return false;
  return process
    .lastLogLines()
    .split('\n')
    .some((line) => line.includes(failure) && line.includes(PORT_TAKEN_LOG));
}

function probeOnce(probe: ReadinessProbe): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL(probe.url);
    const options =
      url.protocol === 'https:'
        ? { ca: probe.caPem, rejectUnauthorized: probe.caPem !== undefined, timeout: 2000 }
        : { timeout: 2000 };
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(url, { ...options, method: 'GET' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, body });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => {
      req.destroy(new Error('probe timed out'));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * Polls a health endpoint until it answers 200, failing fast (with the process's last log lines)
 * when the process exits first, and with the last probe result when time runs out.
 */
export async function waitUntilReady(process: ManagedProcess, probe: ReadinessProbe): Promise<void> {
  const deadline = Date.now() + probe.timeoutMs;
  let last = 'no answer yet';
  while (Date.now() < deadline) {
    if (process.hasExited) {
      const exit = process.exitInfo;
      const lastLines = process.lastLogLines();
      const Failure = lastLines.includes(PORT_TAKEN_LOG) ? PortTakenError : ReadinessError;
      throw new Failure(
        `${process.name} exited (code ${String(exit?.code)}, signal ${String(exit?.signal)}) ` +
          `before ${probe.url} was ready; last log lines (${process.logFile}):\n${lastLines}`,
      );
    }
    try {
      const answer = await probeOnce(probe);
      if (answer.status === 200 && (probe.expectBody === undefined || answer.body.includes(probe.expectBody))) return;
      last = `HTTP ${answer.status}: ${answer.body.slice(0, 200)}`;
    } catch (error) {
      last = (error as Error).message;
    }
    if (portTakenWhileRunning(process, probe)) {
      throw new PortTakenError(
        `${process.name} runs but could not bind ${probe.url} (last: ${last}); ` +
          `last log lines (${process.logFile}):\n${process.lastLogLines()}`,
      );
    }
    await sleep(200);
  }
  throw new ReadinessError(
    `${process.name} not ready at ${probe.url} after ${probe.timeoutMs} ms (last: ${last}); ` +
      `last log lines (${process.logFile}):\n${process.lastLogLines()}`,
  );
}
