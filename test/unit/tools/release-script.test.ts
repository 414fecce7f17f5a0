// One version for a release: package.json's, Chart.yaml's version and appVersion (the image tag and the
// archive's image name follow package.json in tools/release/release.sh). The script's version check
// runs here on a copy of it in a scratch tree; the whole release runs in test/e2e/release.test.ts.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';

const REPO = resolve(import.meta.dirname, '..', '..', '..');
const chartField = (yaml: string, field: string): string | undefined =>
  new RegExp(`^${field}: *"?([^"\\n]*)"?$`, 'm').exec(yaml)?.[1];

describe('tools/release/release.sh: one version across package.json, the chart and the image', () => {
  it('package.json, Chart.yaml version and Chart.yaml appVersion are the same version', () => {
    const { version } = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };
    const chart = readFileSync(join(REPO, 'charts', 'vgpu-warden', 'Chart.yaml'), 'utf8');
    expect(version).to.match(/^\d+\.\d+\.\d+$/);
    expect({ version: chartField(chart, 'version'), appVersion: chartField(chart, 'appVersion') }).to.deep.equal({
      version,
      appVersion: version,
    });
  });

  it('CHANGELOG.md has a section with upgrade notes for that version', () => {
    const { version } = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };
    const changelog = readFileSync(join(REPO, 'CHANGELOG.md'), 'utf8');
    const section = changelog.split(/^## /m).find((part) => part.startsWith(`${version}\n`));
    expect(section, `no "## ${version}" in CHANGELOG.md`).to.be.a('string');
    expect(section).to.match(/^### Upgrade notes$/m);
  });

  describe('on a scratch tree', () => {
    let tree: string;
    const write = (version: string, chartVersion: string, appVersion: string): void => {
      writeFileSync(
        join(tree, 'package.json'),
        `{\n  "name": "vgpu-warden",\n  "version": "${version}",\n  "private": true\n}\n`,
      );
      writeFileSync(
        join(tree, 'charts', 'vgpu-warden', 'Chart.yaml'),
        `apiVersion: v2\nname: vgpu-warden\nversion: ${chartVersion}\nappVersion: "${appVersion}"\n`,
      );
    };
    const release = (args: string[] = []) => {
      const result = spawnSync(
        '/bin/bash',
        [join(tree, 'tools', 'release', 'release.sh'), '--out', join(tree, 'out'), ...args],
        {
          encoding: 'utf8',
          env: { PATH: '/usr/bin:/bin', HOME: tree, VGPU_WARDEN_HELM: '/nonexistent/helm' },
        },
      );
      return { code: result.status, stdout: result.stdout, stderr: result.stderr };
    };
    beforeEach(() => {
      tree = mkdtempSync(join(tmpdir(), 'release-script-'));
      for (const dir of ['tools/release', 'tools/lib', 'charts/vgpu-warden'])
        mkdirSync(join(tree, dir), { recursive: true });
      for (const file of ['tools/release/release.sh', 'tools/lib/steps.sh'])
        copyFileSync(join(REPO, file), join(tree, file));
    });
    afterEach(() => {
      rmSync(tree, { recursive: true, force: true });
    });

    it("stops before building anything when Chart.yaml's version or appVersion differs from package.json's", () => {
      write('0.2.0', '0.2.0', '0.1.0');
      const result = release();
      expect(result.code).to.equal(1);
      expect(result.stderr).to.equal(
        '[release] FAILED: versions differ: package.json 0.2.0, Chart.yaml version 0.2.0 and appVersion 0.1.0\n',
      );
      expect(result.stdout).to.equal('');
    });

    it('refuses a version that is not semantic, and unknown arguments', () => {
      write('next', 'next', 'next');
      expect(release().stderr).to.include("package.json's version 'next' is not a semantic version");
      write('0.1.0', '0.1.0', '0.1.0');
      const bad = release(['--fast']);
      expect(bad.code).to.equal(2);
      expect(bad.stderr).to.include("unknown argument '--fast'");
    });

    it('with the versions agreeing, goes on to package the chart (here with a helm that does not exist)', () => {
      write('0.1.0', '0.1.0', '0.1.0');
      const result = release();
      expect(result.stdout).to.include('[release] version 0.1.0 (package.json, Chart.yaml version and appVersion)');
      expect(result.code).to.equal(1);
      expect(result.stderr).to.include('FAILED: helm package charts/vgpu-warden');
    });
  });
});
