import { clip } from '../base/user-text.js';

export type Phase = 'starting' | 'serving' | 'stopping';

export interface ReadinessState {
  ready: boolean;
  /** Why not, one entry per problem, each naming its part ("cluster cache: pods not listed yet"). */
  reasons: string[];
}

/** Longest reason kept: /readyz is read by probes and people, not meant to carry whole error dumps. */
const REASON_CHARS = 300;

/**
 * One readiness for the whole process, answered alike by every listener's /readyz: ready only
 * while serving (not starting, not stopping) and while no part reports a problem (a listener not
 * answering, no certificate, the cluster cache not synced or stale, leader election unable to
 * work). A replica the Deployment routes to must be able to do all of its jobs.
 */
export class Readiness {
  private phase: Phase = 'starting';
  private readonly parts: { name: string; check: () => readonly string[] }[] = [];

  /** Adds a part; `check` returns its problems now (empty when fine) and must be cheap. */
  add(name: string, check: () => readonly string[]): void {
    this.parts.push({ name, check });
  }

  set(phase: Phase): void {
    this.phase = phase;
  }

  get current(): Phase {
    return this.phase;
  }

  state(): ReadinessState {
    const reasons: string[] = [];
    if (this.phase === 'starting') reasons.push('starting up');
    if (this.phase === 'stopping') reasons.push('shutting down');
    for (const { name, check } of this.parts) {
      let problems: readonly string[];
      try {
        problems = check();
      } catch (error) {
        problems = [`check failed: ${error instanceof Error ? error.message : String(error)}`];
      }
      for (const problem of problems) reasons.push(clip(`${name}: ${problem.replace(/\s+/g, ' ')}`, REASON_CHARS));
    }
    return { ready: reasons.length === 0, reasons };
  }
}
