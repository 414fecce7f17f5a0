import { X509Certificate } from 'node:crypto';
import { caBundleOf, type CertBundle } from './cert-bundle.js';
import type { CertStore, StoredBundle } from './cert-store.js';
import { issueCertificate } from './certificates.js';
import { assessClientCertificate, type ClientCertificate } from './client-cert-policy.js';
import type { SecretLayout } from './secret-cert-store.js';
import { CertKeeperError, CertStoreConflictError } from './tls-errors.js';
import { type Clock, systemClock } from '../base/clock.js';

const DAY_MS = 86_400_000;

const decode = (data: Record<string, string> | undefined, key: string): string =>
  Buffer.from(data?.[key] ?? '', 'base64').toString('utf8');
const encode = (pem: string): string => Buffer.from(pem, 'utf8').toString('base64');

/** kube-scheduler's Secret: tls.crt and tls.key (kubernetes.io/tls) and ca.crt, the caBundle. */
export const CLIENT_CERT_LAYOUT: SecretLayout<ClientCertificate> = {
  keys: ['tls.crt', 'tls.key', 'ca.crt'],
  toData: (value) => ({
    'tls.crt': encode(value.certPem),
    'tls.key': encode(value.keyPem),
    'ca.crt': encode(value.caPem),
  }),
  fromData: (data) => ({
    certPem: decode(data, 'tls.crt'),
    keyPem: decode(data, 'tls.key'),
    caPem: decode(data, 'ca.crt'),
  }),
};

export interface ClientCertPublisherDeps {
  store: CertStore<ClientCertificate>;
  commonName: string;
  /** Lifetime of a new client certificate (capped by the CA's), like the serving certificate's. */
  validityDays: number;
  /** Renew once less than this is left, like the serving certificate. */
  renewBeforeMs: number;
  clock?: Clock;
  log?: (line: string) => void;
  /** Load-decide-save rounds before giving up when other replicas keep writing. */
  attempts?: number;
}

/**
 * Keeps kube-scheduler's client certificate, issued by the CA in the keeper's bundle, in a store of
 * its own (a Secret kube-scheduler mounts, which never holds the CA key). Called after every
 * CertKeeper round (onSettled), so it follows the CA: a rotated CA gets a new client certificate,
 * and ca.crt always carries the current caBundle. Replicas race through the store's optimistic
 * concurrency and adopt the winner's certificate, so all of them publish the same one.
 *
 * kube-scheduler (client-go's TLSConfigFor, v1.34) re-reads certFile/keyFile at most once a second
 * on each new connection, so a renewed client certificate reaches it once the kubelet refreshes
 * the mounted Secret (about a minute), with no restart. It reads caFile only at start: after a CA
 * rotation it must be restarted to trust the extender's new serving certificate (logged below).
 */
export class ClientCertPublisher {
  private readonly clock: Clock;
  private readonly log: (line: string) => void;

  constructor(private readonly deps: ClientCertPublisherDeps) {
    this.clock = deps.clock ?? systemClock;
    this.log = deps.log ?? (() => undefined);
    if (!(deps.validityDays > 0) || !(deps.renewBeforeMs >= 0) || deps.renewBeforeMs >= deps.validityDays * DAY_MS) {
      throw new CertKeeperError(
        `client certificate renewal (${deps.renewBeforeMs} ms before expiry) must be shorter than its validity ` +
          `(${deps.validityDays} d)`,
      );
    }
  }

  /** Makes the store hold a client certificate the bundle's CA issued, and the bundle's caBundle; returns it. */
  async publish(bundle: CertBundle): Promise<ClientCertificate> {
    const { store } = this.deps;
    const caBundlePem = caBundleOf(bundle);
    let lastConflict: unknown;
    for (let attempt = 1; attempt <= (this.deps.attempts ?? 5); attempt++) {
      const loaded = await store.load();
      const now = new Date(this.clock());
      const assessment = assessClientCertificate(loaded?.bundle, {
        caCertPem: bundle.caCertPem,
        caBundlePem,
        commonName: this.deps.commonName,
        now,
        renewBeforeMs: this.deps.renewBeforeMs,
      });
      if (assessment.action === 'keep' && loaded !== undefined) return loaded.bundle;
      const next: ClientCertificate =
        assessment.action === 'update-ca' && loaded !== undefined
          ? { ...loaded.bundle, caPem: caBundlePem }
          : { ...this.issue(bundle, now), caPem: caBundlePem };
      try {
        const saved = await store.save(next, loaded);
        this.report(assessment, loaded);
        return saved.bundle;
      } catch (error) {
        if (!(error instanceof CertStoreConflictError)) throw error;
        lastConflict = error;
        this.log(
          `certificates: ${store.description} changed while publishing the client certificate; reading it again`,
        );
      }
    }
    throw new CertKeeperError(`${store.description} kept changing; gave up publishing the client certificate`, {
      cause: lastConflict,
    });
  }

  private issue(bundle: CertBundle, now: Date): { certPem: string; keyPem: string } {
    // Like the serving leaf, it must not outlive the CA that vouches for it.
    const caLeftDays = (new X509Certificate(bundle.caCertPem).validToDate.getTime() - now.getTime()) / DAY_MS;
    return issueCertificate(
      { certPem: bundle.caCertPem, keyPem: bundle.caKeyPem },
      {
        commonName: this.deps.commonName,
        usage: 'client',
        validityDays: Math.min(this.deps.validityDays, caLeftDays),
        now,
      },
    );
  }

  private report(
    assessment: ReturnType<typeof assessClientCertificate>,
    loaded: StoredBundle<ClientCertificate> | undefined,
  ): void {
    const where = this.deps.store.description;
    if (assessment.action === 'update-ca') {
      this.log(`certificates: ca.crt of the client certificate now carries the current caBundle (${where})`);
      return;
    }
    if (assessment.action !== 'issue') return;
    this.log(
      `certificates: new client certificate for ${this.deps.commonName} (${assessment.reason}: ` +
        `${assessment.detail}) (${where})`,
    );
    if (assessment.reason === 'not-signed-by-ca' && loaded !== undefined) {
      this.log(
        `certificates: the CA changed; kube-scheduler reads its caFile only at start, so restart it to trust the ` +
          `new serving certificate (e.g. kubectl rollout restart deployment/vgpu-warden-scheduler)`,
      );
    }
  }
}
