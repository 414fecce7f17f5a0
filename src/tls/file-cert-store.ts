import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { CertBundle } from './cert-bundle.js';
import type { CertStore, StoredBundle } from './cert-store.js';
import { CertStoreConflictError, CertStoreError } from './tls-errors.js';

/** File names inside the directory; the same keys as the Secret's data, so the two stores agree. */
export const CERT_FILES = {
  caCertPem: 'ca.crt',
  caKeyPem: 'ca.key',
  certPem: 'tls.crt',
  keyPem: 'tls.key',
  previousCaCertPem: 'ca-previous.crt',
} as const satisfies Record<keyof CertBundle, string>;

export const DEFAULT_CERT_DIR = 'webhook-certs';

const PRIVATE_FILES: ReadonlySet<string> = new Set([CERT_FILES.caKeyPem, CERT_FILES.keyPem]);

// Keys first, then the certificates that need them, the leaf last: a crash between two renames
// leaves a mismatched set, which cert-policy.ts sees (key mismatch, wrong issuer) and renews.
const WRITE_ORDER = [
  'previousCaCertPem',
  'caKeyPem',
  'caCertPem',
  'keyPem',
  'certPem',
] as const satisfies readonly (keyof CertBundle)[];

export interface FileChange {
  path: string;
  action: 'written' | 'removed';
}

export interface FileCertStoreOptions {
  /** Directory of the set; created (mode 0700) on the first save. */
  dir?: string;
  /** Told about every file written or removed, e.g. for the `certs` command's output. */
  onFileChange?: (change: FileChange) => void;
}

type FileContents = Record<keyof CertBundle, string | undefined>;

function isMissing(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === 'ENOENT';
}

function versionOf(contents: FileContents): string {
  const hash = createHash('sha256');
  for (const field of WRITE_ORDER) hash.update(`${field}:${contents[field] ?? '<none>'}\n`);
  return hash.digest('hex');
}

/**
 * CertStore in a local directory (ca.crt, ca.key, tls.crt, tls.key, optional ca-previous.crt) for
 * local runs and the `certs` command. Each file is replaced atomically (temp file, fsync, rename);
 * key files are 0600. The version is a hash of the contents, so a save notices a set changed by
 * another process since it was read (best effort: the check and the renames are not one step).
 */
export class FileCertStore implements CertStore {
  readonly dir: string;
  readonly description: string;

  constructor(private readonly options: FileCertStoreOptions = {}) {
    this.dir = options.dir ?? DEFAULT_CERT_DIR;
    this.description = `directory ${this.dir}`;
  }

  pathOf(field: keyof CertBundle): string {
    return join(this.dir, CERT_FILES[field]);
  }

  async load(): Promise<StoredBundle | undefined> {
    const contents = await this.readAll();
    const { caCertPem, caKeyPem, certPem, keyPem, previousCaCertPem } = contents;
    if ([caCertPem, caKeyPem, certPem, keyPem].every((value) => value === undefined)) return undefined;
    const bundle: CertBundle = {
      caCertPem: caCertPem ?? '',
      caKeyPem: caKeyPem ?? '',
      certPem: certPem ?? '',
      keyPem: keyPem ?? '',
    };
    if (previousCaCertPem !== undefined) bundle.previousCaCertPem = previousCaCertPem;
    return { bundle, version: versionOf(contents) };
  }

  async save(bundle: CertBundle, expected: StoredBundle | undefined): Promise<StoredBundle> {
    const before = await this.readAll();
    const current = Object.values(before).some((value) => value !== undefined) ? versionOf(before) : undefined;
    // A directory holding only ca-previous.crt loads as undefined, so it also matches "expected nothing".
    const loadsAsNothing = [before.caCertPem, before.caKeyPem, before.certPem, before.keyPem].every(
      (value) => value === undefined,
    );
    if (expected === undefined ? !loadsAsNothing : current !== expected.version) {
      throw new CertStoreConflictError(`${this.description} changed since it was read`);
    }
    try {
      await mkdir(this.dir, { recursive: true, mode: 0o700 });
    } catch (error) {
      throw new CertStoreError(`cannot create ${this.dir}`, { cause: error });
    }
    const after: FileContents = {
      ...bundle,
      previousCaCertPem: bundle.previousCaCertPem === '' ? undefined : bundle.previousCaCertPem,
    };
    for (const field of WRITE_ORDER) {
      const wanted = after[field];
      if (wanted === before[field]) continue;
      if (wanted === undefined) await this.remove(field);
      else await this.write(field, wanted);
    }
    const stored: CertBundle = {
      caCertPem: bundle.caCertPem,
      caKeyPem: bundle.caKeyPem,
      certPem: bundle.certPem,
      keyPem: bundle.keyPem,
    };
    if (after.previousCaCertPem !== undefined) stored.previousCaCertPem = after.previousCaCertPem;
    return { bundle: stored, version: versionOf(after) };
  }

  private async readAll(): Promise<FileContents> {
    const entries = await Promise.all(
      WRITE_ORDER.map(async (field) => {
        try {
          return [field, await readFile(this.pathOf(field), 'utf8')] as const;
        } catch (error) {
          if (isMissing(error)) return [field, undefined] as const;
          throw new CertStoreError(`cannot read ${this.pathOf(field)}`, { cause: error });
        }
      }),
    );
    return Object.fromEntries(entries) as FileContents;
  }

  private async write(field: keyof CertBundle, content: string): Promise<void> {
    const path = this.pathOf(field);
    const mode = PRIVATE_FILES.has(CERT_FILES[field]) ? 0o600 : 0o644;
    // Same directory as the target, so rename(2) replaces it atomically: readers see old or new, never half.
    const temp = join(this.dir, `.${CERT_FILES[field]}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      const handle = await open(temp, 'wx', mode);
      try {
        // open's mode is filtered by the umask; chmod makes it exact (a key never readable by others).
        await handle.chmod(mode);
        await handle.writeFile(content);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temp, path);
    } catch (error) {
      await unlink(temp).catch(() => undefined);
      throw new CertStoreError(`cannot write ${path}`, { cause: error });
    }
    this.options.onFileChange?.({ path, action: 'written' });
  }

  private async remove(field: keyof CertBundle): Promise<void> {
    const path = this.pathOf(field);
    try {
      await unlink(path);
    } catch (error) {
      if (isMissing(error)) return;
      throw new CertStoreError(`cannot remove ${path}`, { cause: error });
    }
    this.options.onFileChange?.({ path, action: 'removed' });
  }
}
