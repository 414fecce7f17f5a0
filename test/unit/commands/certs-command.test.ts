import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { EXIT_OK, EXIT_USAGE, runCli } from '../../../src/commands/cli.js';
import { certsCommand } from '../../../src/commands/certs-command.js';
import { SETTINGS, settingsOf } from '../../../src/config/settings.js';
import { certificatesIn } from '../../support/tls-helpers.js';

describe('vgpu-warden certs', function () {
  this.timeout(30_000);
  let root: string;
  let dir: string;

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'certs-command-'));
    dir = join(root, 'certs');
  });

  afterEach(() => {
    rmSync(root, { recursive: true, force: true });
  });

  async function run(args: string[], env: Record<string, string> = {}) {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(['certs', ...args], [certsCommand()], {
      env,
      stdout: (line) => out.push(line),
      stderr: (line) => err.push(line),
    });
    return { code, out, err };
  }

  it('writes a CA and a serving certificate for the default Service, one line per file', async () => {
    const { code, out, err } = await run(['--cert-dir', dir]);

    expect(code).to.equal(EXIT_OK);
    expect(err).to.deep.equal([]);
    expect(out).to.have.members(['ca.key', 'ca.crt', 'tls.key', 'tls.crt'].map((name) => `wrote ${join(dir, name)}`));
    const leaf = new X509Certificate(readFileSync(join(dir, 'tls.crt')));
    expect(leaf.subjectAltName).to.include(
      'DNS:vgpu-warden.vgpu-warden.svc, DNS:vgpu-warden.vgpu-warden.svc.cluster.local',
    );
    expect(leaf.checkIssued(new X509Certificate(readFileSync(join(dir, 'ca.crt'))))).to.equal(true);
  });

  it('leaves a valid set alone and says so', async () => {
    await run(['--cert-dir', dir]);
    const before = readFileSync(join(dir, 'tls.crt'), 'utf8');

    const { code, out } = await run(['--cert-dir', dir]);

    expect(code).to.equal(EXIT_OK);
    expect(out).to.have.length(1);
    expect(out[0]).to.match(
      new RegExp(
        `^${dir} already holds a valid set for vgpu-warden, .*127\\.0\\.0\\.1 \\(use --force for a new one\\)$`,
      ),
    );
    expect(readFileSync(join(dir, 'tls.crt'), 'utf8')).to.equal(before);
  });

  it('reissues the leaf for other names and hosts, keeping the CA', async () => {
    await run(['--cert-dir', dir]);
    const ca = readFileSync(join(dir, 'ca.crt'), 'utf8');

    const { code, out } = await run([
      '--cert-dir',
      dir,
      '--service-name',
      'gpu-hook',
      '--namespace',
      'gpu',
      '--host',
      '10.1.2.3',
      '--host',
      'hook.example.com',
    ]);

    expect(code).to.equal(EXIT_OK);
    expect(out).to.have.members([`wrote ${join(dir, 'tls.key')}`, `wrote ${join(dir, 'tls.crt')}`]);
    expect(readFileSync(join(dir, 'ca.crt'), 'utf8')).to.equal(ca);
    expect(new X509Certificate(readFileSync(join(dir, 'tls.crt'))).subjectAltName).to.equal(
      'DNS:gpu-hook, DNS:gpu-hook.gpu, DNS:gpu-hook.gpu.svc, DNS:gpu-hook.gpu.svc.cluster.local, DNS:localhost, ' +
        'IP Address:127.0.0.1, IP Address:10.1.2.3, DNS:hook.example.com',
    );
  });

  it('--force makes a new CA and keeps the old one as ca-previous.crt', async () => {
    await run(['--cert-dir', dir]);
    const oldCa = new X509Certificate(readFileSync(join(dir, 'ca.crt'))).fingerprint256;

    const { code, out } = await run(['--cert-dir', dir, '--force']);

    expect(code).to.equal(EXIT_OK);
    expect(out).to.have.members(
      ['ca-previous.crt', 'ca.key', 'ca.crt', 'tls.key', 'tls.crt'].map((name) => `wrote ${join(dir, name)}`),
    );
    expect(new X509Certificate(readFileSync(join(dir, 'ca.crt'))).fingerprint256).to.not.equal(oldCa);
    expect(certificatesIn(readFileSync(join(dir, 'ca-previous.crt'), 'utf8'))[0]?.fingerprint256).to.equal(oldCa);
  });

  it('takes the directory from CERT_DIR when no flag is given', async () => {
    const { code, out } = await run([], { CERT_DIR: dir });

    expect(code).to.equal(EXIT_OK);
    expect(out).to.include(`wrote ${join(dir, 'tls.crt')}`);
  });

  it('takes the Service, namespace, extra hosts and lifetimes from the environment like serve, adding --host', async () => {
    const env = {
      CERT_DIR: dir,
      SERVICE_NAME: 'hook',
      POD_NAMESPACE: 'gpu',
      CERT_HOSTS: '10.9.8.7',
      CERT_VALIDITY: '240h',
      CERT_RENEW_BEFORE: '24h',
    };
    const { code } = await run(['--host', 'extra.example.com'], env);

    expect(code).to.equal(EXIT_OK);
    const leaf = new X509Certificate(readFileSync(join(dir, 'tls.crt')));
    expect(leaf.subjectAltName).to.equal(
      'DNS:hook, DNS:hook.gpu, DNS:hook.gpu.svc, DNS:hook.gpu.svc.cluster.local, DNS:localhost, IP Address:127.0.0.1, ' +
        'IP Address:10.9.8.7, DNS:extra.example.com',
    );
    const days = (cert: X509Certificate) =>
      Math.round((cert.validToDate.getTime() - cert.validFromDate.getTime()) / 86_400_000);
    expect(days(leaf)).to.equal(10);
    expect(days(new X509Certificate(readFileSync(join(dir, 'ca.crt'))))).to.equal(100);
  });

  it('refuses a host that cannot be a SAN with exit code 2 and one line', async () => {
    const { code, out, err } = await run(['--cert-dir', dir, '--host', 'not a host']);

    expect(code).to.equal(EXIT_USAGE);
    expect(out).to.deep.equal([]);
    expect(err).to.deep.equal(['vgpu-warden: invalid host "not a host": expected a DNS name or an IP address']);
  });

  it('is not stopped by settings it does not use (listeners, sweeper, cluster)', async () => {
    const { code, err } = await run(['--cert-dir', dir], {
      WEBHOOK_PORT: 'not-a-port',
      SWEEP_SCHEDULE: 'whenever',
      EXTENDER_HOST: '0.0.0.0',
      KUBECONFIG: '/nonexistent',
    });

    expect(err).to.deep.equal([]);
    expect(code).to.equal(EXIT_OK);
  });

  it('is stopped by a bad setting it uses, named with its source', async () => {
    const { code, err } = await run(['--cert-dir', dir], { CERT_VALIDITY: '24h' });

    expect(code).to.equal(EXIT_USAGE);
    expect(err).to.deep.equal([
      'vgpu-warden: CERT_VALIDITY (env) = 24h must be longer than CERT_RENEW_BEFORE (default 720h), or every certificate would be renewed at once; raise it or set CERT_RENEW_BEFORE',
    ]);
  });

  it('declares every setting its flags set', () => {
    const command = certsCommand();
    const used = new Set<string>(settingsOf(command.settings ?? []));
    const flagged = SETTINGS.filter((spec) => spec.flag in command.flags).map((spec) => spec.key);
    expect(flagged.filter((key) => !used.has(key))).to.deep.equal([]);
  });
});
