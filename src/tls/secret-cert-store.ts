import type { CoreV1Api, V1Secret } from '@kubernetes/client-node';
import { apiStatusOf, httpStatusOf, isConflict, isNotFound } from '../kube/errors.js';
import type { CertBundle } from './cert-bundle.js';
import type { CertStore, StoredBundle } from './cert-store.js';
import { CERT_FILES } from './file-cert-store.js';
import { CertStoreConflictError, CertStoreError } from './tls-errors.js';

export interface SecretCertStoreOptions {
  core: CoreV1Api;
  namespace: string;
  name: string;
  /** Labels for a Secret this store creates; an existing Secret keeps its own. */
  labels?: Record<string, string>;
}

/** How a value maps onto a Secret's `data` (base64 values). */
export interface SecretLayout<T> {
  /** The keys this layout owns: a save rewrites them (and drops those the value leaves out); other keys stay. */
  keys: readonly string[];
  toData(value: T): Record<string, string>;
  /** Absent keys must come back as something the caller's policy judges (empty strings), not as a throw. */
  fromData(data: Record<string, string> | undefined): T;
}

export interface SecretStoreOptions<T> extends SecretCertStoreOptions {
  layout: SecretLayout<T>;
}

const TLS_SECRET_TYPE = 'kubernetes.io/tls';

function decode(data: Record<string, string> | undefined, key: string): string | undefined {
  const value = data?.[key];
  return value === undefined ? undefined : Buffer.from(value, 'base64').toString('utf8');
}

/** The bundle in a Secret's `data` (base64 values); absent keys become empty strings, for the policy to judge. */
export function bundleFromSecretData(data: Record<string, string> | undefined): CertBundle {
  const bundle: CertBundle = {
    caCertPem: decode(data, CERT_FILES.caCertPem) ?? '',
    caKeyPem: decode(data, CERT_FILES.caKeyPem) ?? '',
    certPem: decode(data, CERT_FILES.certPem) ?? '',
    keyPem: decode(data, CERT_FILES.keyPem) ?? '',
  };
  const previous = decode(data, CERT_FILES.previousCaCertPem);
  if (previous !== undefined && previous !== '') bundle.previousCaCertPem = previous;
  return bundle;
}

/** A Secret's `data` for the bundle: the kubernetes.io/tls keys plus ca.key and, during a rotation, ca-previous.crt. */
export function secretDataOf(bundle: CertBundle): Record<string, string> {
  const encode = (pem: string) => Buffer.from(pem, 'utf8').toString('base64');
  const data: Record<string, string> = {
    [CERT_FILES.certPem]: encode(bundle.certPem),
    [CERT_FILES.keyPem]: encode(bundle.keyPem),
    [CERT_FILES.caCertPem]: encode(bundle.caCertPem),
    [CERT_FILES.caKeyPem]: encode(bundle.caKeyPem),
  };
  if (bundle.previousCaCertPem !== undefined && bundle.previousCaCertPem !== '') {
    data[CERT_FILES.previousCaCertPem] = encode(bundle.previousCaCertPem);
  }
  return data;
}

/** The webhook's CA and serving certificate: the kubernetes.io/tls keys plus ca.key and ca-previous.crt. */
export const CERT_BUNDLE_LAYOUT: SecretLayout<CertBundle> = {
  keys: Object.values(CERT_FILES),
  toData: secretDataOf,
  fromData: bundleFromSecretData,
};

/**
 * A value kept in one `kubernetes.io/tls` Secret shared by all replicas, laid out by `layout`. The
 * first save creates it, and a create that loses the race gets 409; later saves replace it carrying
 * the resourceVersion that was read, so a replica that decided on an old state gets 409 too. Both
 * surface as CertStoreConflictError: the caller reads the winner's value and adopts it, which is how
 * replicas never keep two different CAs (or client certificates) alive.
 */
export class SecretStore<T> implements CertStore<T> {
  readonly description: string;

  constructor(private readonly options: SecretStoreOptions<T>) {
    this.description = `secret ${options.namespace}/${options.name}`;
  }

  async load(): Promise<StoredBundle<T> | undefined> {
    const secret = await this.read();
    return secret === undefined ? undefined : this.stored(secret, this.options.layout.fromData(secret.data));
  }

  async save(bundle: T, expected: StoredBundle<T> | undefined): Promise<StoredBundle<T>> {
    return expected === undefined ? this.create(bundle) : this.replace(bundle, expected.version);
  }

  private stored(secret: V1Secret, fallback: T): StoredBundle<T> {
    return {
      bundle: secret.data === undefined ? fallback : this.options.layout.fromData(secret.data),
      version: secret.metadata?.resourceVersion ?? '',
    };
  }

  private async read(): Promise<V1Secret | undefined> {
    const { core, namespace, name } = this.options;
    try {
      return await core.readNamespacedSecret({ name, namespace });
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw this.failure('read', error);
    }
  }

  private async create(bundle: T): Promise<StoredBundle<T>> {
    const { core, namespace, name, labels, layout } = this.options;
    const body: V1Secret = {
      metadata: { name, namespace, ...(labels ? { labels } : {}) },
      type: TLS_SECRET_TYPE,
      data: layout.toData(bundle),
    };
    try {
      return this.stored(await core.createNamespacedSecret({ namespace, body }), bundle);
    } catch (error) {
      if (isConflict(error)) {
        throw new CertStoreConflictError(`${this.description} was created by someone else first`, { cause: error });
      }
      throw this.failure('create', error);
    }
  }

  private async replace(bundle: T, version: string): Promise<StoredBundle<T>> {
    const { core, namespace, name, layout } = this.options;
    // Read-modify-replace keeps what others put on the Secret (labels, annotations, other keys,
    // its type, which is immutable); the resourceVersion makes the replace fail if it moved on.
    const current = await this.read();
    if (current === undefined) throw new CertStoreConflictError(`${this.description} was deleted since it was read`);
    if (current.metadata?.resourceVersion !== version) {
      throw new CertStoreConflictError(`${this.description} changed since it was read`);
    }
    // Other keys stay; ours are all rewritten, and one the value leaves out (ca-previous.crt) goes.
    const others = Object.entries(current.data ?? {}).filter(([key]) => !layout.keys.includes(key));
    current.data = { ...Object.fromEntries(others), ...layout.toData(bundle) };
    (current.metadata ??= {}).resourceVersion = version;
    try {
      return this.stored(await core.replaceNamespacedSecret({ name, namespace, body: current }), bundle);
    } catch (error) {
      const status = httpStatusOf(error);
      if (status === 409 || status === 404) {
        throw new CertStoreConflictError(`${this.description} changed since it was read`, { cause: error });
      }
      throw this.failure('replace', error);
    }
  }

  private failure(verb: string, error: unknown): CertStoreError {
    const status = httpStatusOf(error);
    const detail = apiStatusOf(error)?.message ?? (error instanceof Error ? error.message : String(error));
    return new CertStoreError(
      `cannot ${verb} ${this.description}${status === undefined ? '' : ` (HTTP ${status})`}: ${detail}`,
      { cause: error },
    );
  }
}

/** CertStore of the webhook's CA and serving certificate in one Secret (see CERT_BUNDLE_LAYOUT). */
export class SecretCertStore extends SecretStore<CertBundle> {
  constructor(options: SecretCertStoreOptions) {
    super({ ...options, layout: CERT_BUNDLE_LAYOUT });
  }
}
