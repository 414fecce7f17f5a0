import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';

const script = resolve(import.meta.dirname, '..', '..', '..', 'tools', 'k8s', 'build.sh');
const versions = Object.fromEntries(
  readFileSync(resolve(script, '..', 'versions.env'), 'utf8')
    .split('\n')
    .filter((line) => /^[A-Z_]+=/.test(line))
    .map((line) => {
      const at = line.indexOf('=');
      return [line.slice(0, at), line.slice(at + 1).replace(/^"|"$/g, '')] as [string, string];
    }),
);
const buildKey = `kube-${versions.KUBERNETES_VERSION ?? ''}_etcd-${versions.ETCD_VERSION ?? ''}`;

function run(args: string[], env: Record<string, string>) {
  const result = spawnSync('/bin/bash', [script, ...args], { encoding: 'utf8', env: { HOME: tmpdir(), ...env } });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

// Only the cheap paths of the script run here; the real build is exercised by every integration run.
describe('tools/k8s/build.sh', () => {
  let cache: string;
  beforeEach(() => {
    cache = mkdtempSync(join(tmpdir(), 'k8s-cache-'));
  });
  afterEach(() => {
    rmSync(cache, { recursive: true, force: true });
  });

  it('pins the versions in versions.env: the main suite on the newest claimed, the compatibility suite on the oldest and newest', () => {
    expect(versions.KUBERNETES_VERSION).to.match(/^v1\.37\.\d+$/);
    expect(versions.ETCD_VERSION).to.match(/^v3\.6\.\d+$/);
    const compat = (versions.KUBERNETES_COMPAT_VERSIONS ?? '').split(' ');
    expect(compat).to.have.length(2);
    expect(compat[0]).to.match(/^v1\.30\.\d+$/);
    expect(compat[1]).to.equal(versions.KUBERNETES_VERSION);
  });

  it('prints the bin directory of another version under VGPU_WARDEN_KUBERNETES_VERSION, and each compatibility version with --compat', () => {
    const other = run(['--print-bin-dir'], {
      PATH: '/usr/bin:/bin',
      VGPU_WARDEN_K8S_CACHE: cache,
      VGPU_WARDEN_KUBERNETES_VERSION: 'v1.30.14',
    });
    expect(other.code).to.equal(0);
    expect(other.stdout.trim()).to.equal(join(cache, `kube-v1.30.14_etcd-${versions.ETCD_VERSION ?? ''}`, 'bin'));
    const compat = run(['--compat', '--print-bin-dir'], { PATH: '/usr/bin:/bin', VGPU_WARDEN_K8S_CACHE: cache });
    expect(compat.code).to.equal(0);
    expect(compat.stdout.trim().split('\n')).to.deep.equal(
      (versions.KUBERNETES_COMPAT_VERSIONS ?? '')
        .split(' ')
        .map((version) => join(cache, `kube-${version}_etcd-${versions.ETCD_VERSION ?? ''}`, 'bin')),
    );
  });

  it('refuses a malformed VGPU_WARDEN_KUBERNETES_VERSION with exit code 2, echoing at most 40 characters', () => {
    const { code, stderr } = run(['--print-bin-dir'], {
      PATH: '/usr/bin:/bin',
      VGPU_WARDEN_K8S_CACHE: cache,
      VGPU_WARDEN_KUBERNETES_VERSION: `1.30;${'x'.repeat(200)}`,
    });
    expect(code).to.equal(2);
    expect(stderr).to.include('VGPU_WARDEN_KUBERNETES_VERSION must look like v1.37.2');
    expect(stderr.length).to.be.below(160);
  });

  it('prints the versioned bin directory under VGPU_WARDEN_K8S_CACHE', () => {
    const { code, stdout } = run(['--print-bin-dir'], { PATH: '/usr/bin:/bin', VGPU_WARDEN_K8S_CACHE: cache });
    expect(code).to.equal(0);
    expect(stdout.trim()).to.equal(join(cache, buildKey, 'bin'));
  });

  it('skips the build when binaries of the pinned versions are cached', () => {
    const bin = join(cache, buildKey, 'bin');
    mkdirSync(bin, { recursive: true });
    for (const name of ['kube-apiserver', 'kube-scheduler', 'kube-controller-manager', 'kubelet', 'etcd']) {
      writeFileSync(join(bin, name), '#!/bin/sh\n');
      chmodSync(join(bin, name), 0o755);
    }
    writeFileSync(join(cache, buildKey, '.complete'), `${buildKey}\n`);
    // No Go on PATH: proof that nothing is built.
    const { code, stdout } = run([], { PATH: '/usr/bin:/bin', VGPU_WARDEN_K8S_CACHE: cache });
    expect(code).to.equal(0);
    expect(stdout.trim().split('\n')).to.deep.equal([`[k8s-build] cached: ${bin} (${buildKey})`]);
  });

  it('fails with a clear message when Go is missing and nothing is cached', () => {
    const { code, stderr } = run([], { PATH: '/usr/bin:/bin', VGPU_WARDEN_K8S_CACHE: cache });
    expect(code).to.equal(1);
    expect(stderr).to.include('Go is not installed or not on PATH');
  });

  it('refuses unknown arguments with exit code 2', () => {
    const { code, stderr } = run(['--fast'], { PATH: '/usr/bin:/bin', VGPU_WARDEN_K8S_CACHE: cache });
    expect(code).to.equal(2);
    expect(stderr).to.include("unknown argument '--fast'");
    expect(stderr).to.include('allowed: --print-bin-dir, --compat');
  });
});
