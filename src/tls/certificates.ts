import { isIP } from 'node:net';
import forge from 'node-forge';

/**
 * X.509 material made with node-forge: a CA and leaf certificates it signs. Pure apart from the
 * randomness of keys and serials; callers decide where the PEMs go.
 */
export interface CertificateAuthority {
  certPem: string;
  keyPem: string;
}

export interface IssuedCertificate {
  certPem: string;
  keyPem: string;
}

export interface LeafRequest {
  commonName: string;
  /** DNS names and IP addresses, mixed; IPs become IP SANs. */
  subjectAltNames?: readonly string[];
  usage: 'server' | 'client';
  organization?: string;
  validityDays: number;
  now?: Date;
}

/**
 * How far notBefore is set before the moment of issue. A minute absorbs small clock differences
 * between us and the verifier; cert-policy.ts uses it to recover when a CA was made.
 */
export const NOT_BEFORE_BACKDATE_MS = 60_000;

// Go (the apiserver and kube-scheduler are the TLS clients) rejects negative serials since 1.23,
// and node-forge writes the hex as given, so the first byte is forced below 0x80.
function positiveSerial(): string {
  return '01' + forge.util.bytesToHex(forge.random.getBytesSync(15));
}

/** A fresh key pair and an unsigned certificate for it with a serial and validity window. */
function newCertificate(now: Date, days: number): { cert: forge.pki.Certificate; keys: forge.pki.rsa.KeyPair } {
  const keys = forge.pki.rsa.generateKeyPair({ bits: 2048 });
  const cert = forge.pki.createCertificate();
  cert.publicKey = keys.publicKey;
  cert.serialNumber = positiveSerial();
  cert.validity.notBefore = new Date(now.getTime() - NOT_BEFORE_BACKDATE_MS);
  cert.validity.notAfter = new Date(now.getTime() + days * 86_400_000);
  return { cert, keys };
}

export function createCertificateAuthority(options: {
  commonName: string;
  validityDays: number;
  now?: Date;
}): CertificateAuthority {
  const { cert, keys } = newCertificate(options.now ?? new Date(), options.validityDays);
  const name = [{ name: 'commonName', value: options.commonName }];
  cert.setSubject(name);
  cert.setIssuer(name);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(keys.privateKey, forge.md.sha256.create());
  return { certPem: forge.pki.certificateToPem(cert), keyPem: forge.pki.privateKeyToPem(keys.privateKey) };
}

export function issueCertificate(ca: CertificateAuthority, request: LeafRequest): IssuedCertificate {
  const caCert = forge.pki.certificateFromPem(ca.certPem);
  const caKey = forge.pki.privateKeyFromPem(ca.keyPem);
  const { cert, keys } = newCertificate(request.now ?? new Date(), request.validityDays);
  const subject = [{ name: 'commonName', value: request.commonName }];
  if (request.organization !== undefined) subject.push({ name: 'organizationName', value: request.organization });
  cert.setSubject(subject);
  cert.setIssuer(caCert.subject.attributes);
  const altNames = (request.subjectAltNames ?? []).map((name) =>
    isIP(name) ? { type: 7, ip: name } : { type: 2, value: name },
  );
  cert.setExtensions([
    { name: 'basicConstraints', cA: false },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: request.usage === 'server', clientAuth: request.usage === 'client' },
    ...(altNames.length > 0 ? [{ name: 'subjectAltName', altNames }] : []),
    { name: 'authorityKeyIdentifier', keyIdentifier: caCert.generateSubjectKeyIdentifier().getBytes() },
  ]);
  cert.sign(caKey, forge.md.sha256.create());
  return { certPem: forge.pki.certificateToPem(cert), keyPem: forge.pki.privateKeyToPem(keys.privateKey) };
}
