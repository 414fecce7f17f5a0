import type { CertBundle } from './cert-bundle.js';

/** A bundle as read from a store, with the version that a guarded save must still find there. */
export interface StoredBundle<T = CertBundle> {
  bundle: T;
  /** Opaque: a Secret's resourceVersion, a content hash for files. */
  version: string;
}

/**
 * Where the CA and serving certificate live between runs and are shared between replicas.
 * Incomplete sets load with empty strings in the missing fields, so that cert-policy.ts renews them
 * rather than the store guessing.
 */
export interface CertStore<T = CertBundle> {
  /** For logs, e.g. "secret kube-system/vgpu-warden-certs". */
  readonly description: string;
  /** The stored bundle, or undefined when nothing is stored yet. */
  load(): Promise<StoredBundle<T> | undefined>;
  /**
   * Writes `bundle` if the store still holds `expected` (undefined: if it still holds nothing) and
   * returns what is stored now. Throws CertStoreConflictError when someone else wrote first, having
   * written nothing itself; the caller loads again and decides again.
   */
  save(bundle: T, expected: StoredBundle<T> | undefined): Promise<StoredBundle<T>>;
}
