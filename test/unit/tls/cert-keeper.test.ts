import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { expect } from 'chai';
import type { ServingMaterial } from '../../../src/tls/cert-bundle.js';
import { CertKeeper, type CertKeeperDeps } from '../../../src/tls/cert-keeper.js';
import type { CertStore } from '../../../src/tls/cert-store.js';
import { FileCertStore } from '../../../src/tls/file-cert-store.js';
import { servingNames } from '../../../src/tls/serving-names.js';
import { CertKeeperError } from '../../../src/tls/tls-errors.js';
import {
  certificatesIn,
  fingerprintsOf,
  HookedStore,
  ManualClock,
  RecordingTarget,
} from '../../support/tls-helpers.js';

const DAY = 86_400_000;
const NAMES = servingNames({ serviceName: 'vgpu-warden', namespace: 'kube-system', extraHosts: ['10.0.0.7'] });
const RETENTION_MS = 60_000;

const notAfter = (pem: string): number => new X509Certificate(pem).validToDate.getTime();
const fingerprint = (pem: string): string => new X509Certificate(pem).fingerprint256;

function signedBy(material: ServingMaterial, caPem: string): boolean {
  const leaf = new X509Certificate(material.certPem);
  const ca = new X509Certificate(caPem);
  return leaf.checkIssued(ca) && leaf.verify(ca.publicKey);
}

describe('CertKeeper', function () {
  // Every new CA or leaf is an RSA key generation: a fraction of a second each.
  this.timeout(30_000);

  let dir: string;
  let clock: ManualClock;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'cert-keeper-'));
    clock = new ManualClock(new Date());
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  /** A keeper over a FileCertStore in the test's directory, recording everything it does in order. */
  function harness(overrides: Partial<CertKeeperDeps> & { wrap?: (store: CertStore) => CertStore } = {}) {
    const events: string[] = [];
    const files: string[] = [];
    const materials: ServingMaterial[] = [];
    const logs: string[] = [];
    const fileStore = new FileCertStore({
      dir,
      onFileChange: ({ path, action }) => files.push(`${action} ${basename(path)}`),
    });
    const target = new RecordingTarget(events);
    const { wrap, ...deps } = overrides;
    const keeper = new CertKeeper({
      store: wrap ? wrap(fileStore) : fileStore,
      names: NAMES,
      validityDays: 30,
      caValidityDays: 365,
      renewBeforeMs: 7 * DAY,
      clock: clock.read,
      caBundleTarget: target,
      propagationDelayMs: 2000,
      previousCaRetentionMs: RETENTION_MS,
      sleep: (ms) => {
        events.push(`sleep ${ms}`);
        return Promise.resolve();
      },
      onChange: (material) => {
        events.push('onChange');
        materials.push(material);
      },
      log: (line) => logs.push(line),
      ...deps,
    });
    const reset = () => {
      events.length = 0;
      files.length = 0;
    };
    return { keeper, events, files, materials, logs, target, reset };
  }

  it('first ensure creates a CA and a serving certificate, applies the caBundle, then hands them out', async () => {
    const { keeper, events, files, materials, target } = harness();

    const material = await keeper.ensure();

    expect(files).to.have.members(['written ca.crt', 'written ca.key', 'written tls.crt', 'written tls.key']);
    expect(events).to.deep.equal(['apply updated (1 CAs)', 'onChange']);
    expect(materials).to.deep.equal([material]);
    expect(keeper.current()).to.deep.equal(material);
    const [ca, ...others] = certificatesIn(material.caBundlePem);
    expect(others).to.have.length(0);
    expect(ca?.ca).to.equal(true);
    expect(material.caBundlePem).to.equal(readFileSync(join(dir, 'ca.crt'), 'utf8'));
    expect(target.caBundlePem).to.equal(material.caBundlePem);
    expect(signedBy(material, material.caBundlePem)).to.equal(true);
    expect(new X509Certificate(material.certPem).subjectAltName).to.equal(
      'DNS:vgpu-warden, DNS:vgpu-warden.kube-system, DNS:vgpu-warden.kube-system.svc, DNS:vgpu-warden.kube-system.svc.cluster.local, ' +
        'DNS:localhost, IP Address:127.0.0.1, IP Address:10.0.0.7',
    );
  });

  it('runs onSettled after every round with the stored bundle, CA key included, after handing out; its failure fails the round', async () => {
    const settled: string[] = [];
    let fail = false;
    const { keeper, events } = harness({
      onSettled: (bundle) => {
        events.push('onSettled');
        settled.push(bundle.caKeyPem);
        return fail ? Promise.reject(new Error('client certificate not published')) : Promise.resolve();
      },
    });
    await keeper.ensure();
    expect(events).to.deep.equal(['apply updated (1 CAs)', 'onChange', 'onSettled']);
    expect(settled[0]).to.equal(readFileSync(join(dir, 'ca.key'), 'utf8'));
    await keeper.ensure();
    expect(settled).to.have.length(2);
    fail = true;
    const error = await keeper.ensure().then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect((error as Error).message).to.equal('client certificate not published');
  });

  it('names each CA by its time of issue, in characters Go accepts in a PrintableString', async () => {
    clock.now = new Date('2031-03-01T12:34:56.789Z');
    const { keeper } = harness({ names: ['*.wild.example', ...NAMES] });

    const material = await keeper.ensure();

    // Go refuses a caBundle with "@" (and anything else outside PrintableString) in a subject.
    expect(certificatesIn(material.caBundlePem)[0]?.subject).to.equal('CN=vgpu-warden-ca 2031-03-01T12:34:56Z');
    expect(new X509Certificate(material.certPem).subject).to.equal('CN=vgpu-warden');
  });

  it('a second ensure reuses the stored set: no writes, no onChange, the caBundle left as it is', async () => {
    const { keeper, events, files, materials, target, reset } = harness();
    const first = await keeper.ensure();
    reset();

    const second = await keeper.ensure();

    expect(second).to.deep.equal(first);
    expect(files).to.deep.equal([]);
    expect(events).to.deep.equal(['apply unchanged (1 CAs)']);
    expect(materials).to.have.length(1);
    expect(target.writes).to.equal(1);
  });

  it('a restarted keeper serves the stored set as it is', async () => {
    const first = await harness().keeper.ensure();
    const { keeper, files, materials } = harness();

    expect(await keeper.ensure()).to.deep.equal(first);
    expect(files).to.deep.equal([]);
    expect(materials).to.deep.equal([first]);
  });

  it('a leaf inside its renewal window is renewed alone under the same CA, served without waiting', async () => {
    const { keeper, events, files, materials, target, reset } = harness();
    const first = await keeper.ensure();
    const caKeyBefore = readFileSync(join(dir, 'ca.key'), 'utf8');
    reset();
    clock.now = new Date(notAfter(first.certPem) - 3 * DAY);

    const renewed = await keeper.ensure();

    expect(files).to.have.members(['written tls.crt', 'written tls.key']);
    expect(renewed.caBundlePem).to.equal(first.caBundlePem);
    expect(readFileSync(join(dir, 'ca.key'), 'utf8')).to.equal(caKeyBefore);
    expect(renewed.certPem).to.not.equal(first.certPem);
    expect(signedBy(renewed, first.caBundlePem)).to.equal(true);
    expect(notAfter(renewed.certPem)).to.be.greaterThan(notAfter(first.certPem));
    // The identical caBundle is applied again (repairing drift) but changes nothing, and nothing waits.
    expect(events).to.deep.equal(['apply unchanged (1 CAs)', 'onChange']);
    expect(target.writes).to.equal(1);
    expect(materials.at(-1)).to.deep.equal(renewed);
  });

  it("rotateNow('all') applies [new CA, old CA] before waiting, hands out the new leaf only after, and a later ensure drops the old CA", async () => {
    const { keeper, events, files, materials, target, reset } = harness();
    const first = await keeper.ensure();
    const oldCa = fingerprint(first.caBundlePem);
    reset();

    const rotated = await keeper.rotateNow('all');

    expect(events).to.deep.equal(['apply updated (2 CAs)', 'sleep 2000', 'onChange']);
    const [newCa, previous] = fingerprintsOf(rotated.caBundlePem);
    expect(newCa).to.not.equal(oldCa);
    expect(previous).to.equal(oldCa);
    expect(fingerprintsOf(target.caBundlePem ?? '')).to.deep.equal([newCa, oldCa]);
    expect(signedBy(rotated, rotated.caBundlePem)).to.equal(true);
    expect(files).to.have.members([
      'written ca-previous.crt',
      'written ca.key',
      'written ca.crt',
      'written tls.key',
      'written tls.crt',
    ]);
    expect(materials.at(-1)).to.deep.equal(rotated);

    // Within the retention the old CA stays.
    reset();
    clock.advance(RETENTION_MS / 2);
    expect(await keeper.ensure()).to.deep.equal(rotated);
    expect(events).to.deep.equal(['apply unchanged (2 CAs)']);

    // Past it, the next ensure drops it: same leaf, caBundle down to the new CA, nothing to wait for.
    reset();
    clock.advance(RETENTION_MS);
    const settled = await keeper.ensure();
    expect(fingerprintsOf(settled.caBundlePem)).to.deep.equal([newCa]);
    expect(settled.certPem).to.equal(rotated.certPem);
    expect(events).to.deep.equal(['apply updated (1 CAs)', 'onChange']);
    expect(files).to.deep.equal(['removed ca-previous.crt']);
    expect(fingerprintsOf(target.caBundlePem ?? '')).to.deep.equal([newCa]);
  });

  it("rotateNow('leaf') renews the leaf alone", async () => {
    const { keeper, events, files, reset } = harness();
    const first = await keeper.ensure();
    reset();

    const rotated = await keeper.rotateNow('leaf');

    expect(rotated.caBundlePem).to.equal(first.caBundlePem);
    expect(rotated.certPem).to.not.equal(first.certPem);
    expect(files).to.have.members(['written tls.crt', 'written tls.key']);
    expect(events).to.deep.equal(['apply unchanged (1 CAs)', 'onChange']);
  });

  it('an expired CA is replaced without being kept as the previous CA', async () => {
    const { keeper, events, reset } = harness();
    const first = await keeper.ensure();
    reset();
    clock.now = new Date(notAfter(first.caBundlePem) + 1000);

    const renewed = await keeper.ensure();

    expect(certificatesIn(renewed.caBundlePem)).to.have.length(1);
    expect(fingerprint(renewed.caBundlePem)).to.not.equal(fingerprint(first.caBundlePem));
    expect(events).to.deep.equal(['apply updated (1 CAs)', 'sleep 2000', 'onChange']);
  });

  it('renews the leaf alone when the wanted names change', async () => {
    const first = await harness().keeper.ensure();
    const { keeper, files, logs } = harness({ names: [...NAMES, 'webhook.example.com'] });

    const renewed = await keeper.ensure();

    expect(files).to.have.members(['written tls.crt', 'written tls.key']);
    expect(renewed.caBundlePem).to.equal(first.caBundlePem);
    expect(new X509Certificate(renewed.certPem).subjectAltName).to.include('DNS:webhook.example.com');
    expect(logs).to.deep.equal([
      "certificates: new serving certificate (names-changed: the leaf's SANs differ from the wanted names: missing webhook.example.com) " +
        `(directory ${dir})`,
      // This harness has a fresh target, standing for a webhook configuration that never had the CA.
      'certificates: caBundle updated',
    ]);
  });

  it('never issues a leaf that outlives its CA', async () => {
    const first = await harness().keeper.ensure();
    const caEnd = notAfter(first.caBundlePem);
    // 20 days before the CA ends: outside its 7-day renewal window, but shorter than a 30-day leaf.
    clock.now = new Date(caEnd - 20 * DAY);
    const { keeper, files } = harness();

    const renewed = await keeper.ensure();

    expect(files).to.have.members(['written tls.crt', 'written tls.key']);
    expect(notAfter(renewed.certPem)).to.be.at.most(caEnd);
    expect(notAfter(renewed.certPem)).to.be.greaterThan(clock.now.getTime() + 19 * DAY);
  });

  it("adopts the winner's set when its save loses to another writer", async () => {
    const other = harness({ caBundleTarget: undefined, onChange: undefined });
    let hooked: HookedStore | undefined;
    const { keeper, materials } = harness({
      wrap: (store) =>
        (hooked = new HookedStore(store, {
          beforeSave: async (call) => {
            if (call === 1) await other.keeper.ensure();
          },
        })),
    });

    const adopted = await keeper.ensure();

    expect(hooked?.conflicts).to.equal(1);
    expect(hooked?.saves).to.equal(1);
    expect(adopted).to.deep.equal(other.keeper.current());
    expect(materials).to.deep.equal([adopted]);
  });

  it('applies again when another replica rotates while it applies, so the target ends with the stored CAs', async () => {
    const other = harness({ caBundleTarget: undefined, onChange: undefined });
    const original = await other.keeper.ensure();
    const events: string[] = [];
    const target = new RecordingTarget(events, async (call) => {
      if (call === 1) await other.keeper.rotateNow('all');
    });
    const { keeper, logs } = harness({ caBundleTarget: target });

    const material = await keeper.ensure();

    const rotated = other.keeper.current();
    expect(material).to.deep.equal(rotated);
    expect(fingerprintsOf(target.caBundlePem ?? '')).to.deep.equal(fingerprintsOf(rotated?.caBundlePem ?? ''));
    expect(fingerprintsOf(material.caBundlePem)[1]).to.equal(fingerprint(original.caBundlePem));
    expect(events).to.deep.equal(['apply updated (1 CAs)', 'apply updated (2 CAs)']);
    expect(logs.some((line) => line.includes('changed while applying the caBundle'))).to.equal(true);
  });

  it('a forced rotation that loses to a concurrent rotation does not rotate a second time', async () => {
    const other = harness({ caBundleTarget: undefined, onChange: undefined });
    const original = await other.keeper.ensure();
    let hooked: HookedStore | undefined;
    const { keeper } = harness({
      wrap: (store) =>
        (hooked = new HookedStore(store, {
          beforeSave: async (call) => {
            if (call === 1) await other.keeper.rotateNow('all');
          },
        })),
    });

    const material = await keeper.rotateNow('all');

    expect(hooked?.conflicts).to.equal(1);
    expect(material).to.deep.equal(other.keeper.current());
    // Still [their new CA, the original]: a second rotation would have pushed the original out.
    expect(fingerprintsOf(material.caBundlePem)[1]).to.equal(fingerprint(original.caBundlePem));
  });

  it('runs ensure and rotateNow one at a time', async () => {
    let hooked: HookedStore | undefined;
    const { keeper } = harness({ wrap: (store) => (hooked = new HookedStore(store)) });

    const [ensured, rotated] = await Promise.all([keeper.ensure(), keeper.rotateNow('all')]);

    expect(hooked?.conflicts).to.equal(0);
    expect(fingerprintsOf(rotated.caBundlePem)[1]).to.equal(fingerprint(ensured.caBundlePem));
  });

  it('retries a throwing onChange on the next ensure, not marking the material as served', async () => {
    let calls = 0;
    const { keeper } = harness({
      onChange: () => {
        calls++;
        if (calls === 1) throw new Error('server refused the certificate');
      },
    });

    const failed = await keeper.ensure().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect((failed as Error).message).to.equal('server refused the certificate');
    expect(keeper.current()).to.equal(undefined);
    const material = await keeper.ensure();
    expect(calls).to.equal(2);
    expect(keeper.current()).to.deep.equal(material);
  });

  it('keeps the previous CA for twice the start() interval by default', async () => {
    const { keeper } = harness({ previousCaRetentionMs: undefined });
    await keeper.ensure();
    keeper.start(3_600_000);
    try {
      await keeper.rotateNow('all');
      clock.advance(2 * 3_600_000 - 1000);
      expect(certificatesIn((await keeper.ensure()).caBundlePem)).to.have.length(2);
      clock.advance(1000);
      expect(certificatesIn((await keeper.ensure()).caBundlePem)).to.have.length(1);
    } finally {
      await keeper.stop();
    }
  });

  it('start() runs ensure periodically, logs failures without stopping, and stop() ends it', async () => {
    let hooked: HookedStore | undefined;
    const { keeper, logs } = harness({
      caBundleTarget: undefined,
      wrap: (store) =>
        (hooked = new HookedStore(store, {
          afterLoad: (call) => (call === 2 ? Promise.reject(new Error('disk on fire')) : Promise.resolve()),
        })),
    });
    await keeper.ensure();

    keeper.start(10);
    const deadline = Date.now() + 5000;
    while ((hooked?.loads ?? 0) < 5 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    await keeper.stop();
    const loadsAtStop = hooked?.loads ?? 0;
    await new Promise((resolve) => setTimeout(resolve, 50));

    expect(loadsAtStop).to.be.at.least(5);
    expect(hooked?.loads).to.equal(loadsAtStop);
    expect(logs.filter((line) => line.includes('check failed'))).to.have.length(1);
    expect(logs.find((line) => line.includes('check failed'))).to.include('disk on fire');
  });

  it('refuses settings that cannot work', () => {
    const store = new FileCertStore({ dir });
    const base = { store, names: NAMES, validityDays: 30, caValidityDays: 365, renewBeforeMs: 7 * DAY };
    expect(() => new CertKeeper({ ...base, renewBeforeMs: 30 * DAY })).to.throw(CertKeeperError, /renewBeforeMs/);
    expect(() => new CertKeeper({ ...base, caValidityDays: 5 })).to.throw(CertKeeperError, /renewBeforeMs/);
    expect(() => new CertKeeper({ ...base, names: [] })).to.throw(CertKeeperError, /at least one name/);
    expect(() => new CertKeeper({ ...base, validityDays: 0 })).to.throw(CertKeeperError, /positive/);
    expect(() => {
      new CertKeeper(base).start(0);
    }).to.throw(CertKeeperError, /interval/);
    expect(() => new CertKeeper({ ...base, caCommonName: 'ca@home' })).to.throw(
      CertKeeperError,
      /caCommonName "ca@home"/,
    );
    expect(() => new CertKeeper({ ...base, commonName: 'caf\u00e9' })).to.throw(CertKeeperError, /commonName/);
  });
});
