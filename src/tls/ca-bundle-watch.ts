import { Reflector, type ListWatchSource, type ReflectorOptions } from '../cluster/reflector.js';
import { describeError } from '../base/errors.js';
import type { ConditionReporter } from '../telemetry/condition-log.js';
import { clip, LABEL_CHARS } from '../base/user-text.js';
import { driftedWebhooks, type WebhookConfigurationView } from './ca-bundle-drift.js';
import { TlsError } from './tls-errors.js';
import { sleep } from '../base/abort.js';
import { Backoff } from '../base/backoff.js';

/** The watch's settings cannot work. */
export class CaBundleWatchError extends TlsError {}

export type CaBundleWatchLevel = 'info' | 'warn' | 'error';

export interface CaBundleWatchDeps {
  /** metadata.name of the MutatingWebhookConfiguration (WEBHOOK_CONFIG_NAME). */
  configurationName: string;
  /** LIST and WATCH of that one configuration (webhookConfigurationSource). */
  source: ListWatchSource<WebhookConfigurationView>;
  /** The caBundle (PEM) this process serves under; undefined while it serves none yet. */
  wanted: () => string | undefined;
  /**
   * Re-injects the caBundle. In serve this is CertKeeper.ensure(): it reads the certificate store,
   * which every replica shares, and applies the stored bundle's caBundle, so replicas that disagree
   * for a moment (one has rotated, the other not yet) converge on the store instead of fighting.
   */
  heal: () => Promise<unknown>;
  /** heal() calls per drift before giving up until the next change (default 5). */
  attempts?: number;
  /** First pause between failed heal() calls, doubled per failure (default 250 ms). */
  initialBackoffMs?: number;
  /** Longest pause, jitter included, between failed calls and between heals of a fight (default 30 s). */
  maxBackoffMs?: number;
  /**
   * A new drift this soon after a successful heal means another writer keeps resetting the field
   * (a GitOps tool that owns caBundle): each further heal then waits longer, so the two writers do
   * not spin; a quiet period of this length ends it (default 10 s).
   */
  fightWindowMs?: number;
  /** Options of the underlying list-watch (backoff of a failing watch). */
  reflector?: ReflectorOptions;
  /** Where list and watch failures are reported (persistent conditions, with backoff). */
  conditions?: ConditionReporter;
  clock?: () => number;
  random?: () => number;
  /** Waits `ms`; rejects when `signal` aborts. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  log?: (level: CaBundleWatchLevel, message: string) => void;
}

/**
 * Watches one MutatingWebhookConfiguration and puts our caBundle back within moments whenever
 * something else changes it: a GitOps tool that applies the manifests with forced ownership, a
 * `kubectl replace`, a JSON patch, or a delete and re-create. Without it the periodic certificate
 * check (every 10 minutes) was the only repair, and GPU pods passed unmutated meanwhile.
 *
 * One heal runs at a time; changes seen during it are looked at once it ends, against the latest
 * state. A configuration version already healed is not healed again. Failed heals are retried
 * (bounded, with backoff); after the last attempt it waits for the next change or the keeper's own
 * periodic check, which applies the caBundle too.
 */
export class CaBundleWatch {
  private readonly reflector: Reflector<WebhookConfigurationView>;
  private readonly abort = new AbortController();
  private readonly clock: () => number;
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  private readonly log: (level: CaBundleWatchLevel, message: string) => void;
  private readonly attempts: number;
  /** Pauses between failed heal() calls of one drift. */
  private readonly retryPauses: Backoff;
  /** Pauses before each further heal of a fight with another writer. */
  private readonly fightPauses: Backoff;
  private readonly fightWindowMs: number;
  private latest: WebhookConfigurationView | undefined;
  private dirty = false;
  private running: Promise<void> | undefined;
  private healedVersion: string | undefined;
  private lastHealAt: number | undefined;
  private healCount = 0;

  constructor(private readonly deps: CaBundleWatchDeps) {
    this.attempts = deps.attempts ?? 5;
    const initialMs = deps.initialBackoffMs ?? 250;
    const capMs = deps.maxBackoffMs ?? 30_000;
    this.fightWindowMs = deps.fightWindowMs ?? 10_000;
    if (!Number.isInteger(this.attempts) || this.attempts < 1)
      throw new CaBundleWatchError(`attempts must be a whole number of at least 1, got ${this.attempts}`);
    if (!(initialMs > 0) || !(capMs >= initialMs)) {
      throw new CaBundleWatchError(
        `backoff must be positive with maxBackoffMs >= initialBackoffMs, got ${initialMs} and ${capMs}`,
      );
    }
    this.clock = deps.clock ?? Date.now;
    const random = deps.random ?? Math.random;
    // Doubling, jittered by up to 100 % (replicas healing together spread out), never above the cap.
    const spec = { initialMs, factor: 2, capMs, jitter: 1 };
    this.retryPauses = new Backoff(spec, random);
    this.fightPauses = new Backoff(spec, random);
    this.sleep = deps.sleep ?? sleep;
    this.log = deps.log ?? (() => undefined);
    const name = deps.configurationName;
    this.reflector = new Reflector<WebhookConfigurationView>({
      what: `MutatingWebhookConfiguration ${clip(name)}`,
      source: deps.source,
      sink: {
        replace: (items) => {
          this.observe(items.find((item) => item.metadata?.name === name));
        },
        apply: (type, object) => {
          if (object.metadata?.name !== name) return;
          this.observe(type === 'DELETED' ? undefined : object);
        },
      },
      log: (level, message) => {
        this.log(level, message);
      },
      ...(deps.conditions ? { conditions: deps.conditions } : {}),
      ...(deps.reflector ? { options: deps.reflector } : {}),
      ...(deps.sleep ? { sleep: deps.sleep } : {}),
      ...(deps.random ? { random: deps.random } : {}),
      ...(deps.clock ? { clock: deps.clock } : {}),
    });
  }

  /** Successful heals so far (for tests and logs). */
  get heals(): number {
    return this.healCount;
  }

  /** Starts watching in the background; never throws. */
  start(): void {
    this.reflector.start();
  }

  /** Stops the watch and any heal in progress (a heal() call already made is awaited). */
  async stop(): Promise<void> {
    this.abort.abort(new CaBundleWatchError('caBundle watch stopped'));
    await this.reflector.stop();
    await this.running;
  }

  /** Resolves once no heal is running or pending. */
  async settled(): Promise<void> {
    while (this.running !== undefined) await this.running;
  }

  private observe(configuration: WebhookConfigurationView | undefined): void {
    this.latest = configuration;
    this.dirty = true;
    this.running ??= this.drain().finally(() => {
      this.running = undefined;
    });
  }

  private async drain(): Promise<void> {
    while (this.dirty && !this.abort.signal.aborted) {
      this.dirty = false;
      const configuration = this.latest;
      const wanted = this.deps.wanted();
      // Deleted (a re-create comes as a new event), or nothing served yet (start-up applies it).
      if (configuration === undefined || wanted === undefined) continue;
      const version = configuration.metadata?.resourceVersion;
      if (version !== undefined && version === this.healedVersion) continue;
      const drifted = driftedWebhooks(configuration, wanted);
      if (drifted.length === 0) {
        this.noteQuiet();
        continue;
      }
      await this.heal(drifted, version);
    }
  }

  /** A healthy configuration for a whole fight window ends a fight. */
  private noteQuiet(): void {
    if (this.lastHealAt !== undefined && this.clock() - this.lastHealAt >= this.fightWindowMs) this.fightPauses.reset();
  }

  private async heal(drifted: string[], version: string | undefined): Promise<void> {
    const name = clip(this.deps.configurationName);
    const which =
      drifted
        .slice(0, 5)
        .map((webhook) => clip(webhook, LABEL_CHARS))
        .join(', ') + (drifted.length > 5 ? ` and ${drifted.length - 5} more` : '');
    if (this.lastHealAt !== undefined && this.clock() - this.lastHealAt < this.fightWindowMs) {
      const pauseMs = this.fightPauses.next();
      this.log(
        'warn',
        `caBundle of MutatingWebhookConfiguration ${name} was reset again right after the last repair; ` +
          'another writer keeps changing it (does a GitOps tool or manifest own caBundle?); ' +
          `repairing in ${Math.round(pauseMs)} ms`,
      );
      if (!(await this.pause(pauseMs))) return;
    }
    this.log('warn', `caBundle of MutatingWebhookConfiguration ${name} is not ours on ${which}; re-injecting`);
    this.retryPauses.reset();
    for (let attempt = 1; !this.abort.signal.aborted; attempt++) {
      try {
        await this.deps.heal();
      } catch (error) {
        if (attempt >= this.attempts) {
          this.log(
            'error',
            `cannot re-inject the caBundle of MutatingWebhookConfiguration ${name} after ${attempt} attempts: ` +
              `${describeError(error)}; trying again on its next change and at the next certificate check`,
          );
          return;
        }
        if (!(await this.pause(this.retryPauses.next()))) return;
        continue;
      }
      this.healedVersion = version;
      this.lastHealAt = this.clock();
      this.healCount++;
      this.log('info', `caBundle of MutatingWebhookConfiguration ${name} re-injected`);
      return;
    }
  }

  /** false when stopped meanwhile. */
  private async pause(ms: number): Promise<boolean> {
    try {
      await this.sleep(ms, this.abort.signal);
    } catch {
      // Only a stop cuts a pause short.
    }
    return !this.abort.signal.aborted;
  }
}
