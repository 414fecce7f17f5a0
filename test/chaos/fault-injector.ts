import type { ControlPlane } from '../../src/local/control-plane.js';
import type { FaultProxy, RequestMatch } from '../support/fault-proxy.js';
import { describeFault, type FaultEvent, type FaultKind, type FaultTarget } from './fault-plan.js';
import type { ReplicaSet } from './replica-set.js';
import type { Timeline } from './timeline.js';

/** The requests of one replica that a proxy fault hits; watches are only ever expired, never hung. */
function matchOf(target: FaultTarget): RequestMatch {
  switch (target) {
    case 'lock-writes':
      return { method: 'PATCH', path: /^\/api\/v1\/nodes\/[^/]+$/, watch: false };
    case 'bindings':
      return { method: 'POST', path: /^\/api\/v1\/namespaces\/[^/]+\/pods\/[^/]+\/binding$/, watch: false };
    case 'pod-writes':
      return { method: ['PATCH', 'PUT'], path: /^\/api\/v1\/namespaces\/[^/]+\/pods\/[^/]+$/, watch: false };
    case 'reads':
      return { method: 'GET', watch: false };
    case 'any':
      return { watch: false };
  }
}

/** Outages during which nothing could release a lock (apiserver or etcd down, no replica up). */
export class OutageLog {
  private readonly spans: { from: number; to: number | undefined }[] = [];

  begin(): { end: () => void } {
    const span: { from: number; to: number | undefined } = { from: Date.now(), to: undefined };
    this.spans.push(span);
    return {
      end: () => {
        span.to = Date.now();
      },
    };
  }

  /** Milliseconds of outage within [from, to]. */
  within(from: number, to: number): number {
    let total = 0;
    for (const span of this.spans) total += Math.max(0, Math.min(to, span.to ?? to) - Math.max(from, span.from));
    return total;
  }
}

/**
 * Carries out the seeded fault plan: proxy rules on a replica's apiserver connection, watch expiry,
 * crashes of kube-apiserver or etcd, SIGKILL and restart of a replica.
 */
export class FaultInjector {
  readonly applied: Record<FaultKind, number> = { proxy: 0, 'watch-expiry': 0, restart: 0, 'kill-replica': 0 };
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly pending = new Set<Promise<unknown>>();
  private stopped = false;

  constructor(
    private readonly deps: {
      plane: ControlPlane;
      proxies: FaultProxy[];
      replicas: ReplicaSet;
      timeline: Timeline;
      outages: OutageLog;
      started: number;
    },
  ) {}

  schedule(plan: readonly FaultEvent[]): void {
    for (const event of plan) {
      const delay = Math.max(0, this.deps.started + event.at - Date.now());
      this.timers.push(
        setTimeout(() => {
          this.track(this.apply(event));
        }, delay),
      );
    }
  }

  /** Cancels what has not happened yet, clears proxy rules and waits for restarts under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    for (const proxy of this.deps.proxies) proxy.clearRules();
    await Promise.allSettled([...this.pending]);
  }

  private track(work: Promise<unknown>): void {
    const tracked = work.catch((error: unknown) => {
      this.deps.timeline.add(['faults'], `fault failed: ${(error as Error).message}`);
    });
    this.pending.add(tracked);
    void tracked.finally(() => this.pending.delete(tracked));
  }

  private async apply(event: FaultEvent): Promise<void> {
    if (this.stopped) return;
    this.applied[event.kind]++;
    this.deps.timeline.add(['faults'], describeFault(event));
    switch (event.kind) {
      case 'proxy': {
        const proxy = this.deps.proxies[event.replica];
        const { fault } = event;
        const action =
          fault.action === 'fail'
            ? {
                kind: 'fail' as const,
                status: fault.status,
                ...(fault.status === 429 ? { headers: { 'Retry-After': '1' } } : {}),
              }
            : fault.action === 'delay'
              ? { kind: 'delay' as const, ms: fault.ms }
              : { kind: fault.action };
        proxy?.addRule({ match: matchOf(event.target), action, times: event.times });
        return;
      }
      case 'watch-expiry': {
        const proxy = this.deps.proxies[event.replica];
        proxy?.addRule({ match: { watch: true }, action: { kind: 'expire-watch' }, times: 2 });
        proxy?.breakWatches();
        return;
      }
      case 'restart': {
        const outage = this.deps.outages.begin();
        try {
          await this.deps.plane.restart(event.component, { downMs: event.downMs });
        } finally {
          outage.end();
          this.deps.timeline.add(['faults'], `${event.component} back`);
        }
        return;
      }
      case 'kill-replica': {
        const { replicas } = this.deps;
        await replicas.kill(event.replica);
        const othersUp = Array.from({ length: replicas.size }, (_, index) => index).some((index) =>
          replicas.isUp(index),
        );
        const outage = othersUp ? undefined : this.deps.outages.begin();
        await new Promise((done) => setTimeout(done, event.downMs));
        replicas.start(event.replica);
        outage?.end();
        this.deps.timeline.add(['faults'], `replica r${event.replica} restarted`);
        return;
      }
    }
  }
}
