import { createPrivateKey, X509Certificate } from 'node:crypto';
import { keyMatches } from './cert-policy.js';

/** extKeyUsage id-kp-clientAuth and id-kp-serverAuth (RFC 5280 4.2.1.12). */
export const CLIENT_AUTH_OID = '1.3.6.1.5.5.7.3.2';
export const SERVER_AUTH_OID = '1.3.6.1.5.5.7.3.1';

/** The subject CN of kube-scheduler's client certificate; the extender serves no other. */
export const SCHEDULER_CLIENT_COMMON_NAME = 'vgpu-warden-scheduler';

/**
 * What kube-scheduler needs to call the extender with mutual TLS, as it mounts it (a
 * kubernetes.io/tls Secret): its own certificate and key, and the CAs it trusts for the extender's
 * serving certificate. No CA key.
 */
export interface ClientCertificate {
  /** Signed by vgpu-warden's current CA, extKeyUsage clientAuth only. */
  certPem: string;
  keyPem: string;
  /** The caBundle: the current CA, then the previous one while a CA rotation is under way. */
  caPem: string;
}

/**
 * Why a new client certificate is issued:
 * - `missing`: nothing stored, or no certificate or key
 * - `unparsable`: the certificate or the key does not parse
 * - `key-mismatch`: the key is not the certificate's
 * - `not-signed-by-ca`: the current CA did not issue it (the CA was rotated since)
 * - `wrong-identity`: its CN or extKeyUsage is not what the extender accepts
 * - `expired` / `expiring`: past its notAfter, or inside the renewal window
 */
export type ClientIssueReason =
  'missing' | 'unparsable' | 'key-mismatch' | 'not-signed-by-ca' | 'wrong-identity' | 'expired' | 'expiring';

export type ClientCertAssessment =
  | { action: 'keep' }
  /** The certificate is fine but ca.crt is not the current caBundle. */
  | { action: 'update-ca' }
  | { action: 'issue'; reason: ClientIssueReason; detail: string };

export interface ClientCertPolicyOptions {
  caCertPem: string;
  caBundlePem: string;
  commonName: string;
  now: Date;
  renewBeforeMs: number;
}

function parse<T>(make: () => T): T | undefined {
  try {
    return make();
  } catch {
    return undefined;
  }
}

/** The subject's CN ("CN=name" on one line of X509Certificate.subject), or undefined. */
export function commonNameOf(cert: X509Certificate): string | undefined {
  return cert.subject
    .split('\n')
    .find((line) => line.startsWith('CN='))
    ?.slice('CN='.length);
}

/** The extKeyUsage OIDs (Node calls the property keyUsage); empty when the extension is absent. */
export function extendedKeyUsageOf(cert: X509Certificate): string[] {
  // undefined at run time when the extension is absent, whatever the types say.
  const usages: unknown = cert.keyUsage;
  return Array.isArray(usages) ? usages.map(String) : [];
}

/**
 * What to do with the stored client certificate: keep it, rewrite only ca.crt, or issue a new one.
 * Pure apart from parsing; every replica reaches the same answer for the same inputs.
 */
export function assessClientCertificate(
  stored: ClientCertificate | undefined,
  options: ClientCertPolicyOptions,
): ClientCertAssessment {
  const issue = (reason: ClientIssueReason, detail: string): ClientCertAssessment => ({
    action: 'issue',
    reason,
    detail,
  });
  if (stored === undefined || stored.certPem.trim() === '' || stored.keyPem.trim() === '') {
    return issue('missing', 'no client certificate stored yet');
  }
  const cert = parse(() => new X509Certificate(stored.certPem));
  const key = parse(() => createPrivateKey(stored.keyPem));
  if (cert === undefined || key === undefined)
    return issue('unparsable', `the client ${cert === undefined ? 'certificate' : 'key'} does not parse`);
  if (!keyMatches(cert, key)) return issue('key-mismatch', 'the client key does not belong to the client certificate');
  const ca = parse(() => new X509Certificate(options.caCertPem));
  if (ca === undefined || !cert.checkIssued(ca) || !cert.verify(ca.publicKey)) {
    return issue(
      'not-signed-by-ca',
      `the client certificate was issued by ${cert.issuer.replace(/\n/g, ', ')}, not by the current CA`,
    );
  }
  const usages = extendedKeyUsageOf(cert);
  const commonName = commonNameOf(cert);
  if (commonName !== options.commonName || usages.length !== 1 || usages[0] !== CLIENT_AUTH_OID) {
    return issue(
      'wrong-identity',
      `the client certificate is CN ${commonName ?? '(none)'} with extKeyUsage ${usages.join(',') || '(none)'}, not ` +
        `CN ${options.commonName} with clientAuth only`,
    );
  }
  const notAfter = cert.validToDate.getTime();
  if (options.now.getTime() >= notAfter)
    return issue('expired', `the client certificate expired at ${cert.validToDate.toISOString()}`);
  if (options.now.getTime() >= notAfter - options.renewBeforeMs)
    return issue('expiring', `the client certificate expires at ${cert.validToDate.toISOString()}`);
  return stored.caPem === options.caBundlePem ? { action: 'keep' } : { action: 'update-ca' };
}
