import { X509Certificate } from 'node:crypto';
import { expect } from 'chai';
import type { CertBundle } from '../../../src/tls/cert-bundle.js';
import {
  assessBundle,
  assessPreviousCa,
  canStayTrusted,
  type Assessment,
  type PolicyOptions,
} from '../../../src/tls/cert-policy.js';
import {
  createCertificateAuthority,
  issueCertificate,
  type CertificateAuthority,
} from '../../../src/tls/certificates.js';
import { servingNames } from '../../../src/tls/serving-names.js';

const DAY = 86_400_000;
const BASE = new Date('2031-03-01T12:00:00Z');
const NAMES = servingNames({ serviceName: 'vgpu-warden', namespace: 'kube-system', extraHosts: ['10.0.0.7'] });
const OPTIONS: PolicyOptions = { names: NAMES, now: BASE, renewBeforeMs: 7 * DAY };

function leafOf(ca: CertificateAuthority, options: { names?: readonly string[]; days?: number; now?: Date } = {}) {
  return issueCertificate(ca, {
    commonName: 'vgpu-warden',
    subjectAltNames: options.names ?? NAMES,
    usage: 'server',
    validityDays: options.days ?? 30,
    now: options.now ?? BASE,
  });
}

function bundleOf(ca: CertificateAuthority, leaf: { certPem: string; keyPem: string }): CertBundle {
  return { caCertPem: ca.certPem, caKeyPem: ca.keyPem, certPem: leaf.certPem, keyPem: leaf.keyPem };
}

const notAfter = (pem: string): number => new X509Certificate(pem).validToDate.getTime();

describe('assessBundle', () => {
  // Key generation is the slow part; one set of fixtures serves the whole table.
  const ca = createCertificateAuthority({ commonName: 'policy-ca', validityDays: 365, now: BASE });
  const leaf = leafOf(ca);
  const good = bundleOf(ca, leaf);
  const otherLeaf = leafOf(ca);
  const sameNameCa = createCertificateAuthority({ commonName: 'policy-ca', validityDays: 365, now: BASE });
  const otherCa = createCertificateAuthority({ commonName: 'another-ca', validityDays: 365, now: BASE });
  const expiredCa = createCertificateAuthority({
    commonName: 'expired-ca',
    validityDays: 10,
    now: new Date(BASE.getTime() - 20 * DAY),
  });
  const shortCa = createCertificateAuthority({ commonName: 'short-ca', validityDays: 5, now: BASE });

  const table: {
    name: string;
    bundle: CertBundle | undefined;
    options?: Partial<PolicyOptions>;
    expected: Assessment['action'];
    reason?: string;
  }[] = [
    { name: 'nothing stored', bundle: undefined, expected: 'renew-all', reason: 'missing' },
    {
      name: 'all four PEMs empty',
      bundle: { caCertPem: '', caKeyPem: '', certPem: '', keyPem: '' },
      expected: 'renew-all',
      reason: 'missing',
    },
    { name: 'no CA certificate', bundle: { ...good, caCertPem: '' }, expected: 'renew-all', reason: 'ca-missing' },
    { name: 'no CA key', bundle: { ...good, caKeyPem: ' \n' }, expected: 'renew-all', reason: 'ca-missing' },
    {
      name: 'CA certificate garbage',
      bundle: { ...good, caCertPem: 'not a pem' },
      expected: 'renew-all',
      reason: 'ca-unparsable',
    },
    {
      name: 'CA key garbage',
      bundle: { ...good, caKeyPem: '-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n' },
      expected: 'renew-all',
      reason: 'ca-unparsable',
    },
    {
      name: 'CA key of another certificate',
      bundle: { ...good, caKeyPem: otherCa.keyPem },
      expected: 'renew-all',
      reason: 'ca-key-mismatch',
    },
    {
      name: 'CA certificate without CA:TRUE',
      bundle: { ...bundleOf({ certPem: leaf.certPem, keyPem: leaf.keyPem }, leaf) },
      expected: 'renew-all',
      reason: 'ca-not-ca',
    },
    {
      name: 'CA expired',
      bundle: bundleOf(expiredCa, leafOf(expiredCa, { days: 5, now: new Date(BASE.getTime() - 20 * DAY) })),
      expected: 'renew-all',
      reason: 'ca-expired',
    },
    {
      name: 'CA inside its renewal window',
      bundle: bundleOf(shortCa, leafOf(shortCa, { days: 4 })),
      expected: 'renew-all',
      reason: 'ca-expiring',
    },
    { name: 'no leaf certificate', bundle: { ...good, certPem: '' }, expected: 'renew-leaf', reason: 'leaf-missing' },
    { name: 'no leaf key', bundle: { ...good, keyPem: '' }, expected: 'renew-leaf', reason: 'leaf-missing' },
    {
      name: 'leaf certificate garbage',
      bundle: { ...good, certPem: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n' },
      expected: 'renew-leaf',
      reason: 'leaf-unparsable',
    },
    {
      name: 'leaf key garbage',
      bundle: { ...good, keyPem: 'garbage' },
      expected: 'renew-leaf',
      reason: 'leaf-unparsable',
    },
    {
      name: 'leaf key of another leaf',
      bundle: { ...good, keyPem: otherLeaf.keyPem },
      expected: 'renew-leaf',
      reason: 'leaf-key-mismatch',
    },
    {
      name: 'leaf from another CA',
      bundle: bundleOf(ca, leafOf(otherCa)),
      expected: 'renew-leaf',
      reason: 'leaf-not-signed-by-ca',
    },
    {
      name: 'leaf from another CA with the same name (signature check)',
      bundle: bundleOf(ca, leafOf(sameNameCa)),
      expected: 'renew-leaf',
      reason: 'leaf-not-signed-by-ca',
    },
    {
      name: 'leaf expired',
      bundle: good,
      options: { now: new Date(notAfter(leaf.certPem) + 60_000) },
      expected: 'renew-leaf',
      reason: 'leaf-expired',
    },
    {
      name: 'leaf inside its renewal window',
      bundle: good,
      options: { now: new Date(notAfter(leaf.certPem) - 3 * DAY) },
      expected: 'renew-leaf',
      reason: 'leaf-expiring',
    },
    {
      name: 'leaf lacks a wanted name',
      bundle: good,
      options: { names: [...NAMES, 'webhook.example.com'] },
      expected: 'renew-leaf',
      reason: 'names-changed',
    },
    {
      name: 'leaf has a name no longer wanted',
      bundle: good,
      options: { names: NAMES.slice(0, -1) },
      expected: 'renew-leaf',
      reason: 'names-changed',
    },
    {
      name: 'leaf issued for other names',
      bundle: bundleOf(ca, leafOf(ca, { names: ['other.example.com'] })),
      expected: 'renew-leaf',
      reason: 'names-changed',
    },
    { name: 'a valid set', bundle: good, expected: 'keep' },
    {
      name: 'a valid set, names in another order',
      bundle: good,
      options: { names: [...NAMES].reverse() },
      expected: 'keep',
    },
    {
      name: 'a valid set just outside the renewal window',
      bundle: good,
      options: { now: new Date(notAfter(leaf.certPem) - 7 * DAY - 1000) },
      expected: 'keep',
    },
    {
      name: 'a valid set with IPv6 SANs spelled otherwise',
      bundle: bundleOf(ca, leafOf(ca, { names: ['svc', 'fd00::10'] })),
      options: { names: ['svc', 'FD00:0:0:0:0:0:0:10'] },
      expected: 'keep',
    },
  ];

  for (const row of table) {
    it(`${row.name}: ${row.expected}${row.reason ? ` (${row.reason})` : ''}`, () => {
      const result = assessBundle(row.bundle, { ...OPTIONS, ...row.options });
      expect(result.action).to.equal(row.expected);
      if (result.action !== 'keep') {
        expect(result.reason).to.equal(row.reason);
        expect(result.detail).to.be.a('string').and.not.equal('');
      }
    });
  }

  it('names the missing and the unwanted SANs in the detail', () => {
    const result = assessBundle(good, { ...OPTIONS, names: [...NAMES.slice(0, -1), 'webhook.example.com'] });
    expect(result).to.include({ action: 'renew-leaf', reason: 'names-changed' });
    expect(result.action === 'keep' ? '' : result.detail).to.equal(
      "the leaf's SANs differ from the wanted names: missing webhook.example.com; not wanted 10.0.0.7",
    );
  });
});

describe('previous CA', () => {
  const oldCa = createCertificateAuthority({ commonName: 'old-ca', validityDays: 30, now: BASE });
  const rotatedAt = new Date(BASE.getTime() + DAY);
  const newCa = createCertificateAuthority({ commonName: 'new-ca', validityDays: 365, now: rotatedAt });
  const rotated: CertBundle = {
    caCertPem: newCa.certPem,
    caKeyPem: newCa.keyPem,
    certPem: '',
    keyPem: '',
    previousCaCertPem: oldCa.certPem,
  };
  const hour = 3_600_000;

  it('has nothing to say without a previous CA', () => {
    expect(
      assessPreviousCa({ ...rotated, previousCaCertPem: undefined }, { now: rotatedAt, retentionMs: hour }),
    ).to.deep.equal({ action: 'none' });
    expect(
      assessPreviousCa({ ...rotated, previousCaCertPem: '' }, { now: rotatedAt, retentionMs: hour }),
    ).to.deep.equal({ action: 'none' });
  });

  it('keeps it for the retention after the rotation, timed by the new CA itself', () => {
    const early = assessPreviousCa(rotated, { now: new Date(rotatedAt.getTime() + hour - 1000), retentionMs: hour });
    expect(early).to.deep.equal({ action: 'keep', until: new Date(rotatedAt.getTime() + hour) });
    expect(assessPreviousCa(rotated, { now: new Date(rotatedAt.getTime() + hour), retentionMs: hour })).to.deep.equal({
      action: 'drop',
      reason: 'retention-over',
    });
  });

  it('drops it once it has expired, whatever the retention', () => {
    expect(
      assessPreviousCa(rotated, { now: new Date(BASE.getTime() + 31 * DAY), retentionMs: 365 * DAY }),
    ).to.deep.equal({ action: 'drop', reason: 'expired' });
  });

  it('drops one that does not parse or that is the current CA again', () => {
    expect(
      assessPreviousCa({ ...rotated, previousCaCertPem: 'junk' }, { now: rotatedAt, retentionMs: hour }),
    ).to.deep.equal({ action: 'drop', reason: 'unparsable' });
    expect(
      assessPreviousCa({ ...rotated, previousCaCertPem: newCa.certPem }, { now: rotatedAt, retentionMs: hour }),
    ).to.deep.equal({ action: 'drop', reason: 'same-as-current' });
  });

  it('keeps only a CA that parses, is a CA and has not expired as the previous one', () => {
    const leaf = leafOf(oldCa);
    expect(canStayTrusted(oldCa.certPem, rotatedAt)).to.equal(true);
    expect(canStayTrusted(oldCa.certPem, new Date(BASE.getTime() + 31 * DAY))).to.equal(false);
    expect(canStayTrusted(leaf.certPem, rotatedAt)).to.equal(false);
    expect(canStayTrusted('junk', rotatedAt)).to.equal(false);
    expect(canStayTrusted(undefined, rotatedAt)).to.equal(false);
  });
});
