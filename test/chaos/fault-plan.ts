import type { Prng } from './prng.js';

/** Which of a replica's API requests a proxy fault hits. */
export type FaultTarget = 'lock-writes' | 'bindings' | 'pod-writes' | 'reads' | 'any';

export type ProxyFault =
  | { action: 'delay'; ms: number }
  | { action: 'reset' }
  | { action: 'drop-after-commit' }
  | { action: 'fail'; status: 429 | 500 | 503 }
  | { action: 'hang' };

export type FaultEvent =
  | { at: number; kind: 'proxy'; replica: number; target: FaultTarget; fault: ProxyFault; times: number }
  | { at: number; kind: 'watch-expiry'; replica: number }
  | { at: number; kind: 'restart'; component: 'kube-apiserver' | 'etcd'; downMs: number }
  | { at: number; kind: 'kill-replica'; replica: number; downMs: number };

export type FaultKind = FaultEvent['kind'];

export interface FaultPlanOptions {
  /** Faults start after this (the system settles first). */
  startMs: number;
  /** and stop here (the quiesce phase that follows checks that everything recovers). */
  endMs: number;
  replicas: number;
  /** Mean time between faults of each kind. */
  meanIntervalMs: Record<FaultKind, number>;
}

export const DEFAULT_INTERVALS: Record<FaultKind, number> = {
  proxy: 2_500,
  'watch-expiry': 15_000,
  restart: 50_000,
  'kill-replica': 35_000,
};

/**
 * The whole fault schedule, drawn from the seed before the run starts: the same seed gives the
 * same faults at the same offsets, whatever the workload does. Pure.
 */
export function planFaults(random: Prng, options: FaultPlanOptions): FaultEvent[] {
  const events: FaultEvent[] = [];
  for (const kind of Object.keys(options.meanIntervalMs) as FaultKind[]) {
    const generator = random.fork(kind);
    const mean = options.meanIntervalMs[kind];
    // Exponential gaps (a Poisson process) so faults sometimes cluster, as real ones do.
    for (let at = options.startMs + gap(generator, mean); at < options.endMs; at += gap(generator, mean)) {
      events.push(drawFault(generator, kind, Math.round(at), options.replicas));
    }
  }
  return events.sort((a, b) => a.at - b.at || a.kind.localeCompare(b.kind));
}

function gap(random: Prng, mean: number): number {
  return -Math.log(1 - random.next()) * mean;
}

function drawFault(random: Prng, kind: FaultKind, at: number, replicas: number): FaultEvent {
  switch (kind) {
    case 'proxy': {
      const fault = random.weighted<ProxyFault>([
        [{ action: 'delay', ms: random.int(200, 3000) }, 3],
        [{ action: 'reset' }, 2],
        [{ action: 'drop-after-commit' }, 3],
        [{ action: 'fail', status: random.pick([429, 500, 503] as const) }, 3],
        [{ action: 'hang' }, 1],
      ]);
      const target = random.weighted<FaultTarget>([
        ['lock-writes', 3],
        ['bindings', 3],
        ['pod-writes', 2],
        ['reads', 1],
        ['any', 1],
      ]);
      return { at, kind, replica: random.int(0, replicas - 1), target, fault, times: random.int(1, 3) };
    }
    case 'watch-expiry':
      return { at, kind, replica: random.int(0, replicas - 1) };
    case 'restart':
      return {
        at,
        kind,
        component: random.weighted([
          ['kube-apiserver', 2],
          ['etcd', 1],
        ] as const),
        downMs: random.int(300, 3000),
      };
    case 'kill-replica':
      return { at, kind, replica: random.int(0, replicas - 1), downMs: random.int(500, 6000) };
  }
}

/** "12.3s proxy r1 bindings drop-after-commit x2" for time lines and the summary. */
export function describeFault(event: FaultEvent): string {
  const at = `${(event.at / 1000).toFixed(1)}s`;
  switch (event.kind) {
    case 'proxy': {
      const { fault } = event;
      const what =
        fault.action === 'delay'
          ? `delay ${fault.ms}ms`
          : fault.action === 'fail'
            ? `fail ${fault.status}`
            : fault.action;
      return `${at} proxy r${event.replica} ${event.target} ${what} x${event.times}`;
    }
    case 'watch-expiry':
      return `${at} watch-expiry r${event.replica}`;
    case 'restart':
      return `${at} restart ${event.component} (down ${event.downMs}ms)`;
    case 'kill-replica':
      return `${at} SIGKILL r${event.replica} (down ${event.downMs}ms)`;
  }
}
