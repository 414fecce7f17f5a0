import { X509Certificate } from 'node:crypto';
import type { CertBundle } from '../../src/tls/cert-bundle.js';
import type { CertStore, StoredBundle } from '../../src/tls/cert-store.js';
import type { CaBundleTarget } from '../../src/tls/cert-keeper.js';
import { CertStoreConflictError } from '../../src/tls/tls-errors.js';

/** The certificates of a PEM bundle, in order. */
export function certificatesIn(pem: string): X509Certificate[] {
  return (pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map(
    (block) => new X509Certificate(block),
  );
}

/** Fingerprints of the certificates of a PEM bundle: short, comparable names for CAs in assertions. */
export function fingerprintsOf(pem: string): string[] {
  return certificatesIn(pem).map((cert) => cert.fingerprint256);
}

/** A clock the test moves by hand. */
export class ManualClock {
  constructor(public now: Date = new Date()) {}

  /** The clock to inject: milliseconds since the epoch. */
  readonly read = (): number => this.now.getTime();

  advance(ms: number): void {
    this.now = new Date(this.now.getTime() + ms);
  }
}

/**
 * A CaBundleTarget that behaves like CaBundlePatcher against one webhook configuration (writes only
 * when the bundle differs) and records each call into a shared event list, so tests can assert the
 * order of apply, sleep and onChange.
 */
export class RecordingTarget implements CaBundleTarget {
  caBundlePem: string | undefined;
  applies = 0;
  writes = 0;

  constructor(
    private readonly events: string[] = [],
    private readonly before?: (call: number) => Promise<void>,
  ) {}

  async apply(caBundlePem: string): Promise<{ outcome: 'updated' | 'unchanged' }> {
    this.applies++;
    await this.before?.(this.applies);
    const changed = caBundlePem !== this.caBundlePem;
    this.events.push(`apply ${changed ? 'updated' : 'unchanged'} (${certificatesIn(caBundlePem).length} CAs)`);
    if (!changed) return { outcome: 'unchanged' };
    this.caBundlePem = caBundlePem;
    this.writes++;
    return { outcome: 'updated' };
  }
}

export interface StoreHooks {
  /** Runs after the Nth load (1-based) read the store, before its result is returned. */
  afterLoad?: (call: number) => Promise<void>;
  /** Runs before the Nth save reaches the store. */
  beforeSave?: (call: number) => Promise<void>;
}

/**
 * A real CertStore with hooks around its calls, so a test can stage another writer's timing. Every
 * read and write still goes to the wrapped store; it also counts saves and conflicts.
 */
export class HookedStore implements CertStore {
  loads = 0;
  saves = 0;
  conflicts = 0;

  constructor(
    private readonly inner: CertStore,
    private readonly hooks: StoreHooks = {},
  ) {}

  get description(): string {
    return this.inner.description;
  }

  async load(): Promise<StoredBundle | undefined> {
    const call = ++this.loads;
    const loaded = await this.inner.load();
    await this.hooks.afterLoad?.(call);
    return loaded;
  }

  async save(bundle: CertBundle, expected: StoredBundle | undefined): Promise<StoredBundle> {
    const call = ++this.saves;
    await this.hooks.beforeSave?.(call);
    try {
      return await this.inner.save(bundle, expected);
    } catch (error) {
      if (error instanceof CertStoreConflictError) this.conflicts++;
      throw error;
    }
  }
}

/** Resolves once `count` callers have arrived: staging "both read before either wrote". */
export function barrier(count: number): () => Promise<void> {
  let arrived = 0;
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return () => {
    arrived++;
    if (arrived >= count) open();
    return opened;
  };
}
