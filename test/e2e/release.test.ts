// `npm run release` (tools/release/release.sh): the packaged chart, the image as an OCI archive and
// their SHA-256 sums, one version across them; then what docs/install.md's "Installing a release"
// does with them: check the sums, load the archive with buildah, install the packaged chart on the
// real apiserver (server-side dry run of every object, and helm's own --dry-run=server).
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { KubernetesObjectApi, PatchStrategy } from '@kubernetes/client-node';
import { expect } from 'chai';
import { finished, spawnCaptured } from '../support/captured-process.js';
import { buildahAvailable, imageConfig } from '../support/buildah-container.js';
import { helm, helmBinary, helmOk, objectKey, renderChart, renderKubeVersion } from '../support/helm.js';
import { testCluster, uniqueName } from '../support/test-cluster.js';

const repoRoot = resolve(import.meta.dirname, '..', '..');
const version = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
const CHART = `vgpu-warden-${version}.tgz`;
const ARCHIVE = `vgpu-warden-${version}.oci.tar`;
const ARCHIVE_IMAGE = `vgpu-warden:${version}`;
const REGISTRY_REPOSITORY = 'registry.example.com/gpu/vgpu-warden';

async function runOk(file: string, args: readonly string[], cwd: string, env?: NodeJS.ProcessEnv): Promise<string> {
  const { code, output } = await finished(spawnCaptured(file, args, { cwd, ...(env === undefined ? {} : { env }) }));
  if (code !== 0)
    throw new Error(`${file} ${args.join(' ')} exited ${code}:\n${output.split('\n').slice(-30).join('\n')}`);
  return output;
}

const sha256 = (path: string): string => createHash('sha256').update(readFileSync(path)).digest('hex');

describe('npm run release: chart, image archive and sums that agree, installed from the files', function () {
  this.timeout(120_000);
  let out = '';
  let releaseOutput: string;

  before(async function () {
    if (!buildahAvailable()) {
      process.stderr.write('    release tests skipped: buildah is not installed (npm run setup installs it as root)\n');
      this.skip();
    }
    // Cold: the image's Debian base by debootstrap and npm ci of a staging copy (docs/install.md).
    this.timeout(20 * 60_000);
    out = mkdtempSync(join(tmpdir(), 'vgpu-warden-release-'));
    const helmPath = await helmBinary();
    // The script `npm run release` runs after its set-up step, into a directory of the test's own.
    releaseOutput = await runOk('bash', [join(repoRoot, 'tools', 'release', 'release.sh'), '--out', out], repoRoot, {
      ...process.env,
      VGPU_WARDEN_HELM: helmPath,
    });
  });

  after(() => {
    if (out !== '') rmSync(out, { recursive: true, force: true });
  });

  it('writes the three artifacts named by the one version, and says they agree', () => {
    expect(
      readdirSync(out)
        .filter((name) => name !== 'release.log')
        .sort(),
    ).to.deep.equal(['SHA256SUMS', ARCHIVE, CHART].sort());
    expect(releaseOutput).to.include(`[release] version ${version} (package.json, Chart.yaml version and appVersion)`);
    expect(releaseOutput).to.include(
      `[release] agree: the chart deploys ${ARCHIVE_IMAGE} by default, the archive holds ${ARCHIVE_IMAGE}`,
    );
  });

  it('sums both files in SHA256SUMS, and `sha256sum -c SHA256SUMS` passes where they arrive', async () => {
    const sums = readFileSync(join(out, 'SHA256SUMS'), 'utf8').trim().split('\n');
    expect(sums).to.deep.equal([`${sha256(join(out, CHART))}  ${CHART}`, `${sha256(join(out, ARCHIVE))}  ${ARCHIVE}`]);
    expect(await runOk('sha256sum', ['-c', 'SHA256SUMS'], out)).to.equal(`${CHART}: OK\n${ARCHIVE}: OK\n`);
  });

  it("packages the chart at the version, with the archive's image as its default", async () => {
    const chartYaml = await helmOk(['show', 'chart', join(out, CHART)]);
    expect(chartYaml).to.match(new RegExp(`^version: ${version.replaceAll('.', '\\.')}$`, 'm'));
    expect(chartYaml).to.match(new RegExp(`^appVersion: "?${version.replaceAll('.', '\\.')}"?$`, 'm'));
    const objects = await renderChart({ namespace: 'vgpu-warden', chart: join(out, CHART) });
    const deployment = objects.find(
      (object) => object.kind === 'Deployment' && object.metadata?.name === 'vgpu-warden',
    ) as { spec: { template: { spec: { containers: { image: string }[] } } } } | undefined;
    expect(deployment?.spec.template.spec.containers.map((container) => container.image)).to.deep.equal([
      ARCHIVE_IMAGE,
    ]);
  });

  it('holds the image as an OCI archive that buildah loads as vgpu-warden:<version> and pushes on (docs/install.md)', async () => {
    const index = JSON.parse(await runOk('tar', ['-xOf', join(out, ARCHIVE), 'index.json'], out)) as {
      manifests: { annotations?: Record<string, string> }[];
    };
    expect(
      index.manifests.map((manifest) => manifest.annotations?.['org.opencontainers.image.ref.name']),
    ).to.deep.equal([ARCHIVE_IMAGE]);
    // `buildah pull oci-archive:vgpu-warden-<v>.oci.tar`, then `buildah push vgpu-warden:<v> docker://…`
    // to a directory instead of a registry.
    await runOk('buildah', ['pull', '--quiet', `oci-archive:${ARCHIVE}`], out);
    const config = await imageConfig(ARCHIVE_IMAGE);
    expect(config.Entrypoint).to.deep.equal(['node', 'dist/bin.js']);
    const pushed = join(out, 'pushed');
    await runOk('buildah', ['push', '--quiet', ARCHIVE_IMAGE, `dir:${pushed}`], out);
    expect(readdirSync(pushed)).to.include('manifest.json');
  });

  it('installs from the packaged chart on the real apiserver: every object passes a server-side dry run, and so does helm install', async () => {
    const { core, kubeConfig, controlPlane } = testCluster();
    const releaseNamespace = uniqueName('release');
    // `kubectl create namespace` and `kubectl label namespace` of docs/install.md, through the API.
    await core.createNamespace({
      body: {
        metadata: {
          name: releaseNamespace,
          labels: {
            'vgpu-warden.test/run': 'true',
            'hami.io/webhook': 'ignore',
            'pod-security.kubernetes.io/enforce': 'restricted',
            'pod-security.kubernetes.io/enforce-version': 'latest',
          },
        },
      },
    });
    try {
      const set = {
        'image.repository': REGISTRY_REPOSITORY,
        'kubeScheduler.image.tag': `v${renderKubeVersion().replace(/^v/, '')}`,
      };
      const objects = await renderChart({ namespace: releaseNamespace, chart: join(out, CHART), set });
      const api = KubernetesObjectApi.makeApiClient(kubeConfig);
      const failures: string[] = [];
      for (const object of objects) {
        try {
          await api.patch(object, undefined, 'All', 'release-test', true, PatchStrategy.ServerSideApply);
        } catch (error) {
          failures.push(`${objectKey(object)}: ${String(error).slice(0, 300)}`);
        }
      }
      expect(failures, failures.join('\n')).to.deep.equal([]);
      const images = objects
        .filter((object) => object.kind === 'Deployment')
        .flatMap((object) =>
          (
            object as { spec: { template: { spec: { containers: { image: string }[] } } } }
          ).spec.template.spec.containers.map((container) => container.image),
        );
      expect(images).to.include(`${REGISTRY_REPOSITORY}:${version}`);
      // helm install vgpu-warden vgpu-warden-<v>.tgz -n vgpu-warden \
      //   --set image.repository=… --set kubeScheduler.image.tag=…
      const install = await helm(
        [
          'install',
          'vgpu-warden',
          join(out, CHART),
          '-n',
          releaseNamespace,
          '--set',
          `image.repository=${REGISTRY_REPOSITORY}`,
          '--set',
          `kubeScheduler.image.tag=${set['kubeScheduler.image.tag']}`,
          '--dry-run=server',
        ],
        controlPlane.kubeconfigPath,
      );
      expect(install.code, install.stderr).to.equal(0);
      expect(install.stdout).to.include('STATUS: pending-install');
      expect(install.stdout).to.include(`image: ${REGISTRY_REPOSITORY}:${version}`);
    } finally {
      await core.deleteNamespace({ name: releaseNamespace }).catch(() => undefined);
    }
  });
});
