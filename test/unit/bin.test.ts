import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import { MINIMUM_NODE_VERSION } from '../../src/base/node-version.js';

const root = resolve(import.meta.dirname, '..', '..');
const bin = resolve(root, 'src', 'bin.ts');

function staticImports(path: string): string[] {
  return [...readFileSync(path, 'utf8').matchAll(/^import\s[^;]*?from\s+'([^']+)'/gm)].map((match) => match[1] ?? '');
}

describe('the vgpu-warden bin', function () {
  this.timeout(60_000);
  let dir: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'bin-test-'));
  });

  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  function run(args: string[], pretendNode?: string) {
    const preload = join(dir, 'pretend-node.mjs');
    // process.versions is a plain data property: a preload can make this Node report an older version.
    writeFileSync(
      preload,
      `Object.defineProperty(process, 'versions', { value: { ...process.versions, node: ${JSON.stringify(pretendNode ?? process.versions.node)} } });\n`,
    );
    return spawnSync(process.execPath, ['--import', preload, '--import', 'tsx', bin, ...args], {
      cwd: root,
      encoding: 'utf8',
      timeout: 50_000,
    });
  }

  it('is the installed entry under both names, including the kubectl plugin name', () => {
    const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as { bin: Record<string, string> };
    expect(pkg.bin).to.deep.equal({ 'vgpu-warden': 'dist/bin.js', 'kubectl-vgpu_warden': 'dist/bin.js' });
    const build = JSON.parse(readFileSync(resolve(root, 'tsconfig.build.json'), 'utf8')) as {
      include: string[];
      compilerOptions: { rootDir: string; outDir: string };
    };
    expect(build.include).to.include('src/**/*.ts');
    expect(build.compilerOptions).to.deep.include({ rootDir: 'src', outDir: 'dist' });
    expect(readFileSync(bin, 'utf8').startsWith('#!/usr/bin/env node\n')).to.equal(true);
  });

  it('loads nothing but the dependency-free check before the version is known', () => {
    expect(staticImports(bin)).to.deep.equal(['./base/node-version.js']);
    expect(staticImports(resolve(root, 'src', 'base', 'node-version.ts'))).to.deep.equal([]);
  });

  it('refuses an old Node with one line on stderr and exit 1, before loading the CLI', () => {
    const result = run(['--help'], '20.11.1');
    expect(result.status).to.equal(1);
    expect(result.stdout).to.equal('');
    expect(result.stderr).to.equal(
      `vgpu-warden needs Node.js >= ${MINIMUM_NODE_VERSION} (found 20.11.1): install Node.js 24, or run it from the repository with npx vgpu-warden, which uses the pinned node@24\n`,
    );
  });

  it("prints package.json's version for --version", () => {
    const { version } = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as { version: string };
    const result = run(['--version']);
    expect(result.status).to.equal(0);
    expect(result.stderr).to.equal('');
    expect(result.stdout).to.equal(`${version}\n`);
  });

  it('runs the CLI on a supported Node', () => {
    const result = run(['--help']);
    expect(result.status).to.equal(0);
    expect(result.stdout).to.match(/^Usage: vgpu-warden <command> \[flags\]/);
  });

  it('gives one line naming the setting for a missing KUBECONFIG, not a client-library error', () => {
    const result = spawnSync(process.execPath, ['--import', 'tsx', bin, 'locks'], {
      cwd: root,
      encoding: 'utf8',
      timeout: 50_000,
      env: { ...process.env, KUBECONFIG: '/nonexistent/kubeconfig' },
    });
    expect(result.status).to.equal(2);
    expect(result.stdout).to.equal('');
    expect(result.stderr).to.equal('vgpu-warden: KUBECONFIG (env): /nonexistent/kubeconfig: no such file\n');
  });
});
