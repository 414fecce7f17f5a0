import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  CoreV1Api,
  loadYaml,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type KubeConfig,
  type V1Container,
  type V1Deployment,
  type V1MutatingWebhookConfiguration,
  type V1Pod,
  type V1PolicyRule,
  type V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import { expect } from 'chai';
import { loadKubeConfig } from '../../src/kube/client.js';
import { apiStatusOf, httpStatusOf } from '../../src/kube/errors.js';
import { KubeNodeLockApi } from '../../src/lock/kube-node-lock-api.js';
import { findFreePort } from '../../src/local/free-port.js';
import { formatLockValue } from '../../src/lock/lock-value.js';
import { policyConfig, shippedPolicies } from '../support/admission-policies.js';
import { impersonating } from '../support/impersonation.js';
import { applyComponent } from '../support/kustomize-component.js';
import { createGpuNode } from '../support/lock-helpers.js';
import { MANIFESTS_DIR } from '../support/manifests.js';
import { eventually, notYet, sharedControlPlane, testCluster, uniqueName } from '../support/test-cluster.js';
import { WebhookFixture } from '../support/webhook-fixture.js';
import { NODE_LOCK_ANNOTATION } from '../../src/hami/wire.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

const shipped = shippedPolicies();
// Every policy carries the same configuration (test/unit/admission-policies-manifest.test.ts).
const config = policyConfig(shipped.policies[0]!);
const WARDEN = config.wardenUsers[0]!;
const DEVICE_PLUGIN = config.devicePluginUsers[0]!;
const SCHEDULER = config.schedulerName;

const POD_METADATA = 'vgpu-warden-scheduler-owned-pod-metadata';
const GPU_PODS = 'vgpu-warden-gpu-pods';
const WARDEN_PODS = 'vgpu-warden-identity-pod-updates';
const IDENTITY_NODES = 'vgpu-warden-identity-node-updates';

/** Only namespaces carrying this label (and cluster-scoped objects) are under the test bindings. */
const SCOPE_LABEL = 'vgpu-warden.test/admission-policies';

const ALLOCATED = 'GPU-a,NVIDIA,3000,0:;';
const HAMI_ANNOTATIONS = {
  'hami.io/vgpu-time': '1787293239',
  'hami.io/vgpu-devices-to-allocate': ALLOCATED,
  'hami.io/vgpu-devices-allocated': ALLOCATED,
  'hami.io/bind-phase': 'allocating',
  'hami.io/bind-time': '1787293240',
};

interface Refusal {
  status: number | undefined;
  message: string;
}

/** The refusal of `action`; fails the test when it is admitted. */
async function refusal(action: Promise<unknown>, what = 'the request'): Promise<Refusal> {
  const outcome = await action.then(
    () => undefined,
    (error: unknown) => ({ status: httpStatusOf(error), message: apiStatusOf(error)?.message ?? String(error) }),
  );
  if (outcome === undefined) throw new Error(`expected ${what} to be refused, it was admitted`);
  return outcome;
}

/** Refused by `policy` (HTTP 403), with a message containing `text`. */
async function expectRefused(
  action: Promise<unknown>,
  policy: string,
  text: string,
  what = 'the request',
): Promise<void> {
  const { status, message } = await refusal(action, what);
  expect(message, what).to.include(`ValidatingAdmissionPolicy '${policy}'`).and.include(text);
  expect(status, `${what}: ${message}`).to.equal(403);
}

function container(name: string, limits?: Record<string, string>): V1Container {
  return { name, image: 'registry.invalid/cuda:1', ...(limits ? { resources: { limits } } : {}) };
}

function pod(
  name: string,
  options: {
    scheduler?: string;
    nodeName?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    containers?: V1Container[];
    initContainers?: V1Container[];
  } = {},
): V1Pod {
  return {
    metadata: {
      name,
      ...(options.labels ? { labels: options.labels } : {}),
      ...(options.annotations ? { annotations: options.annotations } : {}),
    },
    spec: {
      ...(options.scheduler === undefined ? {} : { schedulerName: options.scheduler }),
      ...(options.nodeName === undefined ? {} : { nodeName: options.nodeName }),
      ...(options.initContainers ? { initContainers: options.initContainers } : {}),
      containers: options.containers ?? [container('main', { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '3000' })],
    },
  };
}

const tenantUser = (namespace: string) => `system:serviceaccount:${namespace}:tenant`;
const serviceAccountRef = (user: string) => {
  const [, , namespace, name] = user.split(':');
  return { kind: 'ServiceAccount', namespace: namespace!, name: name! };
};

function coreAs(kubeConfig: KubeConfig, user: string, group?: string): CoreV1Api {
  return impersonating(kubeConfig, user, group).makeApiClient(CoreV1Api);
}

async function ignoreNotFound(action: Promise<unknown>): Promise<void> {
  await action.catch((error: unknown) => {
    if (httpStatusOf(error) !== 404) throw error;
  });
}

describe('admission policies (manifests/admission-policies.yaml) in the real kube-apiserver', function () {
  this.timeout(60_000);
  const scope = randomBytes(4).toString('hex');
  const identitiesRole = `vgpu-warden-test-identities-${scope}`;
  const restoredRoles = new Map<string, V1PolicyRule[] | undefined>();
  let admission: AdmissionregistrationV1Api;
  let rbac: RbacAuthorizationV1Api;
  let probeNode = '';

  /**
   * `bindings` (the shipped ones by default) limited to this suite's namespaces; nodes are
   * cluster-scoped and stay matched.
   */
  function testBindings(bindings = shipped.bindings): V1ValidatingAdmissionPolicyBinding[] {
    return bindings.map((binding) => ({
      metadata: { name: binding.metadata!.name!, labels: binding.metadata?.labels ?? {} },
      spec: { ...binding.spec, matchResources: { namespaceSelector: { matchLabels: { [SCOPE_LABEL]: scope } } } },
    }));
  }

  async function putBindings(bindings: V1ValidatingAdmissionPolicyBinding[]): Promise<void> {
    for (const binding of bindings) {
      const name = binding.metadata!.name!;
      const current = await admission.readValidatingAdmissionPolicyBinding({ name }).catch(() => undefined);
      if (current)
        await admission.replaceValidatingAdmissionPolicyBinding({
          name,
          body: { ...binding, metadata: { ...binding.metadata, resourceVersion: current.metadata?.resourceVersion } },
        });
      else await admission.createValidatingAdmissionPolicyBinding({ body: binding });
    }
  }

  /**
   * Stands in for kube-controller-manager's clusterrole-aggregation controller, which this control
   * plane does not run: the stock aggregated roles (edit, admin) get the rules of the roles their
   * aggregationRule selects, as in a real cluster.
   */
  async function aggregate(name: string, seen = new Set<string>()): Promise<V1PolicyRule[]> {
    seen.add(name);
    const role = await rbac.readClusterRole({ name });
    const selectors = role.aggregationRule?.clusterRoleSelectors ?? [];
    if (selectors.length === 0) return role.rules ?? [];
    const rules: V1PolicyRule[] = [];
    for (const selector of selectors) {
      const labelSelector = Object.entries(selector.matchLabels ?? {})
        .map(([key, value]) => `${key}=${value}`)
        .join(',');
      for (const member of (await rbac.listClusterRole({ labelSelector })).items) {
        if (!seen.has(member.metadata!.name!)) rules.push(...(await aggregate(member.metadata!.name!, seen)));
      }
    }
    if ((role.rules ?? []).length === 0) {
      restoredRoles.set(name, role.rules ?? undefined);
      await rbac.replaceClusterRole({ name, body: { ...role, rules } });
    }
    return rules;
  }

  /**
   * Waits until every policy refuses in `namespace`: policies, bindings and namespace labels reach
   * kube-apiserver's admission through informers. Dry runs, so nothing is written.
   */
  async function untilEnforced(namespace: string): Promise<void> {
    const { core, kubeConfig } = testCluster();
    const warden = coreAs(kubeConfig, WARDEN);
    await core
      .createNamespacedPod({ namespace, body: pod('policy-probe', { containers: [container('web')] }) })
      .catch((error: unknown) => {
        if (httpStatusOf(error) !== 409) throw error;
      });
    await eventually(
      'the admission policies to be enforced',
      async () => {
        const attempts = [
          core.createNamespacedPod({ namespace, body: pod('probe-gpu'), dryRun: 'All' }),
          core.createNamespacedPod({
            namespace,
            body: pod('probe-annotations', { scheduler: SCHEDULER, annotations: { 'hami.io/bind-phase': 'x' } }),
            dryRun: 'All',
          }),
          warden.patchNamespacedPod(
            { name: 'policy-probe', namespace, body: { metadata: { labels: { probe: 'x' } } }, dryRun: 'All' },
            mergePatch,
          ),
          warden.patchNode(
            { name: probeNode, body: { metadata: { labels: { probe: 'x' } } }, dryRun: 'All' },
            mergePatch,
          ),
        ];
        // Each probe's outcome, so that a timeout names the policy not enforced yet.
        const outcomes = await Promise.all(
          attempts.map((attempt) =>
            attempt.then(
              () => 'admitted',
              (error: unknown) => {
                const message = apiStatusOf(error)?.message;
                return message?.includes('ValidatingAdmissionPolicy') === true
                  ? 'refused'
                  : `failed ${httpStatusOf(error) ?? '?'} ${(message ?? (error instanceof Error ? error.message : 'no API status')).slice(0, 120)}`;
              },
            ),
          ),
        );
        const probes = ['GPU pod', 'annotated pod', 'warden pod patch', 'warden node patch'];
        return outcomes.every((outcome) => outcome === 'refused')
          ? true
          : notYet(outcomes.map((outcome, index) => `${probes[index]}: ${outcome}`).join('; '));
      },
      20_000,
      100,
    );
  }

  before(async function () {
    this.timeout(60_000);
    const admin = loadKubeConfig(sharedControlPlane().kubeconfigPath);
    admission = admin.makeApiClient(AdmissionregistrationV1Api);
    rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    for (const policy of shipped.policies) {
      await ignoreNotFound(admission.deleteValidatingAdmissionPolicy({ name: policy.metadata!.name! }));
      await admission.createValidatingAdmissionPolicy({ body: policy });
    }
    await putBindings(testBindings());
    await aggregate('edit');
    await aggregate('admin');
    probeNode = await createGpuNode(admin.makeApiClient(CoreV1Api));
    // RBAC lets the identities do everything the policies are about, so each refusal below is the policies'.
    await rbac.createClusterRole({
      body: {
        metadata: { name: identitiesRole },
        rules: [
          {
            apiGroups: [''],
            resources: ['pods', 'pods/status', 'nodes', 'nodes/status'],
            verbs: ['get', 'list', 'create', 'update', 'patch'],
          },
          { apiGroups: [''], resources: ['pods/binding'], verbs: ['create'] },
        ],
      },
    });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: identitiesRole },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: identitiesRole },
        subjects: [
          serviceAccountRef(WARDEN),
          serviceAccountRef(DEVICE_PLUGIN),
          { kind: 'Group', apiGroup: 'rbac.authorization.k8s.io', name: 'system:nodes' },
        ],
      },
    });
  });

  after(async function () {
    this.timeout(30_000);
    for (const binding of shipped.bindings)
      await ignoreNotFound(admission.deleteValidatingAdmissionPolicyBinding({ name: binding.metadata!.name! }));
    for (const policy of shipped.policies)
      await ignoreNotFound(admission.deleteValidatingAdmissionPolicy({ name: policy.metadata!.name! }));
    await ignoreNotFound(rbac.deleteClusterRoleBinding({ name: identitiesRole }));
    await ignoreNotFound(rbac.deleteClusterRole({ name: identitiesRole }));
    if (probeNode !== '')
      await ignoreNotFound(
        loadKubeConfig(sharedControlPlane().kubeconfigPath).makeApiClient(CoreV1Api).deleteNode({ name: probeNode }),
      );
    for (const [name, rules] of restoredRoles) {
      const role = await rbac.readClusterRole({ name });
      await rbac.replaceClusterRole({ name, body: { ...role, rules: rules ?? [] } });
    }
  });

  beforeEach(async () => {
    const { core, namespace } = testCluster();
    await core.patchNamespace(
      { name: namespace, body: { metadata: { labels: { [SCOPE_LABEL]: scope } } } },
      mergePatch,
    );
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'tenant-edit' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
        subjects: [serviceAccountRef(tenantUser(namespace))],
      },
    });
    await untilEnforced(namespace);
  });

  describe('a tenant with the stock edit role in its namespace', () => {
    it('cannot add, overwrite or remove the scheduler-owned annotations or the hami.io/vgpu-node label of a bound pod', async () => {
      const { core: admin, kubeConfig, namespace } = testCluster();
      const tenant = coreAs(kubeConfig, tenantUser(namespace));
      const warden = coreAs(kubeConfig, WARDEN);
      const node = await createGpuNode(admin);
      const created = await tenant.createNamespacedPod({ namespace, body: pod('train-0', { scheduler: SCHEDULER }) });
      await warden.createNamespacedPodBinding({
        name: 'train-0',
        namespace,
        body: {
          metadata: {
            name: 'train-0',
            uid: created.metadata!.uid!,
            annotations: { ...HAMI_ANNOTATIONS, 'hami.io/vgpu-node': node },
          },
          target: { kind: 'Node', name: node },
        },
      });
      await warden.patchNamespacedPod(
        { name: 'train-0', namespace, body: { metadata: { labels: { 'hami.io/vgpu-node': node } } } },
        mergePatch,
      );

      const attempts: [string, Record<string, unknown>, string][] = [
        [
          'overwrite the allocation every replica counts',
          { annotations: { 'hami.io/vgpu-devices-allocated': 'x' } },
          'removes hami.io/vgpu-devices-allocated',
        ],
        [
          'remove the allocation',
          { annotations: { 'hami.io/vgpu-devices-allocated': null } },
          'removes hami.io/vgpu-devices-allocated',
        ],
        [
          'raise its own memory limit before Allocate',
          { annotations: { 'hami.io/vgpu-devices-to-allocate': 'GPU-a,NVIDIA,40960,100:;' } },
          'removes hami.io/vgpu-devices-to-allocate',
        ],
        [
          'finish the allocation itself',
          { annotations: { 'hami.io/bind-phase': 'success' } },
          'removes hami.io/bind-phase',
        ],
        [
          'add a scheduler-owned key',
          { annotations: { 'hami.io/vgpu-mig-allocations': '[]' } },
          'removes hami.io/vgpu-mig-allocations',
        ],
        [
          'move the node label',
          { labels: { 'hami.io/vgpu-node': 'elsewhere' } },
          'the label hami.io/vgpu-node is written only by vgpu-warden',
        ],
        [
          'remove the node label',
          { labels: { 'hami.io/vgpu-node': null } },
          'the label hami.io/vgpu-node is written only by vgpu-warden',
        ],
      ];
      for (const [what, metadata, text] of attempts) {
        await expectRefused(
          tenant.patchNamespacedPod({ name: 'train-0', namespace, body: { metadata } }, mergePatch),
          POD_METADATA,
          text,
          what,
        );
      }
      // A whole-object replace (kubectl replace / edit) that drops them is refused too.
      const current = await tenant.readNamespacedPod({ name: 'train-0', namespace });
      await expectRefused(
        tenant.replaceNamespacedPod({
          name: 'train-0',
          namespace,
          body: { ...current, metadata: { ...current.metadata, annotations: {}, labels: {} } },
        }),
        POD_METADATA,
        'hami.io/vgpu-devices-allocated',
        'replace without them',
      );
      await expectRefused(
        tenant.patchNamespacedPod(
          { name: 'train-0', namespace, body: [{ op: 'remove', path: '/metadata/annotations/hami.io~1bind-time' }] },
          jsonPatch,
        ),
        POD_METADATA,
        'hami.io/bind-time',
        'JSON patch',
      );

      // Its own labels and annotations stay the tenant's.
      await tenant.patchNamespacedPod(
        {
          name: 'train-0',
          namespace,
          body: { metadata: { labels: { team: 'vision' }, annotations: { 'example.com/note': 'mine' } } },
        },
        mergePatch,
      );
      const final = await admin.readNamespacedPod({ name: 'train-0', namespace });
      expect(final.metadata?.annotations).to.deep.equal({
        ...HAMI_ANNOTATIONS,
        'hami.io/vgpu-node': node,
        'example.com/note': 'mine',
      });
      expect(final.metadata?.labels).to.deep.equal({ 'hami.io/vgpu-node': node, team: 'vision' });
    });

    it('cannot create pods carrying scheduler-owned annotations, a per-pod hami.io/webhook=ignore label does not help', async () => {
      const { kubeConfig, namespace } = testCluster();
      const tenant = coreAs(kubeConfig, tenantUser(namespace));
      await expectRefused(
        tenant.createNamespacedPod({
          namespace,
          body: pod('opted-out', {
            scheduler: SCHEDULER,
            labels: { 'hami.io/webhook': 'ignore' },
            annotations: { 'hami.io/vgpu-devices-to-allocate': ALLOCATED },
          }),
        }),
        POD_METADATA,
        'adds, changes or removes hami.io/vgpu-devices-to-allocate',
        'opt-out label',
      );
      await expectRefused(
        tenant.createNamespacedPod({
          namespace,
          body: pod('cpu-only', { annotations: { 'hami.io/bind-phase': 'success' }, containers: [container('web')] }),
        }),
        POD_METADATA,
        'hami.io/bind-phase',
        'a pod without GPU requests',
      );
      await expectRefused(
        tenant.createNamespacedPod({
          namespace,
          body: pod('labelled', { scheduler: SCHEDULER, labels: { 'hami.io/vgpu-node': 'gpu-1' } }),
        }),
        POD_METADATA,
        'the label hami.io/vgpu-node',
        'the node label',
      );
      // The same pods without them are admitted.
      await tenant.createNamespacedPod({
        namespace,
        body: pod('opted-out', {
          scheduler: SCHEDULER,
          labels: { 'hami.io/webhook': 'ignore' },
          annotations: { 'hami.io/node-scheduler-policy': 'spread' },
        }),
      });
      await tenant.createNamespacedPod({ namespace, body: pod('cpu-only', { containers: [container('web')] }) });
    });

    it('cannot create a GPU pod for another scheduler or with a preset nodeName; a node may create its mirror pods', async () => {
      const { kubeConfig, namespace } = testCluster();
      const tenant = coreAs(kubeConfig, tenantUser(namespace));
      const cases: [string, V1Pod, string][] = [
        ['no schedulerName (the default)', pod('a'), `must be scheduled by ${SCHEDULER}, not default-scheduler`],
        ['default-scheduler', pod('b', { scheduler: 'default-scheduler' }), 'not default-scheduler'],
        ['another scheduler', pod('c', { scheduler: 'volcano' }), 'not volcano'],
        [
          'a GPU init container only',
          pod('d', {
            initContainers: [container('prep', { 'nvidia.com/gpucores': '30' })],
            containers: [container('web')],
          }),
          'not default-scheduler',
        ],
        [
          'a preset nodeName',
          pod('e', { scheduler: SCHEDULER, nodeName: 'gpu-1' }),
          'must not preset spec.nodeName (gpu-1)',
        ],
        [
          'a mirror-pod annotation from a non-node',
          pod('f', { scheduler: SCHEDULER, nodeName: 'gpu-1', annotations: { 'kubernetes.io/config.mirror': 'x' } }),
          'must not preset spec.nodeName',
        ],
      ];
      for (const [what, body, text] of cases)
        await expectRefused(tenant.createNamespacedPod({ namespace, body }), GPU_PODS, text, what);
      const long = 'x'.repeat(70);
      const { message } = await refusal(tenant.createNamespacedPod({ namespace, body: pod('g', { scheduler: long }) }));
      expect(message)
        .to.include(`not ${'x'.repeat(63)}...:`)
        .and.not.include(long);

      await tenant.createNamespacedPod({ namespace, body: pod('ours', { scheduler: SCHEDULER }) });
      await tenant.createNamespacedPod({
        namespace,
        body: pod('cpu', { scheduler: 'volcano', containers: [container('web')] }),
      });
      // kubelet's mirror of a static GPU pod: bound already, created by the node itself.
      // As kubelet makes it: NodeRestriction admits a node's mirror pod only when the pod is owned
      // by that Node (with its UID).
      const { core: admin } = testCluster();
      const nodeUid = (await admin.readNode({ name: probeNode })).metadata?.uid;
      const node = coreAs(kubeConfig, `system:node:${probeNode}`, 'system:nodes');
      const mirror = pod('static-gpu-1', {
        nodeName: probeNode,
        annotations: { 'kubernetes.io/config.mirror': 'hash' },
      });
      mirror.metadata = {
        ...mirror.metadata,
        ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: probeNode, uid: nodeUid ?? '', controller: true }],
      };
      await node.createNamespacedPod({ namespace, body: mirror });
    });

    it('cannot get scheduler-owned annotations onto pods through a Deployment template: the ReplicaSet controller is refused', async () => {
      const { core: admin, kubeConfig, namespace } = testCluster();
      const tenantApps = impersonating(kubeConfig, tenantUser(namespace)).makeApiClient(AppsV1Api);
      const adminApps = kubeConfig.makeApiClient(AppsV1Api);
      // The real deployment and ReplicaSet controllers, with their own ServiceAccounts as in a cluster.
      const manager = await sharedControlPlane().startControllerManager({
        controllers: ['deployment-controller', 'replicaset-controller'],
      });
      try {
        const deployment = (name: string, annotations: Record<string, string>): V1Deployment => ({
          metadata: { name },
          spec: {
            replicas: 1,
            selector: { matchLabels: { app: name } },
            template: {
              metadata: { labels: { app: name }, annotations },
              spec: pod('x', { scheduler: SCHEDULER }).spec!,
            },
          },
        });
        // Deployments are not guarded (a template is not a pod); the pods they stamp out are.
        await tenantApps.createNamespacedDeployment({
          namespace,
          body: deployment('forged', { 'hami.io/vgpu-devices-allocated': ';' }),
        });
        await tenantApps.createNamespacedDeployment({
          namespace,
          body: deployment('clean', { 'example.com/note': 'x' }),
        });
        const failure = await eventually(
          'the ReplicaSet to report its refused pod',
          async () => {
            const sets = await adminApps.listNamespacedReplicaSet({ namespace, labelSelector: 'app=forged' });
            const set = sets.items[0];
            return (
              set?.status?.conditions?.find((condition) => condition.type === 'ReplicaFailure')?.message ??
              notYet(
                set === undefined
                  ? 'no app=forged ReplicaSet'
                  : `ReplicaSet ${set.metadata?.name ?? '?'}: ${set.status?.replicas ?? 0} replicas, conditions [${(set.status?.conditions ?? []).map((condition) => condition.type).join(', ')}]`,
              )
            );
          },
          60_000,
          200,
        );
        expect(failure)
          .to.include(`ValidatingAdmissionPolicy '${POD_METADATA}'`)
          .and.include('hami.io/vgpu-devices-allocated');
        const clean = await eventually(
          "the clean Deployment's pod",
          async () => {
            const pods = await admin.listNamespacedPod({ namespace, labelSelector: 'app=clean' });
            if (pods.items[0] !== undefined) return pods.items[0];
            const sets = await adminApps.listNamespacedReplicaSet({ namespace, labelSelector: 'app=clean' });
            return notYet(
              `no app=clean pod; ReplicaSets: ${sets.items.map((set) => `${set.metadata?.name ?? '?'} [${(set.status?.conditions ?? []).map((condition) => `${condition.type}: ${(condition.message ?? '').slice(0, 120)}`).join(', ')}]`).join(' | ') || 'none'}`,
            );
          },
          60_000,
          200,
        );
        expect(clean.metadata?.ownerReferences?.[0]?.kind).to.equal('ReplicaSet');
        expect((await admin.listNamespacedPod({ namespace, labelSelector: 'app=forged' })).items).to.deep.equal([]);
      } finally {
        await manager.stop();
      }
    });

    it('cannot ask for a GPU share vgpu-warden cannot read: the refusal names the container and the resource', async () => {
      const { kubeConfig, namespace } = testCluster();
      const tenant = coreAs(kubeConfig, tenantUser(namespace));
      const policyCases: [Record<string, string>, string][] = [
        [
          { 'nvidia.com/gpu': '1', 'nvidia.com/gpucores': '150' },
          'container main: nvidia.com/gpucores must be a whole number from 0 to 100',
        ],
        [
          { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem-percentage': '101' },
          'container main: nvidia.com/gpumem-percentage must be a whole number from 0 to 100',
        ],
        [
          { 'nvidia.com/gpu': '0', 'nvidia.com/gpumem': '1000' },
          'container main: nvidia.com/gpu must be a whole number from 1 to 2147483647',
        ],
        [
          { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '3Gi' },
          'container main: nvidia.com/gpumem must be a whole number from 0 to 2147483647',
        ],
        [
          { 'nvidia.com/gpu': '2147483648' },
          'container main: nvidia.com/gpu must be a whole number from 1 to 2147483647',
        ],
      ];
      for (const [limits, text] of policyCases) {
        await expectRefused(
          tenant.createNamespacedPod({
            namespace,
            body: pod('share', { scheduler: SCHEDULER, containers: [container('main', limits)] }),
          }),
          GPU_PODS,
          `unreadable GPU share: ${text}`,
          JSON.stringify(limits),
        );
      }
      await expectRefused(
        tenant.createNamespacedPod({
          namespace,
          body: pod('init', {
            scheduler: SCHEDULER,
            initContainers: [container('prep', { 'nvidia.com/gpucores': '101' })],
            containers: [container('main', { 'nvidia.com/gpucores': '120' })],
          }),
        }),
        GPU_PODS,
        'container prep: nvidia.com/gpucores must be a whole number from 0 to 100 (and 1 more containers)',
        'init container',
      );
      // kube-apiserver's own validation already refuses fractions of an extended resource, before
      // any admission policy runs; the policy would refuse them as well.
      for (const fraction of ['1.5', '500m']) {
        const { status, message } = await refusal(
          tenant.createNamespacedPod({
            namespace,
            body: pod('fraction', {
              scheduler: SCHEDULER,
              containers: [container('main', { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': fraction })],
            }),
          }),
        );
        expect(status, message).to.equal(422);
        expect(message)
          .to.include('spec.containers[0].resources.limits[nvidia.com/gpumem]')
          .and.include('must be an integer');
      }
      // Readable shares, in the forms kube-apiserver canonicalises them to, are admitted.
      await tenant.createNamespacedPod({
        namespace,
        body: pod('fine', {
          scheduler: SCHEDULER,
          containers: [
            container('main', { 'nvidia.com/gpu': '2', 'nvidia.com/gpumem': '3k', 'nvidia.com/gpucores': '100' }),
          ],
        }),
      });
      await tenant.createNamespacedPod({
        namespace,
        body: pod('whole', {
          scheduler: SCHEDULER,
          containers: [container('main', { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem-percentage': '0' })],
        }),
      });
    });

    it('cannot label its namespace hami.io/webhook=ignore (nor can a namespace admin), and the opt-out does not lift the policies', async () => {
      const { core: admin, kubeConfig, namespace } = testCluster();
      await rbac.createNamespacedRoleBinding({
        namespace,
        body: {
          metadata: { name: 'owner-admin' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
          subjects: [serviceAccountRef(`system:serviceaccount:${namespace}:owner`)],
        },
      });
      for (const user of [tenantUser(namespace), `system:serviceaccount:${namespace}:owner`]) {
        const { status, message } = await refusal(
          coreAs(kubeConfig, user).patchNamespace(
            { name: namespace, body: { metadata: { labels: { 'hami.io/webhook': 'ignore' } } } },
            mergePatch,
          ),
        );
        expect(status, message).to.equal(403);
        expect(message).to.include('cannot patch resource "namespaces"');
      }
      // As if for a migration, a cluster admin opts the namespace out of the webhook: the policies still apply.
      await admin.patchNamespace(
        { name: namespace, body: { metadata: { labels: { 'hami.io/webhook': 'ignore' } } } },
        mergePatch,
      );
      await expectRefused(
        coreAs(kubeConfig, tenantUser(namespace)).createNamespacedPod({ namespace, body: pod('unmanaged') }),
        GPU_PODS,
        'not default-scheduler',
      );
    });
  });

  describe('every identity but the two', () => {
    it('is refused, cluster admins included: pods/status and a Binding cannot carry the scheduler-owned metadata either', async () => {
      const { core: admin, namespace } = testCluster();
      const node = await createGpuNode(admin);
      const created = await admin.createNamespacedPod({ namespace, body: pod('p', { scheduler: SCHEDULER }) });
      // The status subresource may change labels and annotations, so it is guarded.
      await expectRefused(
        admin.patchNamespacedPodStatus(
          { name: 'p', namespace, body: { metadata: { annotations: { 'hami.io/bind-phase': 'success' } } } },
          mergePatch,
        ),
        POD_METADATA,
        'hami.io/bind-phase',
        'pods/status annotation',
      );
      await expectRefused(
        admin.patchNamespacedPodStatus(
          { name: 'p', namespace, body: { metadata: { labels: { 'hami.io/vgpu-node': node } } } },
          mergePatch,
        ),
        POD_METADATA,
        'the label hami.io/vgpu-node',
        'pods/status label',
      );
      await expectRefused(
        admin.createNamespacedPodBinding({
          name: 'p',
          namespace,
          body: {
            metadata: { name: 'p', uid: created.metadata!.uid!, annotations: HAMI_ANNOTATIONS },
            target: { kind: 'Node', name: node },
          },
        }),
        POD_METADATA,
        'hami.io/vgpu-devices-allocated',
        'Binding',
      );
      expect((await admin.readNamespacedPod({ name: 'p', namespace })).spec?.nodeName).to.equal(undefined);
      // A Binding without them (what kube-scheduler creates for other pods) goes through.
      await admin.createNamespacedPodBinding({
        name: 'p',
        namespace,
        body: { metadata: { name: 'p', uid: created.metadata!.uid! }, target: { kind: 'Node', name: node } },
      });
      expect((await admin.readNamespacedPod({ name: 'p', namespace })).spec?.nodeName).to.equal(node);
    });
  });

  describe("vgpu-warden's identity", () => {
    it('binds with the HAMi annotations, labels the pod, takes and releases the node lock; and changes nothing else', async () => {
      const { core: admin, kubeConfig, namespace } = testCluster();
      const warden = coreAs(kubeConfig, WARDEN);
      const node = await createGpuNode(admin);
      const created = await admin.createNamespacedPod({ namespace, body: pod('train-0', { scheduler: SCHEDULER }) });
      const locks = new KubeNodeLockApi(warden);
      const lock = formatLockValue(new Date(), { namespace, name: 'train-0' });
      const locked = await locks.writeLock(node, (await locks.readNode(node)).resourceVersion, lock);
      expect(locked.lock).to.equal(lock);
      await warden.createNamespacedPodBinding({
        name: 'train-0',
        namespace,
        body: {
          metadata: {
            name: 'train-0',
            uid: created.metadata!.uid!,
            annotations: { ...HAMI_ANNOTATIONS, 'hami.io/vgpu-node': node },
          },
          target: { kind: 'Node', name: node },
        },
      });
      await warden.patchNamespacedPod(
        {
          name: 'train-0',
          namespace,
          body: { metadata: { uid: created.metadata!.uid!, labels: { 'hami.io/vgpu-node': node } } },
        },
        mergePatch,
      );
      const bound = await admin.readNamespacedPod({ name: 'train-0', namespace });
      expect(bound.spec?.nodeName).to.equal(node);
      expect(bound.metadata?.annotations).to.deep.include(HAMI_ANNOTATIONS);
      expect(bound.metadata?.labels).to.deep.equal({ 'hami.io/vgpu-node': node });

      const podAttempts: [string, () => Promise<unknown>, string][] = [
        [
          'change the image',
          () =>
            warden.patchNamespacedPod(
              {
                name: 'train-0',
                namespace,
                body: { spec: { containers: [{ name: 'main', image: 'registry.invalid/other:1' }] } },
              },
              setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
            ),
          "may not change a pod's spec",
        ],
        [
          'add a toleration',
          () =>
            warden.patchNamespacedPod(
              {
                name: 'train-0',
                namespace,
                body: [{ op: 'add', path: '/spec/tolerations/-', value: { key: 'k', operator: 'Exists' } }],
              },
              jsonPatch,
            ),
          "may not change a pod's spec",
        ],
        [
          'add another label',
          () =>
            warden.patchNamespacedPod(
              { name: 'train-0', namespace, body: { metadata: { labels: { team: 'x' } } } },
              mergePatch,
            ),
          'this request changes label team',
        ],
        [
          'add another annotation',
          () =>
            warden.patchNamespacedPod(
              { name: 'train-0', namespace, body: { metadata: { annotations: { 'example.com/x': 'y' } } } },
              mergePatch,
            ),
          'this request changes annotation example.com/x',
        ],
        [
          'add a finalizer',
          () =>
            warden.patchNamespacedPod(
              { name: 'train-0', namespace, body: { metadata: { finalizers: ['example.com/hold'] } } },
              mergePatch,
            ),
          'finalizers or owner references',
        ],
        [
          'write the status',
          () =>
            warden.patchNamespacedPodStatus(
              { name: 'train-0', namespace, body: { status: { message: 'hello' } } },
              mergePatch,
            ),
          "may not change a pod's status",
        ],
      ];
      for (const [what, attempt, text] of podAttempts) await expectRefused(attempt(), WARDEN_PODS, text, what);

      const nodeAttempts: [string, () => Promise<unknown>, string][] = [
        [
          'label a node',
          () => warden.patchNode({ name: node, body: { metadata: { labels: { gpu: 'off' } } } }, mergePatch),
          "may not change a node's labels",
        ],
        [
          'taint a node',
          () =>
            warden.patchNode(
              { name: node, body: { spec: { taints: [{ key: 'k', effect: 'NoSchedule' }] } } },
              mergePatch,
            ),
          "may not change a node's spec",
        ],
        [
          'cordon a node',
          () => warden.patchNode({ name: node, body: { spec: { unschedulable: true } } }, mergePatch),
          "may not change a node's spec",
        ],
        [
          "rewrite the device plugin's inventory",
          () =>
            warden.patchNode(
              { name: node, body: { metadata: { annotations: { 'hami.io/node-nvidia-register': '[]' } } } },
              mergePatch,
            ),
          "vgpu-warden's identity may change on a node only the annotation hami.io/mutex.lock; this request changes hami.io/node-nvidia-register",
        ],
        [
          'write node status',
          () =>
            warden.patchNodeStatus(
              { name: node, body: { status: { capacity: { 'nvidia.com/gpu': '99' } } } },
              mergePatch,
            ),
          "may not change a node's status",
        ],
      ];
      for (const [what, attempt, text] of nodeAttempts) await expectRefused(attempt(), IDENTITY_NODES, text, what);

      const released = await locks.writeLock(node, (await locks.readNode(node)).resourceVersion, null);
      expect(released.lock).to.equal(undefined);
      expect((await admin.readNode({ name: node })).metadata?.labels?.gpu).to.equal('on');
    });
  });

  describe("the HAMi device plugin's identity", () => {
    it('records allocation progress, registers its GPUs and releases the lock; and changes nothing else on the node', async () => {
      const { core: admin, kubeConfig, namespace } = testCluster();
      const warden = coreAs(kubeConfig, WARDEN);
      const plugin = coreAs(kubeConfig, DEVICE_PLUGIN);
      const node = await createGpuNode(admin);
      const created = await admin.createNamespacedPod({ namespace, body: pod('train-0', { scheduler: SCHEDULER }) });
      const wardenLocks = new KubeNodeLockApi(warden);
      await wardenLocks.writeLock(
        node,
        (await wardenLocks.readNode(node)).resourceVersion,
        formatLockValue(new Date(), { namespace, name: 'train-0' }),
      );
      await warden.createNamespacedPodBinding({
        name: 'train-0',
        namespace,
        body: {
          metadata: { name: 'train-0', uid: created.metadata!.uid!, annotations: HAMI_ANNOTATIONS },
          target: { kind: 'Node', name: node },
        },
      });

      // Allocate: consume the to-allocate entries, then bind-phase success and release the lock.
      await plugin.patchNamespacedPod(
        {
          name: 'train-0',
          namespace,
          body: { metadata: { annotations: { 'hami.io/vgpu-devices-to-allocate': ';;' } } },
        },
        mergePatch,
      );
      await plugin.patchNamespacedPod(
        { name: 'train-0', namespace, body: { metadata: { annotations: { 'hami.io/bind-phase': 'success' } } } },
        mergePatch,
      );
      const pluginLocks = new KubeNodeLockApi(plugin);
      expect(
        (await pluginLocks.writeLock(node, (await pluginLocks.readNode(node)).resourceVersion, null)).lock,
      ).to.equal(undefined);
      await plugin.patchNode(
        {
          name: node,
          body: {
            metadata: {
              annotations: { 'hami.io/node-nvidia-register': '[]', 'hami.io/node-handshake': 'Reported 2026-12-01' },
            },
          },
        },
        mergePatch,
      );
      const after = await admin.readNamespacedPod({ name: 'train-0', namespace });
      expect(after.metadata?.annotations).to.deep.include({
        'hami.io/vgpu-devices-to-allocate': ';;',
        'hami.io/bind-phase': 'success',
        'hami.io/vgpu-devices-allocated': ALLOCATED,
      });

      const nodeAttempts: [string, () => Promise<unknown>, string][] = [
        [
          'label a node',
          () => plugin.patchNode({ name: node, body: { metadata: { labels: { gpu: 'off' } } } }, mergePatch),
          "may not change a node's labels",
        ],
        [
          'taint a node',
          () =>
            plugin.patchNode(
              { name: node, body: { spec: { taints: [{ key: 'k', effect: 'NoSchedule' }] } } },
              mergePatch,
            ),
          "may not change a node's spec",
        ],
        [
          'write another annotation',
          () =>
            plugin.patchNode({ name: node, body: { metadata: { annotations: { 'example.com/x': 'y' } } } }, mergePatch),
          "the HAMi device plugin's identity may change on a node only the annotations hami.io/mutex.lock, hami.io/node-nvidia-register",
        ],
        [
          'write node status',
          () =>
            plugin.patchNodeStatus(
              { name: node, body: { status: { capacity: { 'nvidia.com/gpu': '99' } } } },
              mergePatch,
            ),
          "may not change a node's status",
        ],
      ];
      for (const [what, attempt, text] of nodeAttempts) await expectRefused(attempt(), IDENTITY_NODES, text, what);
      const final = await admin.readNode({ name: node });
      expect(final.metadata?.annotations).to.deep.include({ 'hami.io/node-nvidia-register': '[]' });
      expect(final.metadata?.annotations?.[NODE_LOCK_ANNOTATION]).to.equal(undefined);
    });
  });

  describe('GPU pods and the webhook', () => {
    it('refuses a GPU pod that keeps default-scheduler while the webhook is down; under the admission-warn component admits it with a warning', async () => {
      const { core: admin, kubeConfig, namespace } = testCluster();
      const tenant = coreAs(kubeConfig, tenantUser(namespace));
      // The shipped webhook (failurePolicy Ignore) pointing at a port nobody listens on.
      const shippedWebhook = loadYaml<V1MutatingWebhookConfiguration>(
        readFileSync(resolve(MANIFESTS_DIR, 'webhook.yaml'), 'utf8'),
      );
      const closed = await findFreePort();
      const webhookName = uniqueName('vgpu-warden-test-down');
      await admission.createMutatingWebhookConfiguration({
        body: {
          metadata: { name: webhookName },
          webhooks: (shippedWebhook.webhooks ?? []).map((webhook) => ({
            ...webhook,
            clientConfig: { url: `https://127.0.0.1:${closed}/mutate` },
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } },
          })),
        },
      });
      const component = applyComponent(shipped.bindings, resolve(MANIFESTS_DIR, 'components', 'admission-warn'));
      try {
        expect(shippedWebhook.webhooks?.map((webhook) => webhook.failurePolicy)).to.deep.equal(['Ignore', 'Ignore']);
        await expectRefused(
          tenant.createNamespacedPod({ namespace, body: pod('fell-through') }),
          GPU_PODS,
          'not default-scheduler',
        );

        await putBindings(testBindings(component.objects));
        await eventually(
          'the bindings to warn instead of refusing',
          async () => {
            const refusal = await tenant
              .createNamespacedPod({ namespace, body: pod('fell-through'), dryRun: 'All' })
              .then(
                () => undefined,
                (error: unknown) => error,
              );
            return refusal === undefined
              ? true
              : notYet(
                  `the dry run refused: ${httpStatusOf(refusal) ?? '?'} ${(apiStatusOf(refusal)?.message ?? (refusal instanceof Error ? refusal.message : 'no API status')).slice(0, 200)}`,
                );
          },
          20_000,
          100,
        );
        const answer = await tenant.createNamespacedPodWithHttpInfo({
          namespace,
          body: pod('fell-through', { annotations: { 'hami.io/bind-phase': 'success' } }),
        });
        expect(answer.data.spec?.schedulerName).to.equal('default-scheduler');
        const warning = answer.headers.warning ?? '';
        expect(warning)
          .to.include(`Validation failed for ValidatingAdmissionPolicy '${GPU_PODS}'`)
          .and.include(`must be scheduled by ${SCHEDULER}, not default-scheduler`);
        expect(warning)
          .to.include(`Validation failed for ValidatingAdmissionPolicy '${POD_METADATA}'`)
          .and.include('hami.io/bind-phase');
      } finally {
        await putBindings(testBindings());
        await admission.deleteMutatingWebhookConfiguration({ name: webhookName });
      }
      await untilEnforced(namespace);
      expect((await admin.readNamespacedPod({ name: 'fell-through', namespace })).spec?.nodeName).to.equal(undefined);
    });

    it('admits a GPU pod once the webhook has given it our scheduler: validation runs after mutation', async () => {
      const { kubeConfig, namespace } = testCluster();
      const webhook = new WebhookFixture(sharedControlPlane());
      await webhook.start();
      try {
        await webhook.enroll(namespace);
        const tenant = coreAs(kubeConfig, tenantUser(namespace));
        const created = await tenant.createNamespacedPod({ namespace, body: pod('mutated') });
        expect(created.spec?.schedulerName).to.equal(SCHEDULER);
        // A pod label does not opt out of the webhook any more: this one is mutated too.
        const labelled = await tenant.createNamespacedPod({
          namespace,
          body: pod('labelled', { scheduler: 'default-scheduler', labels: { 'hami.io/webhook': 'ignore' } }),
        });
        expect(labelled.spec?.schedulerName).to.equal(SCHEDULER);
        expect(webhook.seen).to.include.members([`CREATE ${namespace}/mutated`, `CREATE ${namespace}/labelled`]);
      } finally {
        await webhook.stop();
      }
    });
  });
});
