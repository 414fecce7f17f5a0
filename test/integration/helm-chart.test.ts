import { resolve } from 'node:path';
import { KubernetesObjectApi, PatchStrategy, setHeaderOptions, type V1ConfigMap, type V1Deployment, type V1PodSpec, type V1ValidatingAdmissionPolicy, type V1ValidatingAdmissionPolicyBinding } from '@kubernetes/client-node';
import { expect } from 'chai';
import { apiStatusOf } from '../../src/kube/errors.js';
import { applyComponent } from '../support/kustomize-component.js';
import { loadManifestObjects, MANIFESTS_DIR } from '../support/manifests.js';
import { CHART_DIR, comparable, helm, helmBinary, objectKey, renderChart, renderChartError, type AnyObject } from '../support/helm.js';
import { testCluster, uniqueName } from '../support/test-cluster.js';

const BASE_NAMESPACE = 'vgpu-warden';
const MIGRATION_VALUES = resolve(CHART_DIR, 'values-hami-migration.yaml');

const base = (): AnyObject[] => loadManifestObjects().map(({ object }) => object);
const withoutNamespace = (objects: AnyObject[]) => objects.filter((object) => object.kind !== 'Namespace');

/** Keys present on one side only, and keys whose objects differ, for a readable failure. */
function differences(actual: AnyObject[], expected: AnyObject[]): string[] {
  const left = comparable(actual);
  const right = comparable(expected);
  const problems: string[] = [];
  for (const key of left.keys()) if (!right.has(key)) problems.push(`only in the chart: ${key}`);
  for (const key of right.keys()) if (!left.has(key)) problems.push(`only in the base: ${key}`);
  for (const [key, object] of left) {
    const other = right.get(key);
    if (other !== undefined && JSON.stringify(sortKeys(object)) !== JSON.stringify(sortKeys(other))) {
      problems.push(`differs: ${key}\n  chart: ${JSON.stringify(sortKeys(object))}\n  base:  ${JSON.stringify(sortKeys(other))}`);
    }
  }
  return problems;
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).sort(([a], [b]) => a.localeCompare(b)).map(([key, entry]) => [key, sortKeys(entry)]));
  }
  return value;
}

const find = (objects: AnyObject[], kind: string, name: string): AnyObject => {
  const found = objects.filter((object) => object.kind === kind && object.metadata?.name === name);
  if (found.length !== 1) throw new Error(`expected one ${kind} ${name}, found ${found.length}`);
  return found[0]!;
};

const envOf = (deployment: V1Deployment): Record<string, string | undefined> =>
  Object.fromEntries((deployment.spec?.template.spec?.containers[0]?.env ?? []).map((variable) => [variable.name, variable.value]));

const variable = (policy: V1ValidatingAdmissionPolicy, name: string) => policy.spec?.variables?.find((entry) => entry.name === name)?.expression;

describe('charts/vgpu-warden (helm template and the real apiserver)', function () {
  this.timeout(120_000);

  before(async function () {
    // The first run on a fresh machine builds helm from Go modules (tools/helm/build.sh).
    this.timeout(20 * 60_000);
    await helmBinary();
  });

  describe('renders the kustomize base', () => {
    it('exactly, object for object, with namespace.create=true in namespace vgpu-warden', async () => {
      const chart = await renderChart({ namespace: BASE_NAMESPACE, set: { 'namespace.create': 'true' } });
      expect(chart.map((object) => object.kind)).to.include.members(['Namespace', 'PriorityClass', 'Deployment', 'MutatingWebhookConfiguration', 'ValidatingAdmissionPolicy']);
      const problems = differences(chart, base());
      expect(problems, problems.join('\n')).to.deep.equal([]);
    });

    it('without the Namespace object by default, since helm install stores the release in an existing namespace', async () => {
      const chart = await renderChart({ namespace: BASE_NAMESPACE });
      expect(chart.filter((object) => object.kind === 'Namespace')).to.deep.equal([]);
      const problems = differences(chart, withoutNamespace(base()));
      expect(problems, problems.join('\n')).to.deep.equal([]);
    });

    it('plus the admission-warn component, with the HAMi migration values', async () => {
      const chart = await renderChart({ namespace: BASE_NAMESPACE, valuesFiles: [MIGRATION_VALUES] });
      const warned = applyComponent(withoutNamespace(base()), resolve(MANIFESTS_DIR, 'components', 'admission-warn'));
      expect(warned.matched).to.deep.equal([4]);
      const problems = differences(chart, warned.objects);
      expect(problems, problems.join('\n')).to.deep.equal([]);
      const bindings = chart.filter((object) => object.kind === 'ValidatingAdmissionPolicyBinding') as unknown as V1ValidatingAdmissionPolicyBinding[];
      expect(bindings.map((binding) => binding.spec.validationActions)).to.deep.equal(Array.from({ length: 4 }, () => ['Warn', 'Audit']));
    });
  });

  it('moves everything of the base namespace into the release namespace, and leaves the kube-system RoleBinding and the kube-node-lease Role there', async () => {
    const chart = await renderChart({ namespace: 'gpu-system', set: { 'namespace.create': 'true' } });
    const text = JSON.stringify(chart);
    expect(text).to.not.match(/"namespace":"vgpu-warden"|:vgpu-warden:vgpu-warden|\.vgpu-warden\.svc|resourceNamespace: vgpu-warden/);
    expect(find(chart, 'Namespace', 'gpu-system').metadata?.labels).to.deep.include({ 'pod-security.kubernetes.io/enforce': 'restricted', 'hami.io/webhook': 'ignore' });
    const namespaces = new Set(chart.map((object) => object.metadata?.namespace).filter((namespace) => namespace !== undefined));
    expect([...namespaces].sort()).to.deep.equal(['gpu-system', 'kube-node-lease', 'kube-system']);
    expect(find(chart, 'RoleBinding', 'vgpu-warden-extension-apiserver-authentication-reader').metadata?.namespace).to.equal('kube-system');
    const env = envOf(find(chart, 'Deployment', 'vgpu-warden'));
    expect(env.CERT_HOSTS).to.equal('vgpu-warden-extender.gpu-system.svc');
    const config = (find(chart, 'ConfigMap', 'vgpu-warden-scheduler-config') as unknown as V1ConfigMap).data?.['config.yaml'] ?? '';
    expect(config).to.include('resourceNamespace: gpu-system').and.include('urlPrefix: https://vgpu-warden-extender.gpu-system.svc:443');
    for (const policy of chart.filter((object) => object.kind === 'ValidatingAdmissionPolicy') as unknown as V1ValidatingAdmissionPolicy[]) {
      expect(variable(policy, 'wardenUsers')).to.equal("['system:serviceaccount:gpu-system:vgpu-warden']");
    }
  });

  it('applies image, scheduler name and version, lock timings, sweeper, resources, PriorityClass and policy values where the base has them', async () => {
    const chart = await renderChart({
      namespace: BASE_NAMESPACE,
      set: {
        'image.repository': 'registry.example/gpu/vgpu-warden', 'image.tag': '0.2.0', 'image.pullPolicy': 'Always',
        schedulerName: 'gpu-scheduler', 'kubeScheduler.image.tag': 'v1.31.9', 'kubeScheduler.replicas': '3', replicas: '4',
        'locks.bindGrace': '90s', 'locks.expire': '10m', 'locks.forceAfter': '30m', 'sweeper.schedule': '*/10 * * * * *', 'sweeper.enabled': 'false',
        'resources.limits.memory': '1Gi', heapLimitMiB: '512', 'priorityClass.create': 'false', 'priorityClass.name': 'system-cluster-critical',
        'admissionPolicies.mode': 'warn',
        'admissionPolicies.devicePluginServiceAccounts[0].namespace': 'hami-system', 'admissionPolicies.devicePluginServiceAccounts[0].name': 'gpu-hami-device-plugin',
      },
    });
    const warden = (find(chart, 'Deployment', 'vgpu-warden') as unknown as V1Deployment);
    const container = warden.spec?.template.spec?.containers[0];
    expect(container).to.deep.include({ image: 'registry.example/gpu/vgpu-warden:0.2.0', imagePullPolicy: 'Always' });
    expect(warden.spec?.replicas).to.equal(4);
    expect(container?.resources?.limits).to.deep.equal({ cpu: '1', memory: '1Gi' });
    expect(envOf(warden)).to.deep.include({
      SCHEDULER_NAME: 'gpu-scheduler', BIND_GRACE: '90s', NODELOCK_EXPIRE: '10m', NODELOCK_FORCE_AFTER: '30m',
      SWEEP_SCHEDULE: '*/10 * * * * *', SWEEP_ENABLED: 'false', NODE_OPTIONS: '--max-old-space-size=512 --max-semi-space-size=8',
    });
    const scheduler = (find(chart, 'Deployment', 'vgpu-warden-scheduler') as unknown as V1Deployment);
    expect(scheduler.spec?.template.spec?.containers[0]?.image).to.equal('registry.k8s.io/kube-scheduler:v1.31.9');
    expect(scheduler.spec?.replicas).to.equal(3);
    for (const deployment of [warden, scheduler]) expect(deployment.spec?.template.spec?.priorityClassName).to.equal('system-cluster-critical');
    expect(chart.filter((object) => object.kind === 'PriorityClass')).to.deep.equal([]);
    expect((find(chart, 'ConfigMap', 'vgpu-warden-scheduler-config') as unknown as V1ConfigMap).data?.['config.yaml']).to.include('- schedulerName: gpu-scheduler');
    const policies = chart.filter((object) => object.kind === 'ValidatingAdmissionPolicy') as unknown as V1ValidatingAdmissionPolicy[];
    expect(policies).to.have.length(4);
    for (const policy of policies) {
      expect(variable(policy, 'schedulerName')).to.equal("'gpu-scheduler'");
      expect(variable(policy, 'devicePluginUsers')).to.equal("['system:serviceaccount:hami-system:gpu-hami-device-plugin']");
    }
    const bindings = chart.filter((object) => object.kind === 'ValidatingAdmissionPolicyBinding') as unknown as V1ValidatingAdmissionPolicyBinding[];
    expect(bindings.map((binding) => binding.spec.validationActions)).to.deep.equal(Array.from({ length: 4 }, () => ['Warn', 'Audit']));

    const unguarded = await renderChart({ namespace: BASE_NAMESPACE, set: { 'admissionPolicies.enabled': 'false', heapLimitMiB: '0', semiSpaceMiB: '0' } });
    expect(unguarded.filter((object) => String(object.kind).startsWith('ValidatingAdmissionPolicy'))).to.deep.equal([]);
    expect(envOf(find(unguarded, 'Deployment', 'vgpu-warden')), 'heapLimitMiB and semiSpaceMiB 0 leave V8 its own sizes').not.to.have.property('NODE_OPTIONS');
    const youngOnly = await renderChart({ namespace: BASE_NAMESPACE, set: { heapLimitMiB: '0', semiSpaceMiB: '16' } });
    expect(envOf(find(youngOnly, 'Deployment', 'vgpu-warden'))).to.deep.include({ NODE_OPTIONS: '--max-semi-space-size=16' });
  });

  it('derives the device plugin identity from the HAMi release in migration mode (HAMi names it <fullname>-device-plugin)', async () => {
    const named = async (release: string) => {
      const chart = await renderChart({ namespace: BASE_NAMESPACE, valuesFiles: [MIGRATION_VALUES], set: { 'hamiMigration.release': release, 'hamiMigration.namespace': 'hami-system' } });
      return [...new Set((chart.filter((object) => object.kind === 'ValidatingAdmissionPolicy') as unknown as V1ValidatingAdmissionPolicy[]).map((policy) => variable(policy, 'devicePluginUsers')))];
    };
    expect(await named('gpu')).to.deep.equal(["['system:serviceaccount:hami-system:gpu-hami-device-plugin']"]);
    expect(await named('hami-prod')).to.deep.equal(["['system:serviceaccount:hami-system:hami-prod-device-plugin']"]);
  });

  it('refuses values that cannot work, with one line naming the value', async () => {
    expect(await renderChartError({ namespace: BASE_NAMESPACE, set: { 'admissionPolicies.mode': 'block' } })).to.match(/admissionPolicies\.mode must be deny or warn, not "block"/);
    expect(await renderChartError({ namespace: BASE_NAMESPACE, set: { schedulerName: 'GPU Scheduler' } })).to.match(/schedulerName "GPU Scheduler" must be a DNS subdomain/);
    expect(await renderChartError({ namespace: BASE_NAMESPACE, set: { 'priorityClass.create': 'false', 'priorityClass.name': '' } })).to.match(/priorityClass\.name is required/);
    expect(await renderChartError({ namespace: BASE_NAMESPACE, set: { semiSpaceMiB: '-1' } })).to.match(/semiSpaceMiB must be a whole number of MiB \(0 leaves V8's own\), not "-1"/);
    expect(await renderChartError({ namespace: BASE_NAMESPACE, set: { heapLimitMiB: '512m' } })).to.match(/heapLimitMiB must be a whole number of MiB \(0 leaves V8's own\), not "512m"/);
  });

  it('renders only for the Kubernetes versions it claims, the tested range 1.30 to 1.37 (kubeVersion in Chart.yaml)', async () => {
    const refused = await helm(['template', 'vgpu-warden', CHART_DIR, '--kube-version', '1.29.4']);
    expect(refused.code).to.not.equal(0);
    expect(refused.stderr).to.include('chart requires kubeVersion: >=1.30.0-0 <1.38.0-0 which is incompatible with Kubernetes v1.29.4');
    const newer = await helm(['template', 'vgpu-warden', CHART_DIR, '--kube-version', '1.38.0']);
    expect(newer.code).to.not.equal(0);
    expect(newer.stderr).to.include('which is incompatible with Kubernetes v1.38.0');
    for (const version of ['1.30.0', '1.37.2', '1.37.9']) {
      expect((await helm(['template', 'vgpu-warden', CHART_DIR, '--kube-version', version])).code, version).to.equal(0);
    }
  });

  it('runs its pods in a namespace labelled as docs/install.md says (Pod Security restricted enforced), where a privileged pod is refused', async () => {
    const { core } = testCluster();
    const releaseNamespace = uniqueName('psa');
    await core.createNamespace({ body: { metadata: { name: releaseNamespace, labels: { 'vgpu-warden.test/run': 'true' } } } });
    try {
      // `kubectl label namespace vgpu-warden hami.io/webhook=ignore pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/enforce-version=latest`
      await core.patchNamespace({ name: releaseNamespace, body: { metadata: { labels: {
        'hami.io/webhook': 'ignore', 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest',
      } } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
      const deployments = (await renderChart({ namespace: releaseNamespace })).filter((object): object is V1Deployment & AnyObject => object.kind === 'Deployment');
      expect(deployments.map((deployment) => deployment.metadata?.name).sort()).to.deep.equal(['vgpu-warden', 'vgpu-warden-scheduler']);
      const refusals: string[] = [];
      const admit = async (name: string, spec: V1PodSpec | undefined) => core.createNamespacedPod({ namespace: releaseNamespace, body: { metadata: { name }, spec: spec ?? { containers: [] } }, dryRun: 'All' })
        .then(() => undefined, (error: unknown) => { refusals.push(`${name}: ${apiStatusOf(error)?.message ?? String(error)}`); });
      // The PriorityClass is the chart's own (cluster-scoped, not created here): Pod Security does not read it.
      for (const deployment of deployments) await admit(deployment.metadata?.name ?? '', { ...deployment.spec?.template.spec, containers: deployment.spec?.template.spec?.containers ?? [], priorityClassName: undefined });
      expect(refusals, refusals.join('\n')).to.deep.equal([]);
      await admit('privileged', { containers: [{ name: 'c', image: 'x', securityContext: { privileged: true } }] });
      expect(refusals.join('\n')).to.match(/violates PodSecurity "restricted:latest"/);
    } finally {
      await core.deleteNamespace({ name: releaseNamespace }).catch(() => undefined);
    }
  });

  it('passes a server-side dry run on the real apiserver, with the default and with the migration values', async () => {
    const { kubeConfig, namespace } = testCluster();
    const api = KubernetesObjectApi.makeApiClient(kubeConfig);
    for (const valuesFiles of [[], [MIGRATION_VALUES]]) {
      // The Namespace object is this test's own (it exists), so the apply merges into it.
      const chart = await renderChart({ namespace, valuesFiles, set: { 'namespace.create': 'true' } });
      const failures: string[] = [];
      for (const object of chart) {
        try {
          const answer = await api.patch(object, undefined, 'All', 'helm-chart-test', true, PatchStrategy.ServerSideApply);
          expect(objectKey(answer)).to.equal(objectKey(object));
        } catch (error) {
          failures.push(`${objectKey(object)}: ${apiStatusOf(error)?.message ?? String(error)}`);
        }
      }
      expect(failures, failures.join('\n')).to.deep.equal([]);
    }
  });
});
