import { describeError } from '../base/errors.js';
import { renderLiveView, type LiveNode, type LivePendingPod, type LiveViewState } from './live-view.js';
import type { LiveEvent } from './live-events.js';
import type { AlternateScreen } from './terminal-screen.js';

/**
 * Why the live view is not shown, or undefined when it is: a pipe or a file cannot be redrawn in
 * place, a dumb terminal has no cursor addressing, and --no-view asks for plain lines.
 */
export function liveViewOffReason(input: {
  noViewFlag: boolean;
  stdoutIsTTY: boolean;
  term: string | undefined;
}): string | undefined {
  if (input.noViewFlag) return '--no-view was given';
  if (!input.stdoutIsTTY) return 'stdout is not a terminal (it is piped or redirected)';
  if (input.term === 'dumb') return 'TERM=dumb (the terminal cannot redraw in place)';
  return undefined;
}

/** Where each frame's data comes from; all in-memory reads (state stores, the event digest). */
export interface LiveViewSources {
  nodes(now: Date): LiveNode[];
  pending(): LivePendingPod[];
  events(): readonly LiveEvent[];
}

export interface LiveViewDeps {
  screen: AlternateScreen;
  sources: LiveViewSources;
  kubeconfigExport: string;
  intervalMs?: number;
  clock?: () => Date;
  timers?: { setInterval: (run: () => void, ms: number) => unknown; clearInterval: (handle: unknown) => void };
}

/** Notes shown under the header; up to KEPT_NOTES lines taken are printed again after the view ends. */
const SHOWN_NOTES = 3;
const KEPT_NOTES = 200;

/**
 * The running live view: enters the alternate screen, redraws on a timer and on resize, and leaves
 * it on stop. Lines that would have gone to stdout meanwhile are taken as notes (the latest shown
 * under the header) and handed back by stop(), so the caller can print them on the normal screen.
 */
export class LiveView {
  private timer: unknown;
  private demo: string | undefined;
  /** Shown under the header: what would have been printed, except the demo's lines (its own row). */
  private readonly notes: string[] = [];
  /** Every line taken while active, in order, to print again on the normal screen after stop(). */
  private readonly taken: string[] = [];
  private readonly clock: () => Date;
  private readonly timers: NonNullable<LiveViewDeps['timers']>;

  constructor(private readonly deps: LiveViewDeps) {
    this.clock = deps.clock ?? (() => new Date());
    this.timers = deps.timers ?? {
      setInterval: (run, ms) => setInterval(run, ms),
      clearInterval: (handle) => {
        clearInterval(handle as NodeJS.Timeout);
      },
    };
  }

  get isActive(): boolean {
    return this.deps.screen.isActive;
  }

  start(): void {
    if (this.isActive) return;
    this.deps.screen.enter(() => {
      this.redraw();
    });
    this.timer = this.timers.setInterval(() => {
      this.redraw();
    }, this.deps.intervalMs ?? 1000);
    this.redraw();
  }

  /** The latest line of the demo, kept in the header; `printed` (default: the line) is printed again after stop(). */
  setDemo(line: string, printed = line): void {
    this.demo = line;
    this.take(printed);
    this.redraw();
  }

  note(line: string): void {
    this.notes.push(line);
    if (this.notes.length > SHOWN_NOTES) this.notes.shift();
    this.take(line);
    this.redraw();
  }

  private take(line: string): void {
    if (!this.isActive) return;
    this.taken.push(line);
    if (this.taken.length > KEPT_NOTES) this.taken.shift();
  }

  state(): LiveViewState {
    const now = this.clock();
    return {
      now,
      kubeconfigExport: this.deps.kubeconfigExport,
      demo: this.demo,
      notes: [...this.notes],
      nodes: this.deps.sources.nodes(now),
      pending: this.deps.sources.pending(),
      events: this.deps.sources.events(),
    };
  }

  redraw(): void {
    if (!this.isActive) return;
    try {
      this.deps.screen.draw(renderLiveView(this.state(), this.deps.screen.size()));
    } catch (error) {
      // A frame that cannot be drawn must not end the run (a timer would throw it uncaught); the
      // next frame shows why.
      this.notes.push(`live view: could not draw a frame: ${describeError(error)}`);
      if (this.notes.length > SHOWN_NOTES) this.notes.shift();
    }
  }

  /** Leaves the alternate screen (idempotent, synchronous); returns the lines taken meanwhile. */
  stop(): string[] {
    if (this.timer !== undefined) this.timers.clearInterval(this.timer);
    this.timer = undefined;
    this.deps.screen.leave();
    return this.taken.splice(0);
  }
}
