import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  KubernetesObjectApi,
  loadAllYaml,
  loadYaml,
  PatchStrategy,
  setHeaderOptions,
  type V1ConfigMap,
  type V1Deployment,
  type V1MutatingWebhookConfiguration,
  type V1PodSpec,
  type V1ValidatingAdmissionPolicy,
  type V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import { expect } from 'chai';
import { apiStatusOf } from '../../src/kube/errors.js';
import { applyComponent } from '../support/kustomize-component.js';
import { loadManifestObjects, MANIFESTS_DIR } from '../support/manifests.js';
import {
  CHART_DIR,
  comparable,
  helm,
  helmBinary,
  objectKey,
  renderChart,
  renderChartError,
  renderKubeVersion,
  type AnyObject,
} from '../support/helm.js';
import { testCluster, uniqueName } from '../support/test-cluster.js';

const BASE_NAMESPACE = 'vgpu-warden';
const MIGRATION_VALUES = resolve(CHART_DIR, 'values-hami-migration.yaml');

/**
 * The kustomize base as the chart should render it for the test control plane: the base pins
 * kube-scheduler to the newest Kubernetes claimed, the chart follows the cluster's version (on the
 * compatibility suite's older control plane the two differ by design).
 */
const base = (): AnyObject[] => loadManifestObjects().map(({ object }) => withClusterScheduler(object));

function withClusterScheduler(object: AnyObject): AnyObject {
  if (object.kind !== 'Deployment' || object.metadata?.name !== 'vgpu-warden-scheduler') return object;
  const copy = structuredClone(object) as AnyObject & {
    spec: { template: { spec: { containers: { name: string; image: string }[] } } };
  };
  for (const container of copy.spec.template.spec.containers) {
    if (container.name === 'kube-scheduler')
      container.image = container.image.replace(/:[^:]+$/, `:v${renderKubeVersion().replace(/^v/, '')}`);
  }
  return copy;
}
const withoutNamespace = (objects: AnyObject[]) => objects.filter((object) => object.kind !== 'Namespace');

const chartYaml = loadYaml<{ version: string; appVersion: string; annotations: Record<string, string> }>(
  readFileSync(resolve(CHART_DIR, 'Chart.yaml'), 'utf8'),
);
/**
 * Helm's labels the kustomize base does not carry (it is not installed by helm): the chart's, its
 * version's on every object, and Helm as the manager.
 */
const HELM_LABELS = ['helm.sh/chart', 'app.kubernetes.io/version', 'app.kubernetes.io/managed-by'];

/**
 * The chart's objects with the labels of HELM_LABELS the base's same object lacks taken off, so the
 * rest is compared as it is (the base's Deployments carry app.kubernetes.io/version: that stays compared).
 */
function withoutHelmLabels(chart: AnyObject[], expected: AnyObject[]): AnyObject[] {
  const baseLabels = new Map(expected.map((object) => [objectKey(object), object.metadata?.labels ?? {}]));
  return chart.map((original) => {
    const object = structuredClone(original);
    const labels = object.metadata?.labels;
    if (labels === undefined || object.metadata === undefined) return object;
    const kept = baseLabels.get(objectKey(object)) ?? {};
    object.metadata.labels = Object.fromEntries(
      Object.entries(labels).filter(([key]) => !HELM_LABELS.includes(key) || key in kept),
    );
    return object;
  });
}

/** Keys present on one side only, and keys whose objects differ, for a readable failure. */
function differences(chart: AnyObject[], expected: AnyObject[]): string[] {
  const actual = withoutHelmLabels(chart, expected);
  const left = comparable(actual);
  const right = comparable(expected);
  const problems: string[] = [];
  for (const key of left.keys()) if (!right.has(key)) problems.push(`only in the chart: ${key}`);
  for (const key of right.keys()) if (!left.has(key)) problems.push(`only in the base: ${key}`);
  for (const [key, object] of left) {
    const other = right.get(key);
    if (other !== undefined && JSON.stringify(sortKeys(object)) !== JSON.stringify(sortKeys(other))) {
      problems.push(
        `differs: ${key}\n  chart: ${JSON.stringify(sortKeys(object))}\n  base:  ${JSON.stringify(sortKeys(other))}`,
      );
    }
  }
  return problems;
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([key, entry]) => [key, sortKeys(entry)]),
    );
  }
  return value;
}

const find = (objects: AnyObject[], kind: string, name: string): AnyObject => {
  const found = objects.filter((object) => object.kind === kind && object.metadata?.name === name);
  if (found.length !== 1) throw new Error(`expected one ${kind} ${name}, found ${found.length}`);
  return found[0]!;
};

const envOf = (deployment: V1Deployment): Record<string, string | undefined> =>
  Object.fromEntries(
    (deployment.spec?.template.spec?.containers[0]?.env ?? []).map((variable) => [variable.name, variable.value]),
  );

const variable = (policy: V1ValidatingAdmissionPolicy, name: string) =>
  policy.spec?.variables?.find((entry) => entry.name === name)?.expression;

const podSpecOf = (objects: AnyObject[], name: string): V1PodSpec => {
  const spec = (find(objects, 'Deployment', name) as unknown as V1Deployment).spec?.template.spec;
  if (spec === undefined) throw new Error(`Deployment ${name} has no pod spec`);
  return spec;
};
const podMetadataOf = (objects: AnyObject[], name: string) =>
  (find(objects, 'Deployment', name) as unknown as V1Deployment).spec?.template.metadata ?? {};

/** A values file in a directory of its own, removed with the others after the file's tests. */
const scratch = mkdtempSync(join(tmpdir(), 'vgpu-warden-chart-test-'));
let scratchFiles = 0;
function valuesFile(text: string): string {
  const path = join(scratch, `values-${++scratchFiles}.yaml`);
  writeFileSync(path, text);
  return path;
}

/** Every placement and pod-metadata knob of both Deployments, as an operator would set them. */
const KNOBS = `
imagePullSecrets: [{ name: regcred }]
nodeSelector: { gpu-ops/pool: system }
tolerations: [{ key: dedicated, operator: Equal, value: gpu-ops, effect: NoSchedule }]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms: [{ matchExpressions: [{ key: node-role.kubernetes.io/infra, operator: Exists }] }]
podAnnotations: { example.com/owner: gpu-platform }
podLabels: { team: gpu-platform }
kubeScheduler:
  nodeSelector: { kubernetes.io/os: null, gpu-ops/pool: scheduler }
  tolerations: [{ key: dedicated, operator: Exists }]
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - { topologyKey: topology.kubernetes.io/zone, labelSelector: { matchLabels: { app.kubernetes.io/component: scheduler } } }
  podAnnotations: { cluster-autoscaler.kubernetes.io/safe-to-evict: "false" }
  podLabels: { team: gpu-platform, tier: scheduler }
`;

const MONITORING_APIS = ['monitoring.coreos.com/v1/ServiceMonitor', 'monitoring.coreos.com/v1/PrometheusRule'];

interface TemplateOptions {
  kubeVersion: string;
  set?: Record<string, string>;
  valuesFiles?: string[];
  apiVersions?: string[];
  namespace?: string;
  chart?: string;
  extraArgs?: string[];
}

/**
 * `helm template` for a given cluster version and API set (renderChart renders for the test control
 * plane's version).
 */
async function template(options: TemplateOptions): Promise<{ code: number; objects: AnyObject[]; stderr: string }> {
  const result = await helm([
    'template',
    'vgpu-warden',
    options.chart ?? CHART_DIR,
    '--namespace',
    options.namespace ?? BASE_NAMESPACE,
    '--kube-version',
    options.kubeVersion,
    ...(options.apiVersions ?? []).flatMap((api) => ['--api-versions', api]),
    ...(options.valuesFiles ?? []).flatMap((file) => ['--values', file]),
    ...Object.entries(options.set ?? {}).flatMap(([key, value]) => ['--set', `${key}=${value}`]),
    ...(options.extraArgs ?? []),
  ]);
  const objects =
    result.code !== 0
      ? []
      : (loadAllYaml(result.stdout) as unknown[]).filter(
          (document): document is AnyObject => typeof document === 'object' && document !== null,
        );
  return { code: result.code, objects, stderr: result.stderr };
}

const kubeSchedulerImage = (objects: AnyObject[]) => podSpecOf(objects, 'vgpu-warden-scheduler').containers[0]?.image;

/**
 * NOTES.txt as `helm install` would print it, for any cluster version: `helm template` does not
 * print the notes, so a copy of the chart renders them through `tpl` into a ConfigMap of its own.
 */
let notesChart: string | undefined;
async function renderNotes(options: Omit<TemplateOptions, 'chart'>): Promise<string> {
  if (notesChart === undefined) {
    notesChart = join(scratch, 'chart-with-notes');
    cpSync(CHART_DIR, notesChart, { recursive: true });
    cpSync(resolve(CHART_DIR, 'templates', 'NOTES.txt'), join(notesChart, 'notes-under-test.txt'));
    writeFileSync(
      join(notesChart, 'templates', 'notes-under-test.yaml'),
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes-under-test\ndata:\n  notes: {{ tpl (.Files.Get "notes-under-test.txt") . | quote }}\n',
    );
  }
  const rendered = await template({ ...options, chart: notesChart });
  if (rendered.code !== 0) throw new Error(`helm template failed: ${rendered.stderr}`);
  return (find(rendered.objects, 'ConfigMap', 'notes-under-test') as unknown as V1ConfigMap).data?.notes ?? '';
}

describe('charts/vgpu-warden (helm template and the real apiserver)', function () {
  this.timeout(120_000);

  before(async function () {
    // The first run on a fresh machine builds helm from Go modules (tools/helm/build.sh).
    this.timeout(20 * 60_000);
    await helmBinary();
  });

  after(() => {
    rmSync(scratch, { recursive: true, force: true });
  });

  describe('renders the kustomize base', () => {
    it('exactly, object for object, with namespace.create=true in namespace vgpu-warden', async () => {
      const chart = await renderChart({ namespace: BASE_NAMESPACE, set: { 'namespace.create': 'true' } });
      expect(chart.map((object) => object.kind)).to.include.members([
        'Namespace',
        'PriorityClass',
        'Deployment',
        'MutatingWebhookConfiguration',
        'ValidatingAdmissionPolicy',
      ]);
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
      const bindings = chart.filter(
        (object) => object.kind === 'ValidatingAdmissionPolicyBinding',
      ) as unknown as V1ValidatingAdmissionPolicyBinding[];
      expect(bindings.map((binding) => binding.spec.validationActions)).to.deep.equal(
        Array.from({ length: 4 }, () => ['Warn', 'Audit']),
      );
    });
  });

  it('moves everything of the base namespace into the release namespace, and leaves the kube-system RoleBinding and the kube-node-lease Role there', async () => {
    const chart = await renderChart({ namespace: 'gpu-system', set: { 'namespace.create': 'true' } });
    const text = JSON.stringify(chart);
    expect(text).to.not.match(
      /"namespace":"vgpu-warden"|:vgpu-warden:vgpu-warden|\.vgpu-warden\.svc|resourceNamespace: vgpu-warden/,
    );
    expect(find(chart, 'Namespace', 'gpu-system').metadata?.labels).to.deep.include({
      'pod-security.kubernetes.io/enforce': 'restricted',
      'hami.io/webhook': 'ignore',
    });
    const namespaces = new Set(
      chart.map((object) => object.metadata?.namespace).filter((namespace) => namespace !== undefined),
    );
    expect([...namespaces].sort()).to.deep.equal(['gpu-system', 'kube-node-lease', 'kube-system']);
    expect(
      find(chart, 'RoleBinding', 'vgpu-warden-extension-apiserver-authentication-reader').metadata?.namespace,
    ).to.equal('kube-system');
    const env = envOf(find(chart, 'Deployment', 'vgpu-warden'));
    expect(env.CERT_HOSTS).to.equal('vgpu-warden-extender.gpu-system.svc');
    const config =
      (find(chart, 'ConfigMap', 'vgpu-warden-scheduler-config') as unknown as V1ConfigMap).data?.['config.yaml'] ?? '';
    expect(config)
      .to.include('resourceNamespace: gpu-system')
      .and.include('urlPrefix: https://vgpu-warden-extender.gpu-system.svc:443');
    for (const policy of chart.filter(
      (object) => object.kind === 'ValidatingAdmissionPolicy',
    ) as unknown as V1ValidatingAdmissionPolicy[]) {
      expect(variable(policy, 'wardenUsers')).to.equal("['system:serviceaccount:gpu-system:vgpu-warden']");
    }
  });

  it('applies image, scheduler name and version, lock timings, sweeper, resources, PriorityClass and policy values where the base has them', async () => {
    const chart = await renderChart({
      namespace: BASE_NAMESPACE,
      set: {
        'image.repository': 'registry.example/gpu/vgpu-warden',
        'image.tag': '0.2.0',
        'image.pullPolicy': 'Always',
        schedulerName: 'gpu-scheduler',
        'kubeScheduler.image.tag': 'v1.31.9',
        'kubeScheduler.replicas': '3',
        replicas: '4',
        'locks.bindGrace': '90s',
        'locks.expire': '10m',
        'locks.forceAfter': '30m',
        'sweeper.schedule': '*/10 * * * * *',
        'sweeper.enabled': 'false',
        'resources.limits.memory': '1Gi',
        heapLimitMiB: '512',
        'priorityClass.create': 'false',
        'priorityClass.name': 'system-cluster-critical',
        'admissionPolicies.mode': 'warn',
        'admissionPolicies.devicePluginServiceAccounts[0].namespace': 'hami-system',
        'admissionPolicies.devicePluginServiceAccounts[0].name': 'gpu-hami-device-plugin',
      },
    });
    const warden = find(chart, 'Deployment', 'vgpu-warden') as unknown as V1Deployment;
    const container = warden.spec?.template.spec?.containers[0];
    expect(container).to.deep.include({ image: 'registry.example/gpu/vgpu-warden:0.2.0', imagePullPolicy: 'Always' });
    expect(warden.spec?.replicas).to.equal(4);
    expect(container?.resources?.limits).to.deep.equal({ cpu: '1', memory: '1Gi' });
    expect(envOf(warden)).to.deep.include({
      SCHEDULER_NAME: 'gpu-scheduler',
      BIND_GRACE: '90s',
      NODELOCK_EXPIRE: '10m',
      NODELOCK_FORCE_AFTER: '30m',
      SWEEP_SCHEDULE: '*/10 * * * * *',
      SWEEP_ENABLED: 'false',
      NODE_OPTIONS: '--max-old-space-size=512 --max-semi-space-size=8',
    });
    const scheduler = find(chart, 'Deployment', 'vgpu-warden-scheduler') as unknown as V1Deployment;
    expect(scheduler.spec?.template.spec?.containers[0]?.image).to.equal('registry.k8s.io/kube-scheduler:v1.31.9');
    expect(scheduler.spec?.replicas).to.equal(3);
    for (const deployment of [warden, scheduler])
      expect(deployment.spec?.template.spec?.priorityClassName).to.equal('system-cluster-critical');
    expect(chart.filter((object) => object.kind === 'PriorityClass')).to.deep.equal([]);
    expect(
      (find(chart, 'ConfigMap', 'vgpu-warden-scheduler-config') as unknown as V1ConfigMap).data?.['config.yaml'],
    ).to.include('- schedulerName: gpu-scheduler');
    const policies = chart.filter(
      (object) => object.kind === 'ValidatingAdmissionPolicy',
    ) as unknown as V1ValidatingAdmissionPolicy[];
    expect(policies).to.have.length(4);
    for (const policy of policies) {
      expect(variable(policy, 'schedulerName')).to.equal("'gpu-scheduler'");
      expect(variable(policy, 'devicePluginUsers')).to.equal(
        "['system:serviceaccount:hami-system:gpu-hami-device-plugin']",
      );
    }
    const bindings = chart.filter(
      (object) => object.kind === 'ValidatingAdmissionPolicyBinding',
    ) as unknown as V1ValidatingAdmissionPolicyBinding[];
    expect(bindings.map((binding) => binding.spec.validationActions)).to.deep.equal(
      Array.from({ length: 4 }, () => ['Warn', 'Audit']),
    );

    const unguarded = await renderChart({
      namespace: BASE_NAMESPACE,
      set: { 'admissionPolicies.enabled': 'false', heapLimitMiB: '0', semiSpaceMiB: '0' },
    });
    expect(unguarded.filter((object) => String(object.kind).startsWith('ValidatingAdmissionPolicy'))).to.deep.equal([]);
    expect(
      envOf(find(unguarded, 'Deployment', 'vgpu-warden')),
      'heapLimitMiB and semiSpaceMiB 0 leave V8 its own sizes',
    ).not.to.have.property('NODE_OPTIONS');
    const youngOnly = await renderChart({ namespace: BASE_NAMESPACE, set: { heapLimitMiB: '0', semiSpaceMiB: '16' } });
    expect(envOf(find(youngOnly, 'Deployment', 'vgpu-warden'))).to.deep.include({
      NODE_OPTIONS: '--max-semi-space-size=16',
    });
  });

  it('derives the device plugin identity from the HAMi release in migration mode (HAMi names it <fullname>-device-plugin)', async () => {
    const named = async (release: string) => {
      const chart = await renderChart({
        namespace: BASE_NAMESPACE,
        valuesFiles: [MIGRATION_VALUES],
        set: { 'hamiMigration.release': release, 'hamiMigration.namespace': 'hami-system' },
      });
      return [
        ...new Set(
          (
            chart.filter(
              (object) => object.kind === 'ValidatingAdmissionPolicy',
            ) as unknown as V1ValidatingAdmissionPolicy[]
          ).map((policy) => variable(policy, 'devicePluginUsers')),
        ),
      ];
    };
    expect(await named('gpu')).to.deep.equal(["['system:serviceaccount:hami-system:gpu-hami-device-plugin']"]);
    expect(await named('hami-prod')).to.deep.equal(["['system:serviceaccount:hami-system:hami-prod-device-plugin']"]);
  });

  it('refuses values that cannot work, with one line naming the value', async () => {
    expect(await renderChartError({ namespace: BASE_NAMESPACE, set: { 'admissionPolicies.mode': 'block' } })).to.match(
      /admissionPolicies\.mode must be deny or warn, not "block"/,
    );
    expect(await renderChartError({ namespace: BASE_NAMESPACE, set: { schedulerName: 'GPU Scheduler' } })).to.match(
      /schedulerName "GPU Scheduler" must be a DNS subdomain/,
    );
    expect(
      await renderChartError({
        namespace: BASE_NAMESPACE,
        set: { 'priorityClass.create': 'false', 'priorityClass.name': '' },
      }),
    ).to.match(/priorityClass\.name is required/);
    // values.schema.json refuses these first (below); the chart's own check stands where the schema is skipped.
    const unchecked = async (set: Record<string, string>) =>
      (await template({ kubeVersion: '1.37.2', set, extraArgs: ['--skip-schema-validation'] })).stderr;
    expect(await unchecked({ semiSpaceMiB: '-1' })).to.match(
      /semiSpaceMiB must be a whole number of MiB \(0 leaves V8's own\), not "-1"/,
    );
    expect(await unchecked({ heapLimitMiB: '512m' })).to.match(
      /heapLimitMiB must be a whole number of MiB \(0 leaves V8's own\), not "512m"/,
    );
  });

  describe('chart conventions', () => {
    it('puts imagePullSecrets, nodeSelector, tolerations, affinity, podAnnotations and podLabels on both Deployments', async () => {
      const chart = await renderChart({
        namespace: BASE_NAMESPACE,
        valuesFiles: [valuesFile(KNOBS)],
        set: { 'podLabels.cost-center': 'gpu-42' },
      });
      const warden = podSpecOf(chart, 'vgpu-warden');
      const scheduler = podSpecOf(chart, 'vgpu-warden-scheduler');
      for (const spec of [warden, scheduler]) expect(spec.imagePullSecrets).to.deep.equal([{ name: 'regcred' }]);
      // Helm merges maps with the defaults: kubernetes.io/os stays unless set to null.
      expect(warden.nodeSelector).to.deep.equal({ 'kubernetes.io/os': 'linux', 'gpu-ops/pool': 'system' });
      expect(scheduler.nodeSelector).to.deep.equal({ 'gpu-ops/pool': 'scheduler' });
      expect(warden.tolerations).to.deep.equal([
        { key: 'dedicated', operator: 'Equal', value: 'gpu-ops', effect: 'NoSchedule' },
      ]);
      expect(scheduler.tolerations).to.deep.equal([{ key: 'dedicated', operator: 'Exists' }]);
      // A given affinity replaces the default spreading entirely.
      expect(warden.affinity).to.deep.equal({
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: 'node-role.kubernetes.io/infra', operator: 'Exists' }] }],
          },
        },
      });
      expect(scheduler.affinity).to.deep.equal({
        podAntiAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: [
            {
              topologyKey: 'topology.kubernetes.io/zone',
              labelSelector: { matchLabels: { 'app.kubernetes.io/component': 'scheduler' } },
            },
          ],
        },
      });
      expect(podMetadataOf(chart, 'vgpu-warden').annotations).to.deep.equal({ 'example.com/owner': 'gpu-platform' });
      const schedulerAnnotations = podMetadataOf(chart, 'vgpu-warden-scheduler').annotations ?? {};
      expect(schedulerAnnotations).to.include({ 'cluster-autoscaler.kubernetes.io/safe-to-evict': 'false' });
      expect(Object.keys(schedulerAnnotations), 'the configuration checksum stays').to.include(
        'checksum/scheduler-config',
      );
      const ownLabels = (component: string) => ({
        'app.kubernetes.io/name': 'vgpu-warden',
        'app.kubernetes.io/instance': 'vgpu-warden',
        'app.kubernetes.io/component': component,
        'app.kubernetes.io/part-of': 'vgpu-warden',
        'app.kubernetes.io/version': chartYaml.appVersion,
      });
      expect(podMetadataOf(chart, 'vgpu-warden').labels).to.deep.equal({
        ...ownLabels('control-plane'),
        team: 'gpu-platform',
        'cost-center': 'gpu-42',
      });
      expect(podMetadataOf(chart, 'vgpu-warden-scheduler').labels).to.deep.equal({
        ...ownLabels('scheduler'),
        team: 'gpu-platform',
        tier: 'scheduler',
      });
      // The selectors do not move with podLabels (a Deployment's selector cannot change).
      for (const name of ['vgpu-warden', 'vgpu-warden-scheduler']) {
        expect(
          Object.keys(
            (find(chart, 'Deployment', name) as unknown as V1Deployment).spec?.selector.matchLabels ?? {},
          ).sort(),
        ).to.deep.equal(['app.kubernetes.io/component', 'app.kubernetes.io/instance', 'app.kubernetes.io/name']);
      }

      // Unset, each Deployment spreads its replicas over nodes and has no pull secrets, tolerations or extra metadata.
      const defaults = await renderChart({ namespace: BASE_NAMESPACE });
      for (const [name, component] of [
        ['vgpu-warden', 'control-plane'],
        ['vgpu-warden-scheduler', 'scheduler'],
      ] as const) {
        const spec = podSpecOf(defaults, name);
        expect(spec).to.not.have.any.keys('imagePullSecrets', 'tolerations');
        expect(spec.nodeSelector).to.deep.equal({ 'kubernetes.io/os': 'linux' });
        expect(
          spec.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution?.[0]?.podAffinityTerm
            .labelSelector?.matchLabels,
        ).to.deep.equal({
          'app.kubernetes.io/name': 'vgpu-warden',
          'app.kubernetes.io/instance': 'vgpu-warden',
          'app.kubernetes.io/component': component,
        });
        expect(podMetadataOf(defaults, name).labels).to.deep.equal(ownLabels(component));
      }
      expect(podMetadataOf(defaults, 'vgpu-warden')).to.not.have.property('annotations');
    });

    it("refuses podLabels that would replace the chart's own pod labels", async () => {
      expect(
        await renderChartError({
          namespace: BASE_NAMESPACE,
          set: { 'podLabels.app\\.kubernetes\\.io/component': 'gpu' },
        }),
      ).to.match(/podLabels may not set app\.kubernetes\.io\/component: the chart sets it on the pods/);
      expect(
        await renderChartError({
          namespace: BASE_NAMESPACE,
          set: { 'kubeScheduler.podLabels.app\\.kubernetes\\.io/instance': 'other' },
        }),
      ).to.match(/kubeScheduler\.podLabels may not set app\.kubernetes\.io\/instance/);
    });

    it("takes the webhook's namespaceSelector and objectSelector from values, on both webhooks, and keeps the matchConditions", async () => {
      const webhooksOf = (objects: AnyObject[]) =>
        (find(objects, 'MutatingWebhookConfiguration', 'vgpu-warden') as unknown as V1MutatingWebhookConfiguration)
          .webhooks ?? [];
      const defaults = webhooksOf(await renderChart({ namespace: BASE_NAMESPACE }));
      expect(defaults.map((webhook) => webhook.name)).to.deep.equal([
        'create.pods.vgpu-warden.io',
        'delete.pods.vgpu-warden.io',
      ]);
      for (const webhook of defaults) {
        expect(webhook.namespaceSelector).to.deep.equal({
          matchExpressions: [{ key: 'hami.io/webhook', operator: 'NotIn', values: ['ignore'] }],
        });
        expect(webhook).to.not.have.property('objectSelector');
      }
      const selected = webhooksOf(
        await renderChart({
          namespace: BASE_NAMESPACE,
          valuesFiles: [
            valuesFile(`
webhook:
  namespaceSelector:
    matchLabels: { gpu.example.com/tenant: "true" }
  objectSelector:
    matchExpressions: [{ key: gpu.example.com/legacy, operator: DoesNotExist }]
`),
          ],
        }),
      );
      for (const [index, webhook] of selected.entries()) {
        // matchLabels adds to the default expression (Helm merges maps); the opt-out label keeps working.
        expect(webhook.namespaceSelector, webhook.name).to.deep.equal({
          matchLabels: { 'gpu.example.com/tenant': 'true' },
          matchExpressions: [{ key: 'hami.io/webhook', operator: 'NotIn', values: ['ignore'] }],
        });
        expect(webhook.objectSelector, webhook.name).to.deep.equal({
          matchExpressions: [{ key: 'gpu.example.com/legacy', operator: 'DoesNotExist' }],
        });
        expect(webhook.matchConditions, webhook.name).to.deep.equal(defaults[index]?.matchConditions);
        expect(webhook.rules, webhook.name).to.deep.equal(defaults[index]?.rules);
      }
      const replaced = webhooksOf(
        await renderChart({
          namespace: BASE_NAMESPACE,
          set: {
            'webhook.namespaceSelector.matchExpressions[0].key': 'gpu.example.com/webhook',
            'webhook.namespaceSelector.matchExpressions[0].operator': 'In',
            'webhook.namespaceSelector.matchExpressions[0].values[0]': 'on',
          },
        }),
      );
      for (const webhook of replaced)
        expect(webhook.namespaceSelector).to.deep.equal({
          matchExpressions: [{ key: 'gpu.example.com/webhook', operator: 'In', values: ['on'] }],
        });
    });

    it('renders the ServiceMonitor and the stalled-lock PrometheusRule only where the cluster serves the Prometheus Operator API', async () => {
      const kubeVersion = '1.37.2';
      const enabled = { 'serviceMonitor.enabled': 'true', 'prometheusRule.enabled': 'true' };
      const monitoringKinds = (objects: AnyObject[]) =>
        objects
          .filter((object) => String(object.apiVersion).startsWith('monitoring.coreos.com/'))
          .map((object) => object.kind)
          .sort();
      // Enabled on a cluster without the API: nothing (helm template knows the APIs only from
      // --api-versions), and NOTES say so.
      expect(monitoringKinds((await template({ kubeVersion, set: enabled })).objects)).to.deep.equal([]);
      const notes = await renderNotes({ kubeVersion, set: enabled });
      expect(notes).to.include(
        'serviceMonitor.enabled is set, but the cluster has no monitoring.coreos.com/v1 ServiceMonitor API',
      );
      expect(notes).to.include(
        'prometheusRule.enabled is set, but the cluster has no monitoring.coreos.com/v1 PrometheusRule API',
      );
      // The API present but the values off (the default): nothing either.
      expect(monitoringKinds((await template({ kubeVersion, apiVersions: MONITORING_APIS })).objects)).to.deep.equal(
        [],
      );
      // Each kind follows its own API.
      expect(
        monitoringKinds(
          (await template({ kubeVersion, set: enabled, apiVersions: ['monitoring.coreos.com/v1/ServiceMonitor'] }))
            .objects,
        ),
      ).to.deep.equal(['ServiceMonitor']);

      const rendered = await template({
        kubeVersion,
        namespace: 'gpu-system',
        apiVersions: MONITORING_APIS,
        set: {
          ...enabled,
          'serviceMonitor.labels.release': 'kube-prometheus-stack',
          'serviceMonitor.interval': '30s',
          'prometheusRule.labels.release': 'kube-prometheus-stack',
          'prometheusRule.stalledFor': '15m',
        },
      });
      expect(rendered.code, rendered.stderr).to.equal(0);
      expect(monitoringKinds(rendered.objects)).to.deep.equal(['PrometheusRule', 'ServiceMonitor']);
      const monitor = find(rendered.objects, 'ServiceMonitor', 'vgpu-warden') as AnyObject & {
        spec: {
          selector: { matchLabels: Record<string, string> };
          namespaceSelector: unknown;
          endpoints: Record<string, unknown>[];
        };
      };
      expect(monitor.metadata?.namespace).to.equal('gpu-system');
      expect(monitor.metadata?.labels).to.include({ release: 'kube-prometheus-stack' });
      expect(monitor.spec.namespaceSelector).to.deep.equal({ matchNames: ['gpu-system'] });
      expect(monitor.spec.endpoints).to.deep.equal([
        { port: 'metrics', path: '/metrics', scheme: 'http', interval: '30s' },
      ]);
      // It scrapes the metrics Service: the one Service its selector matches that has a port named metrics.
      const services = rendered.objects.filter((object) => object.kind === 'Service') as unknown as {
        metadata: { name: string; labels: Record<string, string> };
        spec: { ports: { name: string; port: number }[] };
      }[];
      const scraped = services
        .filter((service) =>
          Object.entries(monitor.spec.selector.matchLabels).every(
            ([key, value]) => service.metadata.labels[key] === value,
          ),
        )
        .filter((service) => service.spec.ports.some((port) => port.name === 'metrics'));
      expect(
        scraped.map((service) => [
          service.metadata.name,
          service.spec.ports.find((port) => port.name === 'metrics')?.port,
        ]),
      ).to.deep.equal([['vgpu-warden-metrics', 9395]]);
      expect(podSpecOf(rendered.objects, 'vgpu-warden').containers[0]?.ports).to.deep.include({
        name: 'metrics',
        containerPort: 9395,
        protocol: 'TCP',
      });

      const rule = find(rendered.objects, 'PrometheusRule', 'vgpu-warden') as AnyObject & {
        spec: { groups: { name: string; rules: Record<string, unknown>[] }[] };
      };
      expect(rule.metadata?.labels).to.include({ release: 'kube-prometheus-stack' });
      const [alert] = rule.spec.groups.flatMap((group) => group.rules);
      expect(alert).to.deep.include({
        alert: 'VgpuWardenNodeLockStalled',
        expr: 'max(vgpu_warden_node_locks_held{namespace="gpu-system", state="stalled"}) > 0',
        for: '15m',
        labels: { severity: 'warning' },
      });
      expect((alert?.annotations as Record<string, string>).summary).to.equal('{{ $value }} GPU node lock(s) stalled');
      // The metric and the state are serve's own (src/telemetry/metrics.ts).
      const metricsSource = readFileSync(resolve(CHART_DIR, '..', '..', 'src', 'telemetry', 'metrics.ts'), 'utf8');
      expect(metricsSource)
        .to.include('name: `${PREFIX}node_locks_held`')
        .and.include("const PREFIX = 'vgpu_warden_'")
        .and.match(/LOCK_STATES = \[[^\]]*'stalled'/);
    });

    it('labels every object with the standard labels (helm.sh/chart, name, instance, version, component, managed-by)', async () => {
      const rendered = await template({
        kubeVersion: '1.37.2',
        namespace: 'gpu-system',
        apiVersions: MONITORING_APIS,
        set: { 'namespace.create': 'true', 'serviceMonitor.enabled': 'true', 'prometheusRule.enabled': 'true' },
      });
      expect(rendered.code, rendered.stderr).to.equal(0);
      const kinds = new Set(rendered.objects.map((object) => object.kind));
      expect([...kinds]).to.include.members([
        'Namespace',
        'PriorityClass',
        'Deployment',
        'Service',
        'ServiceAccount',
        'ConfigMap',
        'ClusterRole',
        'Role',
        'RoleBinding',
        'PodDisruptionBudget',
        'MutatingWebhookConfiguration',
        'ValidatingAdmissionPolicy',
        'ValidatingAdmissionPolicyBinding',
        'ServiceMonitor',
        'PrometheusRule',
      ]);
      const missing: string[] = [];
      for (const object of rendered.objects) {
        const labels = object.metadata?.labels ?? {};
        const expected = {
          'helm.sh/chart': `vgpu-warden-${chartYaml.version}`,
          'app.kubernetes.io/name': 'vgpu-warden',
          'app.kubernetes.io/instance': 'vgpu-warden',
          'app.kubernetes.io/version': chartYaml.appVersion,
          'app.kubernetes.io/managed-by': 'Helm',
        };
        for (const [key, value] of Object.entries(expected))
          if (labels[key] !== value) missing.push(`${objectKey(object)}: ${key}=${labels[key]}`);
        if (!['control-plane', 'scheduler', 'admission-policy'].includes(labels['app.kubernetes.io/component'] ?? ''))
          missing.push(`${objectKey(object)}: component=${labels['app.kubernetes.io/component']}`);
      }
      expect(missing, missing.join('\n')).to.deep.equal([]);
    });

    it('refuses unknown and misspelt keys at every level, and values of the wrong type, naming them (values.schema.json)', async () => {
      const refusals: [Record<string, string>, RegExp][] = [
        [{ 'locks.expiry': '5m' }, /locks.*additional properties 'expiry' not allowed/],
        [{ replica: '3' }, /additional properties 'replica' not allowed/],
        [{ 'kubeScheduler.image.tags': 'v1.31.6' }, /kubeScheduler\/image.*additional properties 'tags' not allowed/],
        [{ 'serviceMonitor.enable': 'true' }, /serviceMonitor.*additional properties 'enable' not allowed/],
        [
          { 'webhook.namespaceSelector.matchLabel.team': 'a' },
          /webhook\/namespaceSelector.*additional properties 'matchLabel' not allowed/,
        ],
        [{ 'tolerations[0].keys': 'a' }, /tolerations\/0.*additional properties 'keys' not allowed/],
        [{ replicas: 'two' }, /replicas.*got string, want integer/],
        [{ 'sweeper.enabled': 'yes' }, /sweeper\/enabled.*got string, want boolean/],
        [{ 'locks.expire': '5' }, /locks\/expire.*got number, want string/],
        [{ 'locks.expire': '5min' }, /locks\/expire.*does not match pattern/],
        [{ heapLimitMiB: '512m' }, /heapLimitMiB.*got string, want integer/],
        [{ semiSpaceMiB: '-1' }, /semiSpaceMiB.*minimum/],
        [{ 'nodeSelector.gpu': 'true' }, /nodeSelector\/gpu.*got boolean, want string/],
        [{ 'image.pullPolicy': 'Sometimes' }, /image\/pullPolicy.*value must be one of/],
      ];
      for (const [set, message] of refusals) {
        const error = await renderChartError({ namespace: BASE_NAMESPACE, set });
        expect(error, JSON.stringify(set))
          .to.include("values don't meet the specifications of the schema")
          .and.match(message);
      }
      // --set-string makes a label value a string, as Kubernetes wants it.
      expect(
        (
          await helm([
            'template',
            'vgpu-warden',
            CHART_DIR,
            '--kube-version',
            '1.37.2',
            '--set-string',
            'nodeSelector.gpu=true',
          ])
        ).code,
      ).to.equal(0);
    });
  });

  describe('Kubernetes versions: from 1.30 with no upper bound, kube-scheduler following the cluster', () => {
    it('refuses a cluster older than 1.30 and renders for the tested range and any newer one (kubeVersion in Chart.yaml)', async () => {
      const refused = await helm(['template', 'vgpu-warden', CHART_DIR, '--kube-version', '1.29.4']);
      expect(refused.code).to.not.equal(0);
      expect(refused.stderr).to.include(
        'chart requires kubeVersion: >=1.30.0-0 which is incompatible with Kubernetes v1.29.4',
      );
      // A cluster upgraded past the newest tested version must still get `helm upgrade`.
      for (const version of ['1.30.0', '1.37.2', '1.37.9', '1.38.0', '1.41.3', 'v1.31.6+k3s1', 'v1.31.6-eks-2d5f260']) {
        const rendered = await helm(['template', 'vgpu-warden', CHART_DIR, '--kube-version', version]);
        expect(rendered.code, `${version}: ${rendered.stderr}`).to.equal(0);
      }
    });

    it("tags kube-scheduler with the cluster's version without a distribution suffix, unless kubeScheduler.image.tag is set", async () => {
      const cases: [string, string][] = [
        ['1.30.14', 'v1.30.14'],
        ['v1.31.6', 'v1.31.6'],
        ['v1.31.6+k3s1', 'v1.31.6'],
        ['v1.31.6-eks-2d5f260', 'v1.31.6'],
        ['v1.33.1+rke2r1', 'v1.33.1'],
        ['1.38.0', 'v1.38.0'],
      ];
      for (const [kubeVersion, tag] of cases) {
        const rendered = await template({ kubeVersion });
        expect(kubeSchedulerImage(rendered.objects), kubeVersion).to.equal(`registry.k8s.io/kube-scheduler:${tag}`);
      }
      // The test control plane's own version (v1.37.2 in the main suite, v1.30.14 in the
      // compatibility suite's first run).
      expect(kubeSchedulerImage(await renderChart({ namespace: BASE_NAMESPACE }))).to.equal(
        `registry.k8s.io/kube-scheduler:v${renderKubeVersion().replace(/^v/, '')}`,
      );
      const pinned = await template({
        kubeVersion: 'v1.31.6+k3s1',
        set: {
          'kubeScheduler.image.tag': 'v1.31.5',
          'kubeScheduler.image.repository': 'mirror.example/k8s/kube-scheduler',
        },
      });
      expect(kubeSchedulerImage(pinned.objects)).to.equal('mirror.example/k8s/kube-scheduler:v1.31.5');
    });

    it('warns in NOTES.txt on a cluster newer than the newest tested version, and says where the kube-scheduler tag comes from', async () => {
      const newest = chartYaml.annotations['vgpu-warden.io/newest-tested-kubernetes'];
      expect(newest).to.equal('1.37');
      const tested = await renderNotes({ kubeVersion: '1.37.9' });
      expect(tested).to.include('kube-scheduler v1.37.9 (Deployment vgpu-warden-scheduler)');
      expect(tested).to.include("kube-scheduler follows the cluster's version (v1.37.9)");
      expect(tested).to.not.include('WARNING');
      for (const kubeVersion of ['1.38.0', 'v1.38.2+k3s1', 'v1.38.0-eks-2d5f260', '1.40.1']) {
        const notes = await renderNotes({ kubeVersion });
        expect(notes, kubeVersion).to.match(
          new RegExp(
            /WARNING: Kubernetes v1\.(38|40)\.\S+ is newer than /.source +
              /the newest version vgpu-warden \S+ was tested on \(1\.37\)/.source,
          ),
        );
      }
      const pinned = await renderNotes({ kubeVersion: '1.31.6', set: { 'kubeScheduler.image.tag': 'v1.30.2' } });
      expect(pinned).to.include('kube-scheduler v1.30.2 is set by kubeScheduler.image.tag; the cluster is v1.31.6.');
      expect(pinned).to.not.include('WARNING');
    });
  });

  it('runs its pods in a namespace labelled as docs/install.md says (Pod Security restricted enforced), where a privileged pod is refused', async () => {
    const { core } = testCluster();
    const releaseNamespace = uniqueName('psa');
    await core.createNamespace({
      body: { metadata: { name: releaseNamespace, labels: { 'vgpu-warden.test/run': 'true' } } },
    });
    try {
      // `kubectl label namespace vgpu-warden hami.io/webhook=ignore \
      //    pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/enforce-version=latest`
      await core.patchNamespace(
        {
          name: releaseNamespace,
          body: {
            metadata: {
              labels: {
                'hami.io/webhook': 'ignore',
                'pod-security.kubernetes.io/enforce': 'restricted',
                'pod-security.kubernetes.io/enforce-version': 'latest',
              },
            },
          },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      const deployments = (await renderChart({ namespace: releaseNamespace })).filter(
        (object): object is V1Deployment & AnyObject => object.kind === 'Deployment',
      );
      expect(deployments.map((deployment) => deployment.metadata?.name).sort()).to.deep.equal([
        'vgpu-warden',
        'vgpu-warden-scheduler',
      ]);
      const refusals: string[] = [];
      const admit = async (name: string, spec: V1PodSpec | undefined) =>
        core
          .createNamespacedPod({
            namespace: releaseNamespace,
            body: { metadata: { name }, spec: spec ?? { containers: [] } },
            dryRun: 'All',
          })
          .then(
            () => undefined,
            (error: unknown) => {
              refusals.push(`${name}: ${apiStatusOf(error)?.message ?? String(error)}`);
            },
          );
      // The PriorityClass is the chart's own (cluster-scoped, not created here): Pod Security does not read it.
      for (const deployment of deployments)
        await admit(deployment.metadata?.name ?? '', {
          ...deployment.spec?.template.spec,
          containers: deployment.spec?.template.spec?.containers ?? [],
          priorityClassName: undefined,
        });
      expect(refusals, refusals.join('\n')).to.deep.equal([]);
      await admit('privileged', { containers: [{ name: 'c', image: 'x', securityContext: { privileged: true } }] });
      expect(refusals.join('\n')).to.match(/violates PodSecurity "restricted:latest"/);
    } finally {
      await core.deleteNamespace({ name: releaseNamespace }).catch(() => undefined);
    }
  });

  it('passes a server-side dry run on the real apiserver, with the default values, the migration values and every placement and selector knob', async () => {
    const { kubeConfig, namespace } = testCluster();
    const api = KubernetesObjectApi.makeApiClient(kubeConfig);
    const knobs = valuesFile(`${KNOBS}
webhook:
  namespaceSelector: { matchLabels: { gpu.example.com/tenant: "true" } }
  objectSelector: { matchExpressions: [{ key: gpu.example.com/legacy, operator: DoesNotExist }] }
`);
    for (const valuesFiles of [[], [MIGRATION_VALUES], [knobs]]) {
      // The Namespace object is this test's own (it exists), so the apply merges into it.
      const chart = await renderChart({ namespace, valuesFiles, set: { 'namespace.create': 'true' } });
      const failures: string[] = [];
      for (const object of chart) {
        try {
          const answer = await api.patch(
            object,
            undefined,
            'All',
            'helm-chart-test',
            true,
            PatchStrategy.ServerSideApply,
          );
          expect(objectKey(answer)).to.equal(objectKey(object));
        } catch (error) {
          failures.push(`${objectKey(object)}: ${apiStatusOf(error)?.message ?? String(error)}`);
        }
      }
      expect(failures, failures.join('\n')).to.deep.equal([]);
    }
  });
});
