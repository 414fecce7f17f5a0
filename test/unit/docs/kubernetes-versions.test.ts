import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect } from 'chai';

/**
 * The claimed Kubernetes range is exactly the tested one: the compatibility suite runs on the
 * versions of KUBERNETES_COMPAT_VERSIONS (tools/k8s/versions.env), so the README, docs/install.md
 * and the chart must name its oldest and newest minor (the chart's kubeVersion has the oldest as its
 * floor and no upper bound, so an upgraded cluster still gets `helm upgrade`; its NOTES.txt warns
 * above the newest), and the kube-scheduler the manifests ship must be the main suite's version (the
 * chart's follows the cluster's).
 */
const repo = resolve(import.meta.dirname, '..', '..', '..');
const read = (path: string) => readFileSync(resolve(repo, path), 'utf8');
const versions = Object.fromEntries(
  read('tools/k8s/versions.env')
    .split('\n')
    .filter((line) => /^[A-Z_]+=/.test(line))
    .map((line) => {
      const at = line.indexOf('=');
      return [line.slice(0, at), line.slice(at + 1).replace(/^"|"$/g, '')] as [string, string];
    }),
);
const compat = (versions.KUBERNETES_COMPAT_VERSIONS ?? '').split(' ').filter((version) => version !== '');
const minor = (version: string) => Number(/^v1\.(\d+)\.\d+$/.exec(version)?.[1]);
const [oldest, newest] = [compat[0] ?? '', compat.at(-1) ?? ''];

describe('the claimed Kubernetes versions', () => {
  it("tests two versions, oldest first, the newest being the main suite's", () => {
    expect(compat).to.have.length(2);
    expect(minor(oldest)).to.be.below(minor(newest));
    expect(newest).to.equal(versions.KUBERNETES_VERSION);
  });

  it('are the tested range in the README and docs/install.md', () => {
    expect(read('README.md')).to.include(
      `On Kubernetes 1.${minor(oldest)} to 1.${minor(newest)} (tested on ${oldest.slice(1)} and ${newest.slice(1)})`,
    );
    const install = read('docs/install.md');
    expect(install).to.include(`**Kubernetes 1.${minor(oldest)} to 1.${minor(newest)}.**`);
    expect(install).to.include(`${oldest.slice(1)} and ${newest.slice(1)}`);
  });

  it("are the chart's floor (kubeVersion, no upper bound) and its newest tested version (the annotation NOTES.txt warns above)", () => {
    const chart = read('charts/vgpu-warden/Chart.yaml');
    expect(chart).to.match(new RegExp(`\\nkubeVersion: ">=1\\.${minor(oldest)}\\.0-0"\\n`));
    expect(chart).to.include(`vgpu-warden.io/newest-tested-kubernetes: "1.${minor(newest)}"`);
  });

  it("ship the main suite's kube-scheduler in the manifests; the chart's follows the cluster (rendered in test/integration/helm-chart.test.ts)", () => {
    expect(read('manifests/scheduler-deployment.yaml')).to.include(`image: registry.k8s.io/kube-scheduler:${newest}`);
    expect(read('charts/vgpu-warden/values.yaml')).to.match(
      new RegExp(
        /\nkubeScheduler:\n {2}replicas: \d+\n {2}image:\n/.source +
          / {4}repository: registry\.k8s\.io\/kube-scheduler\n( {4}#.*\n)* {4}tag: ""\n/.source,
      ),
    );
  });
});
