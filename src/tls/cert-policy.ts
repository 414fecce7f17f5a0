import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import type { CertBundle } from './cert-bundle.js';
import { NOT_BEFORE_BACKDATE_MS } from './certificates.js';
import { canonicalHost } from '../base/net-hosts.js';

/**
 * Why the whole set (CA and leaf) must be made anew:
 * - `missing`: there is no bundle, or all of its four PEMs are empty
 * - `ca-missing`: the CA certificate or the CA key is empty
 * - `ca-unparsable`: the CA certificate or the CA key does not parse
 * - `ca-key-mismatch`: the CA key is not the CA certificate's key (it could not sign a leaf the CA vouches for)
 * - `ca-not-ca`: the CA certificate lacks basicConstraints CA:TRUE
 * - `ca-expired`: the CA is past its notAfter
 * - `ca-expiring`: the CA is inside the renewal window (notAfter - renewBeforeMs)
 */
export type RenewAllReason =
  'missing' | 'ca-missing' | 'ca-unparsable' | 'ca-key-mismatch' | 'ca-not-ca' | 'ca-expired' | 'ca-expiring';

/**
 * Why only the leaf must be made anew (the CA is fine and stays):
 * - `leaf-missing`: the leaf certificate or its key is empty
 * - `leaf-unparsable`: the leaf certificate or its key does not parse
 * - `leaf-key-mismatch`: the key is not the leaf certificate's key
 * - `leaf-not-signed-by-ca`: the leaf was not issued by this CA (wrong issuer or a bad signature)
 * - `leaf-expired`: the leaf is past its notAfter
 * - `leaf-expiring`: the leaf is inside the renewal window (notAfter - renewBeforeMs)
 * - `names-changed`: the leaf's SANs are not exactly the wanted names (issued for other names)
 */
export type RenewLeafReason =
  | 'leaf-missing'
  | 'leaf-unparsable'
  | 'leaf-key-mismatch'
  | 'leaf-not-signed-by-ca'
  | 'leaf-expired'
  | 'leaf-expiring'
  | 'names-changed';

export type Assessment =
  | { action: 'keep' }
  | { action: 'renew-leaf'; reason: RenewLeafReason; detail: string }
  | { action: 'renew-all'; reason: RenewAllReason; detail: string };

export interface PolicyOptions {
  /** The SANs the leaf must carry, as servingNames() makes them; order does not matter. */
  names: readonly string[];
  now: Date;
  /** Renew a certificate (CA or leaf) once it has less than this left. */
  renewBeforeMs: number;
}

function parseCertificate(pem: string): X509Certificate | undefined {
  try {
    return new X509Certificate(pem);
  } catch {
    return undefined;
  }
}

function parseKey(pem: string): KeyObject | undefined {
  try {
    return createPrivateKey(pem);
  } catch {
    return undefined;
  }
}

/** Whether `key` is the private key of `cert` (false for a key of another algorithm, which throws). */
export function keyMatches(cert: X509Certificate, key: KeyObject): boolean {
  try {
    return cert.checkPrivateKey(key);
  } catch {
    // A key of another algorithm than the certificate's throws instead of answering false.
    return false;
  }
}

const isEmpty = (pem: string | undefined): boolean => pem === undefined || pem.trim() === '';

/**
 * The SANs of a certificate in canonicalHost() spelling; other
 * SAN types are kept verbatim so they never match a wanted name.
 */
export function subjectAltNamesOf(cert: X509Certificate): string[] {
  const text = cert.subjectAltName;
  if (text === undefined || text === '') return [];
  return text.split(', ').map((entry) => {
    if (entry.startsWith('DNS:')) return canonicalHost(entry.slice('DNS:'.length));
    if (entry.startsWith('IP Address:')) return canonicalHost(entry.slice('IP Address:'.length));
    return entry;
  });
}

function describeNameDifference(have: readonly string[], want: readonly string[]): string {
  const missing = want.filter((name) => !have.includes(name));
  const extra = have.filter((name) => !want.includes(name));
  const parts = [];
  if (missing.length > 0) parts.push(`missing ${missing.join(', ')}`);
  if (extra.length > 0) parts.push(`not wanted ${extra.join(', ')}`);
  return `the leaf's SANs differ from the wanted names: ${parts.join('; ')}`;
}

function expiry(cert: X509Certificate, now: Date, renewBeforeMs: number): 'expired' | 'expiring' | undefined {
  const notAfter = cert.validToDate.getTime();
  if (now.getTime() >= notAfter) return 'expired';
  return now.getTime() >= notAfter - renewBeforeMs ? 'expiring' : undefined;
}

function assessCa(bundle: CertBundle, options: PolicyOptions): Assessment | X509Certificate {
  const renewAll = (reason: RenewAllReason, detail: string): Assessment => ({ action: 'renew-all', reason, detail });
  if (isEmpty(bundle.caCertPem) || isEmpty(bundle.caKeyPem)) {
    return renewAll('ca-missing', isEmpty(bundle.caCertPem) ? 'no CA certificate' : 'no CA key');
  }
  const ca = parseCertificate(bundle.caCertPem);
  if (ca === undefined) return renewAll('ca-unparsable', 'the CA certificate does not parse');
  const caKey = parseKey(bundle.caKeyPem);
  if (caKey === undefined) return renewAll('ca-unparsable', 'the CA key does not parse');
  if (!keyMatches(ca, caKey)) return renewAll('ca-key-mismatch', 'the CA key does not belong to the CA certificate');
  if (!ca.ca) return renewAll('ca-not-ca', 'the CA certificate lacks basicConstraints CA:TRUE');
  const state = expiry(ca, options.now, options.renewBeforeMs);
  if (state !== undefined)
    return renewAll(
      `ca-${state}`,
      `the CA ${state === 'expired' ? 'expired' : 'expires'} at ${ca.validToDate.toISOString()}`,
    );
  return ca;
}

function assessLeaf(bundle: CertBundle, ca: X509Certificate, options: PolicyOptions): Assessment {
  const renewLeaf = (reason: RenewLeafReason, detail: string): Assessment => ({ action: 'renew-leaf', reason, detail });
  if (isEmpty(bundle.certPem) || isEmpty(bundle.keyPem)) {
    return renewLeaf('leaf-missing', isEmpty(bundle.certPem) ? 'no serving certificate' : 'no serving key');
  }
  const leaf = parseCertificate(bundle.certPem);
  if (leaf === undefined) return renewLeaf('leaf-unparsable', 'the serving certificate does not parse');
  const key = parseKey(bundle.keyPem);
  if (key === undefined) return renewLeaf('leaf-unparsable', 'the serving key does not parse');
  if (!keyMatches(leaf, key))
    return renewLeaf('leaf-key-mismatch', 'the serving key does not belong to the serving certificate');
  if (!leaf.checkIssued(ca) || !leaf.verify(ca.publicKey)) {
    return renewLeaf(
      'leaf-not-signed-by-ca',
      `the serving certificate was issued by ${leaf.issuer.replace(/\n/g, ', ')}, not by this CA`,
    );
  }
  const state = expiry(leaf, options.now, options.renewBeforeMs);
  if (state !== undefined) {
    return renewLeaf(
      `leaf-${state}`,
      `the serving certificate ${state === 'expired' ? 'expired' : 'expires'} at ${leaf.validToDate.toISOString()}`,
    );
  }
  const have = [...new Set(subjectAltNamesOf(leaf))];
  const want = [...new Set(options.names.map(canonicalHost))];
  if (have.length !== want.length || want.some((name) => !have.includes(name))) {
    return renewLeaf('names-changed', describeNameDifference(have, want));
  }
  return { action: 'keep' };
}

/**
 * What to do with a stored bundle: keep it, renew the leaf under the same CA, or renew everything.
 * Pure apart from parsing. The CA is judged first because a leaf is only as good as its CA.
 */
export function assessBundle(bundle: CertBundle | undefined, options: PolicyOptions): Assessment {
  if (bundle === undefined || [bundle.caCertPem, bundle.caKeyPem, bundle.certPem, bundle.keyPem].every(isEmpty)) {
    return { action: 'renew-all', reason: 'missing', detail: 'no certificates stored yet' };
  }
  const ca = assessCa(bundle, options);
  return ca instanceof X509Certificate ? assessLeaf(bundle, ca, options) : ca;
}

/**
 * Whether a CA that is being replaced can still vouch for leaves being served, and so belongs in
 * the caBundle as the previous CA during the rotation: it parses, is a CA and has not expired.
 */
export function canStayTrusted(caCertPem: string | undefined, now: Date): boolean {
  if (isEmpty(caCertPem)) return false;
  const ca = parseCertificate(caCertPem ?? '');
  return ca !== undefined && ca.ca && now.getTime() < ca.validToDate.getTime();
}

/**
 * Why the previous CA leaves the caBundle:
 * - `retention-over`: the rotation is more than retentionMs old; every replica serves the new leaf by then
 * - `expired`: it could not vouch for anything any more
 * - `unparsable`: it does not parse (and would make the apiserver refuse the whole caBundle)
 * - `same-as-current`: it is the current CA again
 */
export type PreviousCaDropReason = 'retention-over' | 'expired' | 'unparsable' | 'same-as-current';

export type PreviousCaAssessment =
  { action: 'none' } | { action: 'keep'; until: Date } | { action: 'drop'; reason: PreviousCaDropReason };

/**
 * Whether the previous CA still belongs in the caBundle. The rotation time is read from the current
 * CA itself (its notBefore plus the back-dating), so the rule needs no extra state, survives restarts
 * and gives every replica the same answer.
 */
export function assessPreviousCa(
  bundle: CertBundle,
  options: { now: Date; retentionMs: number },
): PreviousCaAssessment {
  if (isEmpty(bundle.previousCaCertPem)) return { action: 'none' };
  const previousPem = bundle.previousCaCertPem ?? '';
  if (previousPem.trim() === bundle.caCertPem.trim()) return { action: 'drop', reason: 'same-as-current' };
  const previous = parseCertificate(previousPem);
  if (previous === undefined) return { action: 'drop', reason: 'unparsable' };
  if (options.now.getTime() >= previous.validToDate.getTime()) return { action: 'drop', reason: 'expired' };
  const current = parseCertificate(bundle.caCertPem);
  // Without a readable current CA, assessBundle renews everything anyway; nothing to time against.
  if (current === undefined) return { action: 'drop', reason: 'retention-over' };
  const rotatedAt = current.validFromDate.getTime() + NOT_BEFORE_BACKDATE_MS;
  const until = Math.min(rotatedAt + options.retentionMs, previous.validToDate.getTime());
  return options.now.getTime() >= until
    ? { action: 'drop', reason: 'retention-over' }
    : { action: 'keep', until: new Date(until) };
}
