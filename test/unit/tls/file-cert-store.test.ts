import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, mkdirSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type { CertBundle } from '../../../src/tls/cert-bundle.js';
import { assessBundle } from '../../../src/tls/cert-policy.js';
import { FileCertStore, type FileChange } from '../../../src/tls/file-cert-store.js';
import { CertStoreConflictError, CertStoreError } from '../../../src/tls/tls-errors.js';

// The store neither parses nor checks PEMs (cert-policy.ts does), so plain strings are enough here.
const BUNDLE: CertBundle = {
  caCertPem: 'ca cert\n',
  caKeyPem: 'ca key\n',
  certPem: 'leaf cert\n',
  keyPem: 'leaf key\n',
};
const modeOf = (path: string): number => statSync(path).mode & 0o777;

describe('FileCertStore', () => {
  let root: string;
  let dir: string;
  let changes: FileChange[];
  let store: FileCertStore;

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'file-cert-store-'));
    dir = join(root, 'certs');
    changes = [];
    store = new FileCertStore({ dir, onFileChange: (change) => changes.push(change) });
  });

  afterEach(() => {
    rmSync(root, { recursive: true, force: true });
  });

  const names = () => changes.map(({ path, action }) => `${action} ${path.slice(dir.length + 1)}`);

  it('loads nothing from a missing or empty directory', async () => {
    expect(await store.load()).to.equal(undefined);
    mkdirSync(dir);
    expect(await store.load()).to.equal(undefined);
  });

  it('defaults to webhook-certs/ and names itself after the directory', () => {
    const plain = new FileCertStore();
    expect(plain.dir).to.equal('webhook-certs');
    expect(plain.description).to.equal('directory webhook-certs');
  });

  it('writes the set into a 0700 directory, keys 0600 and certificates 0644, and reads it back', async () => {
    const saved = await store.save(BUNDLE, undefined);
    expect(modeOf(dir)).to.equal(0o700);
    expect(modeOf(join(dir, 'ca.key'))).to.equal(0o600);
    expect(modeOf(join(dir, 'tls.key'))).to.equal(0o600);
    expect(modeOf(join(dir, 'ca.crt'))).to.equal(0o644);
    expect(modeOf(join(dir, 'tls.crt'))).to.equal(0o644);
    expect(readFileSync(join(dir, 'tls.crt'), 'utf8')).to.equal('leaf cert\n');
    expect(names()).to.have.members(['written ca.crt', 'written ca.key', 'written tls.crt', 'written tls.key']);
    expect(await store.load()).to.deep.equal(saved);
    expect(saved.bundle).to.deep.equal(BUNDLE);
  });

  it('makes keys 0600 even when they existed with looser modes or the umask is strict', async () => {
    mkdirSync(dir);
    writeFileSync(join(dir, 'tls.key'), 'old key\n', { mode: 0o644 });
    const previousUmask = process.umask(0o077);
    try {
      await store.save(BUNDLE, await store.load());
    } finally {
      process.umask(previousUmask);
    }
    expect(modeOf(join(dir, 'tls.key'))).to.equal(0o600);
    expect(modeOf(join(dir, 'tls.crt'))).to.equal(0o644);
  });

  it('replaces files by rename: a reader of the old file keeps the old content whole, and no temp file is left', async () => {
    const first = await store.save(BUNDLE, undefined);
    const reader = await open(join(dir, 'tls.crt'), 'r');
    try {
      const inodeBefore = statSync(join(dir, 'tls.crt')).ino;
      await store.save({ ...BUNDLE, certPem: 'new leaf cert, longer than the old one\n' }, first);
      expect(statSync(join(dir, 'tls.crt')).ino).to.not.equal(inodeBefore);
      expect(await reader.readFile('utf8')).to.equal('leaf cert\n');
    } finally {
      await reader.close();
    }
    expect(readFileSync(join(dir, 'tls.crt'), 'utf8')).to.equal('new leaf cert, longer than the old one\n');
    expect(readdirSync(dir).sort()).to.deep.equal(['ca.crt', 'ca.key', 'tls.crt', 'tls.key']);
  });

  it('writes only the files that changed, and ca-previous.crt only while there is a previous CA', async () => {
    const first = await store.save(BUNDLE, undefined);
    changes = [];
    const rotated = await store.save(
      { ...BUNDLE, certPem: 'leaf 2\n', keyPem: 'key 2\n', previousCaCertPem: 'old ca\n' },
      first,
    );
    expect(names()).to.have.members(['written tls.crt', 'written tls.key', 'written ca-previous.crt']);
    expect(modeOf(join(dir, 'ca-previous.crt'))).to.equal(0o644);
    expect((await store.load())?.bundle.previousCaCertPem).to.equal('old ca\n');
    changes = [];
    await store.save({ ...rotated.bundle, previousCaCertPem: undefined }, rotated);
    expect(names()).to.deep.equal(['removed ca-previous.crt']);
    expect((await store.load())?.bundle).to.deep.equal({ ...BUNDLE, certPem: 'leaf 2\n', keyPem: 'key 2\n' });
  });

  it('loads a partial set with the missing parts empty, which the policy renews', async () => {
    mkdirSync(dir);
    writeFileSync(join(dir, 'ca.crt'), 'ca cert\n');
    const partial = await store.load();
    expect(partial?.bundle).to.deep.equal({ caCertPem: 'ca cert\n', caKeyPem: '', certPem: '', keyPem: '' });
    expect(assessBundle(partial?.bundle, { names: ['x'], now: new Date(), renewBeforeMs: 0 })).to.include({
      action: 'renew-all',
      reason: 'ca-missing',
    });

    rmSync(join(dir, 'ca.crt'));
    writeFileSync(join(dir, 'tls.crt'), 'leaf cert\n');
    writeFileSync(join(dir, 'tls.key'), 'leaf key\n');
    expect(assessBundle((await store.load())?.bundle, { names: ['x'], now: new Date(), renewBeforeMs: 0 })).to.include({
      action: 'renew-all',
      reason: 'ca-missing',
    });
  });

  it('a lone ca-previous.crt loads as nothing', async () => {
    mkdirSync(dir);
    writeFileSync(join(dir, 'ca-previous.crt'), 'old ca\n');
    expect(await store.load()).to.equal(undefined);
    await store.save(BUNDLE, undefined);
    expect((await store.load())?.bundle.previousCaCertPem).to.equal(undefined);
  });

  it('refuses to save over a set that changed since it was read, writing nothing', async () => {
    const first = await store.save(BUNDLE, undefined);
    const other = new FileCertStore({ dir });
    await other.save({ ...BUNDLE, certPem: 'theirs\n' }, first);
    changes = [];
    let error: unknown;
    try {
      await store.save({ ...BUNDLE, certPem: 'ours\n' }, first);
    } catch (caught) {
      error = caught;
    }
    expect(error).to.be.instanceOf(CertStoreConflictError);
    expect(changes).to.deep.equal([]);
    expect(readFileSync(join(dir, 'tls.crt'), 'utf8')).to.equal('theirs\n');
    // "Expected nothing" also conflicts once a set exists.
    const creating = await store.save(BUNDLE, undefined).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(creating).to.be.instanceOf(CertStoreConflictError);
  });

  it('reports I/O failures as CertStoreError naming the path', async () => {
    mkdirSync(join(dir, 'tls.crt'), { recursive: true });
    const unreadable = await store.load().then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(unreadable).to.be.instanceOf(CertStoreError);
    expect((unreadable as Error).message).to.equal(`cannot read ${join(dir, 'tls.crt')}`);

    writeFileSync(join(root, 'a-file'), '');
    const blocked = new FileCertStore({ dir: join(root, 'a-file', 'certs') });
    const uncreatable = await blocked.save(BUNDLE, undefined).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(uncreatable).to.be.instanceOf(CertStoreError);
    expect((uncreatable as Error).message).to.match(/^cannot (read|create) /);
  });
});
