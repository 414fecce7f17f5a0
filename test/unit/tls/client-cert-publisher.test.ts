import { createPrivateKey, X509Certificate } from 'node:crypto';
import { expect } from 'chai';
import { caBundleOf, type CertBundle } from '../../../src/tls/cert-bundle.js';
import type { CertStore, StoredBundle } from '../../../src/tls/cert-store.js';
import { createCertificateAuthority, issueCertificate } from '../../../src/tls/certificates.js';
import {
  CLIENT_CERT_LAYOUT,
  ClientCertPublisher,
  type ClientCertPublisherDeps,
} from '../../../src/tls/client-cert-publisher.js';
import {
  assessClientCertificate,
  CLIENT_AUTH_OID,
  commonNameOf,
  extendedKeyUsageOf,
  SCHEDULER_CLIENT_COMMON_NAME,
  type ClientCertificate,
} from '../../../src/tls/client-cert-policy.js';
import { CertKeeperError, CertStoreConflictError } from '../../../src/tls/tls-errors.js';
import { certificatesIn, ManualClock } from '../../support/tls-helpers.js';

const DAY = 86_400_000;

/** A CA bundle as the keeper stores it: CA, its key, a serving leaf and, optionally, the previous CA. */
function caBundle(now: Date, previousCaCertPem?: string): CertBundle {
  const ca = createCertificateAuthority({ commonName: `test-ca ${now.toISOString()}`, validityDays: 365, now });
  const leaf = issueCertificate(ca, {
    commonName: 'vgpu-warden',
    subjectAltNames: ['vgpu-warden'],
    usage: 'server',
    validityDays: 30,
    now,
  });
  return {
    caCertPem: ca.certPem,
    caKeyPem: ca.keyPem,
    certPem: leaf.certPem,
    keyPem: leaf.keyPem,
    ...(previousCaCertPem ? { previousCaCertPem } : {}),
  };
}

/** An in-memory CertStore with the Secret store's optimistic concurrency, and a hook before each save. */
class MemoryStore implements CertStore<ClientCertificate> {
  readonly description = 'memory';
  stored: StoredBundle<ClientCertificate> | undefined;
  saves = 0;
  private version = 0;

  constructor(private readonly beforeSave: (call: number) => void = () => undefined) {}

  load(): Promise<StoredBundle<ClientCertificate> | undefined> {
    return Promise.resolve(this.stored === undefined ? undefined : structuredClone(this.stored));
  }

  save(
    bundle: ClientCertificate,
    expected: StoredBundle<ClientCertificate> | undefined,
  ): Promise<StoredBundle<ClientCertificate>> {
    this.beforeSave(this.saves + 1);
    if (expected?.version !== this.stored?.version)
      return Promise.reject(new CertStoreConflictError('memory changed since it was read'));
    this.saves++;
    this.stored = { bundle: structuredClone(bundle), version: String(++this.version) };
    return Promise.resolve(structuredClone(this.stored));
  }
}

function signedBy(certPem: string, caPem: string): boolean {
  const cert = new X509Certificate(certPem);
  const ca = new X509Certificate(caPem);
  return cert.checkIssued(ca) && cert.verify(ca.publicKey);
}

describe("ClientCertPublisher (kube-scheduler's client certificate)", function () {
  this.timeout(30_000);
  let clock: ManualClock;
  let logs: string[];

  beforeEach(() => {
    clock = new ManualClock(new Date());
    logs = [];
  });

  const publisher = (store: CertStore<ClientCertificate>, overrides: Partial<ClientCertPublisherDeps> = {}) =>
    new ClientCertPublisher({
      store,
      commonName: SCHEDULER_CLIENT_COMMON_NAME,
      validityDays: 30,
      renewBeforeMs: 7 * DAY,
      clock: clock.read,
      log: (line) => logs.push(line),
      ...overrides,
    });

  it('issues a clientAuth-only certificate for CN vgpu-warden-scheduler from the current CA, with the caBundle and no CA key', async () => {
    const bundle = caBundle(clock.now);
    const store = new MemoryStore();
    const published = await publisher(store).publish(bundle);

    const cert = new X509Certificate(published.certPem);
    expect(commonNameOf(cert)).to.equal('vgpu-warden-scheduler');
    expect(extendedKeyUsageOf(cert)).to.deep.equal([CLIENT_AUTH_OID]);
    expect(cert.ca).to.equal(false);
    expect(signedBy(published.certPem, bundle.caCertPem)).to.equal(true);
    expect(cert.checkPrivateKey(createPrivateKey(published.keyPem))).to.equal(true);
    expect(cert.validToDate.getTime() - clock.now.getTime()).to.be.closeTo(30 * DAY, 1000);
    expect(published.caPem).to.equal(caBundleOf(bundle));
    // What kube-scheduler mounts: exactly tls.crt, tls.key and ca.crt, never the CA key.
    const data = CLIENT_CERT_LAYOUT.toData(published);
    expect(Object.keys(data).sort()).to.deep.equal(['ca.crt', 'tls.crt', 'tls.key']);
    expect(Object.values(data).map((value) => Buffer.from(value, 'base64').toString())).to.not.include(bundle.caKeyPem);
    expect(CLIENT_CERT_LAYOUT.fromData(data)).to.deep.equal(published);
    expect(store.saves).to.equal(1);
    expect(logs.join('\n')).to.include('new client certificate for vgpu-warden-scheduler (missing');
  });

  it('keeps a valid certificate: later rounds write nothing', async () => {
    const bundle = caBundle(clock.now);
    const store = new MemoryStore();
    const first = await publisher(store).publish(bundle);
    clock.advance(10 * DAY);
    expect(await publisher(store).publish(bundle)).to.deep.equal(first);
    expect(store.saves).to.equal(1);
  });

  it('renews it inside the renewal window, like the serving certificate, under the same CA', async () => {
    const bundle = caBundle(clock.now);
    const store = new MemoryStore();
    const first = await publisher(store).publish(bundle);
    clock.advance(24 * DAY);
    const renewed = await publisher(store).publish(bundle);
    expect(renewed.certPem).to.not.equal(first.certPem);
    expect(signedBy(renewed.certPem, bundle.caCertPem)).to.equal(true);
    expect(logs.at(-1)).to.include('(expiring: the client certificate expires at');
  });

  it('never outlives the CA that signed it', async () => {
    const bundle = caBundle(clock.now);
    const published = await publisher(new MemoryStore(), { validityDays: 1000 }).publish(bundle);
    expect(new X509Certificate(published.certPem).validToDate.getTime()).to.be.at.most(
      new X509Certificate(bundle.caCertPem).validToDate.getTime(),
    );
  });

  it('issues a new one from a rotated CA, trusting both CAs meanwhile, and asks for a kube-scheduler restart', async () => {
    const old = caBundle(clock.now);
    const store = new MemoryStore();
    const first = await publisher(store).publish(old);
    clock.advance(DAY);
    const rotated = caBundle(clock.now, old.caCertPem);
    const next = await publisher(store).publish(rotated);
    expect(signedBy(next.certPem, rotated.caCertPem)).to.equal(true);
    expect(next.certPem).to.not.equal(first.certPem);
    expect(certificatesIn(next.caPem).map((cert) => cert.fingerprint256)).to.deep.equal(
      [rotated.caCertPem, old.caCertPem].map((pem) => new X509Certificate(pem).fingerprint256),
    );
    expect(logs.join('\n')).to.include('not-signed-by-ca').and.include('restart it');

    // Once the previous CA leaves the caBundle, only ca.crt changes: the certificate stays.
    const settled = await publisher(store).publish({ ...rotated, previousCaCertPem: undefined });
    expect(settled.certPem).to.equal(next.certPem);
    expect(settled.caPem).to.equal(caBundleOf({ ...rotated, previousCaCertPem: undefined }));
    expect(logs.at(-1)).to.include('ca.crt of the client certificate now carries the current caBundle');
  });

  it('replaces whatever else is stored: our serving certificate, a foreign certificate, a mismatched key, garbage', async () => {
    const bundle = caBundle(clock.now);
    const foreignCa = createCertificateAuthority({ commonName: 'foreign', validityDays: 10 });
    const foreign = issueCertificate(foreignCa, {
      commonName: SCHEDULER_CLIENT_COMMON_NAME,
      usage: 'client',
      validityDays: 10,
    });
    const otherName = issueCertificate(
      { certPem: bundle.caCertPem, keyPem: bundle.caKeyPem },
      { commonName: 'someone-else', usage: 'client', validityDays: 10 },
    );
    const caPem = caBundleOf(bundle);
    const cases: [ClientCertificate, string][] = [
      [{ certPem: bundle.certPem, keyPem: bundle.keyPem, caPem }, 'wrong-identity'],
      [{ certPem: otherName.certPem, keyPem: otherName.keyPem, caPem }, 'wrong-identity'],
      [{ certPem: foreign.certPem, keyPem: foreign.keyPem, caPem }, 'not-signed-by-ca'],
      [{ certPem: otherName.certPem, keyPem: foreign.keyPem, caPem }, 'key-mismatch'],
      [{ certPem: 'garbage', keyPem: foreign.keyPem, caPem }, 'unparsable'],
      [{ certPem: '', keyPem: '', caPem: '' }, 'missing'],
    ];
    for (const [stored, reason] of cases) {
      const assessment = assessClientCertificate(stored, {
        caCertPem: bundle.caCertPem,
        caBundlePem: caPem,
        commonName: SCHEDULER_CLIENT_COMMON_NAME,
        now: clock.now,
        renewBeforeMs: 7 * DAY,
      });
      expect(assessment, reason).to.deep.include({ action: 'issue', reason });
    }
    const store = new MemoryStore();
    store.stored = { bundle: cases[0]![0], version: '0' };
    const published = await publisher(store).publish(bundle);
    expect(commonNameOf(new X509Certificate(published.certPem))).to.equal(SCHEDULER_CLIENT_COMMON_NAME);
  });

  it("adopts another replica's certificate when it wrote first, so all replicas publish the same one", async () => {
    const bundle = caBundle(clock.now);
    let theirs: ClientCertificate | undefined;
    // Before our first save lands, another replica publishes its own certificate.
    const store: MemoryStore = new MemoryStore((call) => {
      if (call !== 1 || theirs !== undefined) return;
      const issued = issueCertificate(
        { certPem: bundle.caCertPem, keyPem: bundle.caKeyPem },
        { commonName: SCHEDULER_CLIENT_COMMON_NAME, usage: 'client', validityDays: 30, now: clock.now },
      );
      theirs = { ...issued, caPem: caBundleOf(bundle) };
      store.stored = { bundle: theirs, version: 'theirs' };
    });
    const published = await publisher(store).publish(bundle);
    expect(published).to.deep.equal(theirs);
    expect(store.saves).to.equal(0);
    expect(logs.join('\n')).to.include('changed while publishing the client certificate');
  });

  it('gives up with a CertKeeperError when the store never stops changing', async () => {
    const bundle = caBundle(clock.now);
    const store = new MemoryStore(() => {
      throw new CertStoreConflictError('always');
    });
    const error = await publisher(store, { attempts: 2 })
      .publish(bundle)
      .then(
        () => undefined,
        (caught: unknown) => caught,
      );
    expect(error).to.be.instanceOf(CertKeeperError);
    expect((error as Error).cause).to.be.instanceOf(CertStoreConflictError);
  });

  it('refuses a renewal window as long as the validity', () => {
    expect(() => publisher(new MemoryStore(), { validityDays: 7, renewBeforeMs: 7 * DAY })).to.throw(
      CertKeeperError,
      'must be shorter than its validity',
    );
  });
});
