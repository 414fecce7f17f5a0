import { X509Certificate } from 'node:crypto';
import { describeError } from '../base/errors.js';
import { caBundleOf, sameMaterial, servingMaterialOf, type CertBundle, type ServingMaterial } from './cert-bundle.js';
import { assessBundle, assessPreviousCa, canStayTrusted, type Assessment } from './cert-policy.js';
import type { CertStore, StoredBundle } from './cert-store.js';
import { createCertificateAuthority, issueCertificate } from './certificates.js';
import { CertKeeperError, CertStoreConflictError } from './tls-errors.js';
import { sleep } from '../base/abort.js';
import { type Clock, systemClock } from '../base/clock.js';

/** Where the caBundle goes (CaBundlePatcher in a cluster). Must be idempotent: it is applied on every ensure(). */
export interface CaBundleTarget {
  apply(caBundlePem: string): Promise<unknown>;
}

export interface CertKeeperDeps {
  store: CertStore;
  /** SANs of the serving certificate, from servingNames(). */
  names: readonly string[];
  validityDays: number;
  caValidityDays: number;
  /** Renew the leaf (and the CA) once less than this is left. Must be shorter than both validities. */
  renewBeforeMs: number;
  /** Subject CN of the leaf; default the first name. Clients ignore it (SANs decide). */
  commonName?: string;
  /** Subject CN prefix of the CA; each CA gets its time of issue appended so two CAs are told apart. */
  caCommonName?: string;
  clock?: Clock;
  caBundleTarget?: CaBundleTarget;
  /** How long the apiserver may take to pick up a new caBundle; the new leaf is served only after it. */
  propagationDelayMs?: number;
  /**
   * How long after a CA rotation the previous CA stays in the caBundle. Default: twice the start()
   * interval (one interval for every replica to load the new leaf, one for slack), or
   * DEFAULT_PREVIOUS_CA_RETENTION_MS when start() was not called.
   */
  previousCaRetentionMs?: number;
  sleep?: (ms: number) => Promise<void>;
  /** Gets the new material to serve; called only after the caBundle that trusts it was applied. */
  onChange?: (material: ServingMaterial) => void;
  /**
   * Runs at the end of every ensure() with the stored bundle, CA key included, after the material
   * was handed out: e.g. to keep kube-scheduler's client certificate issued by the current CA. A
   * throw fails that ensure() (at start: the server does not start; later: retried next tick).
   */
  onSettled?: (bundle: CertBundle) => Promise<unknown>;
  log?: (line: string) => void;
  /** Load-decide-save rounds per ensure() before giving up when the store keeps changing under us. */
  attempts?: number;
}

export type RotationKind = 'leaf' | 'all';

export const DEFAULT_PROPAGATION_DELAY_MS = 2000;
export const DEFAULT_PREVIOUS_CA_RETENTION_MS = 10 * 60_000;
const DAY_MS = 86_400_000;

// node-forge encodes subject attributes as ASN.1 PrintableString, and Go (the apiserver) refuses a
// caBundle whose certificate has any other character in one ("invalid PrintableString"), e.g. "@".
const PRINTABLE_STRING = /^[A-Za-z0-9 '()+,\-./:=?]+$/;

interface Plan {
  /** The bundle to save, or undefined to keep what is stored. */
  next: CertBundle | undefined;
  summary: string;
}

type Decision = Assessment | { action: 'renew-leaf' | 'renew-all'; reason: 'forced'; detail: string };

interface Served {
  material: ServingMaterial;
  caCertPem: string;
}

function outcomeOf(result: unknown): string | undefined {
  const outcome = (result as { outcome?: unknown } | null)?.outcome;
  return typeof outcome === 'string' ? outcome : undefined;
}

/**
 * Keeps the webhook's CA and serving certificate valid: loads the bundle from the store, lets
 * cert-policy.ts judge it, renews what is needed (the leaf alone under the same CA, or a new CA
 * with the old one kept as "previous" while it can still vouch for served leaves), saves with the
 * store's optimistic concurrency, applies the caBundle, and only then hands out the new material.
 *
 * Order for a CA change, so that no admission call fails: (1) save [new CA, leaf, previous=old CA];
 * (2) apply caBundle = new + old; (3) wait propagationDelayMs, because the apiserver reloads
 * webhook configurations asynchronously; (4) onChange with the new leaf. Old and new leaves are
 * both trusted from (2) on, so replicas may switch at any time after it. The previous CA is dropped
 * by a later ensure() once previousCaRetentionMs has passed since the rotation (or it expired).
 *
 * Every replica applies the caBundle itself before switching, and re-reads the store after applying:
 * if another replica saved a different bundle meanwhile (so what we applied may lack its CA), it
 * goes round again, so the webhook configuration ends up with the stored bundle's CAs.
 */
export class CertKeeper {
  private readonly clock: Clock;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly log: (line: string) => void;
  private readonly propagationDelayMs: number;
  private readonly attempts: number;
  private served: Served | undefined;
  private tail: Promise<unknown> = Promise.resolve();
  private intervalMs: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private generation = 0;

  constructor(private readonly deps: CertKeeperDeps) {
    this.clock = deps.clock ?? systemClock;
    this.sleep = deps.sleep ?? sleep;
    this.log = deps.log ?? (() => undefined);
    this.propagationDelayMs = deps.propagationDelayMs ?? DEFAULT_PROPAGATION_DELAY_MS;
    this.attempts = deps.attempts ?? 5;
    if (deps.names.length === 0) throw new CertKeeperError('the serving certificate needs at least one name');
    for (const [what, value] of [
      ['commonName', deps.commonName],
      ['caCommonName', deps.caCommonName],
    ] as const) {
      if (value !== undefined && !PRINTABLE_STRING.test(value)) {
        throw new CertKeeperError(
          `${what} ${JSON.stringify(value)} must use only letters, digits, spaces and '()+,-./:=?`,
        );
      }
    }
    if (!(deps.validityDays > 0) || !(deps.caValidityDays > 0))
      throw new CertKeeperError('certificate validities must be positive');
    // A renewal window as long as a validity would renew every fresh certificate at once, forever.
    if (!(deps.renewBeforeMs >= 0) || deps.renewBeforeMs >= Math.min(deps.validityDays, deps.caValidityDays) * DAY_MS) {
      throw new CertKeeperError(
        `renewBeforeMs (${deps.renewBeforeMs}) must be shorter than the serving (${deps.validityDays} d) and CA ` +
          `(${deps.caValidityDays} d) validities`,
      );
    }
  }

  /** The material handed out last (what the server should be serving), if any. */
  current(): ServingMaterial | undefined {
    return this.served?.material;
  }

  /** Loads, judges, renews and publishes as needed; returns the material to serve. */
  ensure(): Promise<ServingMaterial> {
    return this.serialize(() => this.settle(undefined));
  }

  /** Renews now regardless of validity: the leaf under the same CA, or everything (a CA rotation). */
  rotateNow(kind: RotationKind): Promise<ServingMaterial> {
    return this.serialize(() => this.settle(kind));
  }

  /**
   * Runs ensure() every intervalMs (the first run one interval from now: call ensure() yourself
   * before serving). Failures are logged and retried at the next tick; the timer does not keep the
   * process alive.
   */
  start(intervalMs: number): void {
    if (!(intervalMs > 0)) throw new CertKeeperError(`interval must be positive, got ${intervalMs}`);
    this.clearTimer();
    this.intervalMs = intervalMs;
    // A start() or stop() after this one bumps the generation, so this loop stops rescheduling.
    const generation = ++this.generation;
    const schedule = (): void => {
      this.timer = setTimeout(tick, intervalMs);
      this.timer.unref();
    };
    const tick = (): void => {
      this.timer = undefined;
      this.running = this.ensure()
        .catch((error: unknown) => {
          this.log(`certificates: check failed, retrying in ${intervalMs} ms: ${describeError(error)}`);
        })
        .finally(() => {
          this.running = undefined;
          if (generation === this.generation) schedule();
        });
    };
    schedule();
  }

  /** Stops the periodic checks and waits for one in progress. */
  async stop(): Promise<void> {
    this.generation++;
    this.clearTimer();
    this.intervalMs = undefined;
    await this.running;
  }

  private clearTimer(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private serialize<T>(work: () => Promise<T>): Promise<T> {
    const run = this.tail.then(work, work);
    this.tail = run.catch(() => undefined);
    return run;
  }

  private retentionMs(): number {
    return (
      this.deps.previousCaRetentionMs ??
      (this.intervalMs !== undefined ? 2 * this.intervalMs : DEFAULT_PREVIOUS_CA_RETENTION_MS)
    );
  }

  private async settle(force: RotationKind | undefined): Promise<ServingMaterial> {
    const { store } = this.deps;
    let pendingForce = force;
    let forcedFrom: { bundle: CertBundle | undefined } | undefined;
    let lastConflict: unknown;
    for (let attempt = 1; attempt <= this.attempts; attempt++) {
      const loaded = await store.load();
      if (pendingForce !== undefined) {
        // A forced rotation that lost a race to someone else's rotation is done: rotating again on
        // top would push the CA that replicas are still serving out of the caBundle.
        if (forcedFrom === undefined) forcedFrom = { bundle: loaded?.bundle };
        else if (rotatedSince(forcedFrom.bundle, loaded?.bundle, pendingForce)) pendingForce = undefined;
      }
      const plan = this.plan(loaded?.bundle, new Date(this.clock()), pendingForce);
      let current: StoredBundle | undefined = loaded;
      if (plan.next !== undefined) {
        try {
          current = await store.save(plan.next, loaded);
        } catch (error) {
          if (!(error instanceof CertStoreConflictError)) throw error;
          lastConflict = error;
          this.log(`certificates: ${store.description} changed while renewing; reading it again`);
          continue;
        }
        pendingForce = undefined;
        this.log(`certificates: ${plan.summary} (${store.description})`);
      }
      if (current === undefined)
        throw new CertKeeperError(`unreachable: nothing stored in ${store.description} and nothing planned`);
      const material = servingMaterialOf(current.bundle);
      if (!(await this.publishCaBundle(material.caBundlePem))) continue;
      await this.handOut(material, current.bundle);
      await this.deps.onSettled?.(current.bundle);
      return material;
    }
    throw new CertKeeperError(`${store.description} kept changing; gave up after ${this.attempts} attempts`, {
      cause: lastConflict,
    });
  }

  /** Applies the caBundle; false when the store moved on meanwhile and the caller must go round again. */
  private async publishCaBundle(caBundlePem: string): Promise<boolean> {
    const target = this.deps.caBundleTarget;
    if (target === undefined) return true;
    const outcome = outcomeOf(await target.apply(caBundlePem));
    if (outcome !== undefined && outcome !== 'unchanged') this.log(`certificates: caBundle ${outcome}`);
    const after = await this.deps.store.load();
    if (after !== undefined && caBundleOf(after.bundle) === caBundlePem) return true;
    this.log(`certificates: ${this.deps.store.description} changed while applying the caBundle; applying again`);
    return false;
  }

  private async handOut(material: ServingMaterial, bundle: CertBundle): Promise<void> {
    const before = this.served;
    if (before !== undefined && sameMaterial(before.material, material)) return;
    if (before !== undefined && before.caCertPem !== bundle.caCertPem && this.deps.caBundleTarget !== undefined) {
      this.log(
        `certificates: new CA; serving its certificate in ${this.propagationDelayMs} ms, once the apiserver has the ` +
          `new caBundle`,
      );
      await this.sleep(this.propagationDelayMs);
    }
    // Marked as served only once onChange accepted it, so a throwing onChange is retried next time.
    this.deps.onChange?.(material);
    this.served = { material, caCertPem: bundle.caCertPem };
  }

  private plan(bundle: CertBundle | undefined, now: Date, force: RotationKind | undefined): Plan {
    const assessment = assessBundle(bundle, { names: this.deps.names, now, renewBeforeMs: this.deps.renewBeforeMs });
    // Forcing a leaf under a CA that needs renewing anyway renews everything.
    const decision: Decision =
      force === undefined || assessment.action === 'renew-all'
        ? assessment
        : { action: force === 'all' ? 'renew-all' : 'renew-leaf', reason: 'forced', detail: 'rotation requested' };
    if (decision.action === 'renew-all' || bundle === undefined) {
      const ca = createCertificateAuthority({
        commonName: `${this.deps.caCommonName ?? 'vgpu-warden-ca'} ${now.toISOString().replace(/\.\d+Z$/, 'Z')}`,
        validityDays: this.deps.caValidityDays,
        now,
      });
      const keepOld = bundle !== undefined && canStayTrusted(bundle.caCertPem, now);
      const next: CertBundle = { caCertPem: ca.certPem, caKeyPem: ca.keyPem, ...this.issueLeaf(ca, now) };
      if (keepOld) next.previousCaCertPem = bundle.caCertPem;
      // (keep is impossible here: assessBundle renews everything when nothing is stored.)
      const why = decision.action === 'keep' ? 'missing' : `${decision.reason}: ${decision.detail}`;
      const kept = keepOld ? '; the old CA stays trusted during the rotation' : '';
      return { next, summary: `new CA and serving certificate (${why})${kept}` };
    }
    const previous = assessPreviousCa(bundle, { now, retentionMs: this.retentionMs() });
    const next: CertBundle = { ...bundle };
    const notes: string[] = [];
    if (previous.action === 'drop') {
      delete next.previousCaCertPem;
      notes.push(`dropped the previous CA from the caBundle (${previous.reason})`);
    }
    if (decision.action === 'renew-leaf') {
      Object.assign(next, this.issueLeaf({ certPem: bundle.caCertPem, keyPem: bundle.caKeyPem }, now));
      notes.unshift(`new serving certificate (${decision.reason}: ${decision.detail})`);
    }
    return notes.length === 0 ? { next: undefined, summary: 'kept' } : { next, summary: notes.join('; ') };
  }

  private issueLeaf(ca: { certPem: string; keyPem: string }, now: Date): { certPem: string; keyPem: string } {
    // A leaf must not outlive its CA: clients would reject it once the CA expires, before its own renewal.
    const caLeftDays = (new X509Certificate(ca.certPem).validToDate.getTime() - now.getTime()) / DAY_MS;
    const issued = issueCertificate(ca, {
      // Clients go by the SANs; the CN is for people, so any name that encodes safely will do.
      commonName: this.deps.commonName ?? this.deps.names.find((name) => PRINTABLE_STRING.test(name)) ?? 'vgpu-warden',
      subjectAltNames: this.deps.names,
      usage: 'server',
      validityDays: Math.min(this.deps.validityDays, caLeftDays),
      now,
    });
    return { certPem: issued.certPem, keyPem: issued.keyPem };
  }
}

function rotatedSince(before: CertBundle | undefined, after: CertBundle | undefined, kind: RotationKind): boolean {
  if (before === undefined || after === undefined) return before !== after;
  return kind === 'all' ? before.caCertPem !== after.caCertPem : before.certPem !== after.certPem;
}
