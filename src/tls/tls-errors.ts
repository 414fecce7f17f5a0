import { WardenError } from '../base/errors.js';

/** Base class for failures of the webhook's certificate management. */
export class TlsError extends WardenError {}

/** A service name, namespace or extra host that cannot go into a certificate's SANs. */
export class ServingNameError extends TlsError {}

/** Reading or writing the certificate store failed (I/O or the Kubernetes API); `cause` has the detail. */
export class CertStoreError extends TlsError {}

/**
 * The store changed since it was read (another replica or process wrote first). Nothing of ours was
 * written; the caller reads again and decides again.
 */
export class CertStoreConflictError extends TlsError {}

/** The keeper's settings cannot work, or it could not settle on a bundle within its attempts. */
export class CertKeeperError extends TlsError {}

/** Reading or updating the webhook configuration's caBundle failed; `cause` has the API error. */
export class CaBundlePatchError extends TlsError {}
