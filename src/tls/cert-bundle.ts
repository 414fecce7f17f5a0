/**
 * The webhook's TLS material as stored (CertBundle) and as served (ServingMaterial). Only types and
 * pure helpers: where bundles live is cert-store.ts, what to do with them is cert-policy.ts.
 */
export interface CertBundle {
  caCertPem: string;
  caKeyPem: string;
  /** The serving (leaf) certificate, signed by the CA. */
  certPem: string;
  keyPem: string;
  /**
   * The CA that was current before a CA rotation, kept in the caBundle until every replica serves a
   * leaf of the new CA (see CertKeeper), so the apiserver trusts both meanwhile.
   */
  previousCaCertPem?: string;
}

export interface ServingMaterial {
  certPem: string;
  keyPem: string;
  /** Current CA, then the previous CA while a rotation is under way; never the leaf. */
  caBundlePem: string;
}

// Concatenated PEMs must each end with a newline, or "-----END-----BEGIN" would glue two blocks.
function withNewline(pem: string): string {
  return pem.endsWith('\n') ? pem : `${pem}\n`;
}

/** What goes into the webhook configuration's caBundle (before base64): current CA, then previous. */
export function caBundleOf(bundle: CertBundle): string {
  const previous = bundle.previousCaCertPem;
  return withNewline(bundle.caCertPem) + (previous !== undefined && previous !== '' ? withNewline(previous) : '');
}

export function servingMaterialOf(bundle: CertBundle): ServingMaterial {
  return { certPem: bundle.certPem, keyPem: bundle.keyPem, caBundlePem: caBundleOf(bundle) };
}

export function sameBundle(a: CertBundle, b: CertBundle): boolean {
  return (
    a.caCertPem === b.caCertPem &&
    a.caKeyPem === b.caKeyPem &&
    a.certPem === b.certPem &&
    a.keyPem === b.keyPem &&
    (a.previousCaCertPem ?? '') === (b.previousCaCertPem ?? '')
  );
}

export function sameMaterial(a: ServingMaterial, b: ServingMaterial): boolean {
  return a.certPem === b.certPem && a.keyPem === b.keyPem && a.caBundlePem === b.caBundlePem;
}
