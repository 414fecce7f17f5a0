import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AdmissionregistrationV1Api,
  AuthorizationV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { expect } from 'chai';
import { loadKubeConfig } from '../../src/kube/client.js';
import { httpStatusOf } from '../../src/kube/errors.js';
import { simulatedGpuNode } from '../../src/local/simulated-gpu-node.js';
import {
  accessReview,
  applyShippedIdentities,
  serviceAccountSubject,
  writeServiceAccountKubeconfig,
  type ResourceAttributes,
  type Subject,
} from '../support/shipped-identities.js';
import { testCluster, uniqueName } from '../support/test-cluster.js';

/** [why, verb, resource, the rest of the request]: one line of an identity's rights, read as a sentence. */
type Right = [why: string, verb: string, resource: string, attributes?: Omit<ResourceAttributes, 'verb' | 'resource'>];

const coordination = 'coordination.k8s.io';
const admission = 'admissionregistration.k8s.io';
const rbac = 'rbac.authorization.k8s.io';

/** `ns` is where the manifests put vgpu-warden (this test's namespace); tenant-a is anybody else's. */
function wardenNeeds(ns: string): Right[] {
  return [
    ['the state store lists pods in every namespace', 'list', 'pods'],
    ['the state store watches pods in every namespace', 'watch', 'pods'],
    [
      'the bind re-reads its pod, the lock paths read a lock owner',
      'get',
      'pods',
      { namespace: 'tenant-a', name: 'train-0' },
    ],
    ['the hami.io/vgpu-node label after a bind', 'patch', 'pods', { namespace: 'tenant-a', name: 'train-0' }],
    [
      'the extender binds a pod, with HAMi annotations',
      'create',
      'pods',
      { namespace: 'tenant-a', name: 'train-0', subresource: 'binding' },
    ],
    ['the state store lists nodes', 'list', 'nodes'],
    ['the state store watches nodes', 'watch', 'nodes'],
    ['NodeLocks reads a node', 'get', 'nodes', { name: 'gpu-1' }],
    ['NodeLocks writes hami.io/mutex.lock', 'patch', 'nodes', { name: 'gpu-1' }],
    ['the state store lists ResourceQuotas (namespace GPU quota)', 'list', 'resourcequotas'],
    ['the state store watches ResourceQuotas', 'watch', 'resourcequotas'],
    ['Events on pods, in their namespace', 'create', 'events', { namespace: 'tenant-a' }],
    ['Events on nodes, in default', 'create', 'events', { namespace: 'default' }],
    ['Events aggregated (count) on pods', 'patch', 'events', { namespace: 'tenant-a' }],
    ['Events aggregated on nodes, in default', 'patch', 'events', { namespace: 'default' }],
    ["reads kubelet's Events about a gone lock owner", 'list', 'events', { namespace: 'tenant-a' }],
    [
      "reads a node's kubelet Lease",
      'get',
      'leases',
      { group: coordination, namespace: 'kube-node-lease', name: 'gpu-1' },
    ],
    [
      'reads the caBundle of its webhook',
      'get',
      'mutatingwebhookconfigurations',
      { group: admission, name: 'vgpu-warden' },
    ],
    [
      'replaces the caBundle of its webhook',
      'update',
      'mutatingwebhookconfigurations',
      { group: admission, name: 'vgpu-warden' },
    ],
    // A list or watch with fieldSelector metadata.name=vgpu-warden is authorized as one on that name.
    [
      'lists its webhook to watch it (caBundle repair)',
      'list',
      'mutatingwebhookconfigurations',
      { group: admission, name: 'vgpu-warden' },
    ],
    [
      'watches its webhook (caBundle repair)',
      'watch',
      'mutatingwebhookconfigurations',
      { group: admission, name: 'vgpu-warden' },
    ],
    ["creates the sweeper's Lease", 'create', 'leases', { group: coordination, namespace: ns }],
    ["reads the sweeper's Lease", 'get', 'leases', { group: coordination, namespace: ns, name: 'vgpu-warden' }],
    ["renews the sweeper's Lease", 'update', 'leases', { group: coordination, namespace: ns, name: 'vgpu-warden' }],
    ['creates its certificate Secrets', 'create', 'secrets', { namespace: ns }],
    ['reads the CA Secret', 'get', 'secrets', { namespace: ns, name: 'vgpu-warden-tls' }],
    ['renews the CA Secret', 'update', 'secrets', { namespace: ns, name: 'vgpu-warden-tls' }],
    [
      "reads kube-scheduler's client certificate Secret",
      'get',
      'secrets',
      { namespace: ns, name: 'vgpu-warden-scheduler-client' },
    ],
    [
      "renews kube-scheduler's client certificate Secret",
      'update',
      'secrets',
      { namespace: ns, name: 'vgpu-warden-scheduler-client' },
    ],
  ];
}

function wardenMustNot(ns: string): Right[] {
  return [
    ['delete pods', 'delete', 'pods', { namespace: 'tenant-a', name: 'train-0' }],
    ['delete all pods of a namespace', 'deletecollection', 'pods', { namespace: 'tenant-a' }],
    ['create pods', 'create', 'pods', { namespace: 'tenant-a' }],
    ['create pods in its own namespace', 'create', 'pods', { namespace: ns }],
    ['replace a pod (spec, image)', 'update', 'pods', { namespace: 'tenant-a', name: 'train-0' }],
    ['write pod status', 'update', 'pods', { namespace: 'tenant-a', name: 'train-0', subresource: 'status' }],
    ['patch pod status', 'patch', 'pods', { namespace: 'tenant-a', name: 'train-0', subresource: 'status' }],
    ['evict pods', 'create', 'pods', { namespace: 'tenant-a', name: 'train-0', subresource: 'eviction' }],
    [
      'add ephemeral containers',
      'patch',
      'pods',
      { namespace: 'tenant-a', name: 'train-0', subresource: 'ephemeralcontainers' },
    ],
    ['exec into pods', 'create', 'pods', { namespace: 'tenant-a', name: 'train-0', subresource: 'exec' }],
    ['read pod logs', 'get', 'pods', { namespace: 'tenant-a', name: 'train-0', subresource: 'log' }],
    ['create top-level Bindings', 'create', 'bindings', { namespace: 'tenant-a' }],
    ['create nodes', 'create', 'nodes'],
    ['replace a node', 'update', 'nodes', { name: 'gpu-1' }],
    ['delete a node', 'delete', 'nodes', { name: 'gpu-1' }],
    ['patch node status', 'patch', 'nodes', { name: 'gpu-1', subresource: 'status' }],
    ['proxy to a kubelet', 'get', 'nodes', { name: 'gpu-1', subresource: 'proxy' }],
    ['delete Events', 'delete', 'events', { namespace: 'tenant-a' }],
    [
      'change a ResourceQuota (raise its own limits)',
      'update',
      'resourcequotas',
      { namespace: 'tenant-a', name: 'gpu-quota' },
    ],
    [
      'write a ResourceQuota status',
      'update',
      'resourcequotas',
      { namespace: 'tenant-a', name: 'gpu-quota', subresource: 'status' },
    ],
    ['delete a ResourceQuota', 'delete', 'resourcequotas', { namespace: 'tenant-a', name: 'gpu-quota' }],
    ['list Secrets in its namespace', 'list', 'secrets', { namespace: ns }],
    ['watch Secrets in its namespace', 'watch', 'secrets', { namespace: ns }],
    ['read another Secret in its namespace', 'get', 'secrets', { namespace: ns, name: 'another-secret' }],
    ['read Secrets of other namespaces', 'get', 'secrets', { namespace: 'tenant-a', name: 'vgpu-warden-tls' }],
    ['read Secrets in kube-system', 'get', 'secrets', { namespace: 'kube-system', name: 'vgpu-warden-tls' }],
    ['list Secrets anywhere', 'list', 'secrets'],
    ['create Secrets in other namespaces', 'create', 'secrets', { namespace: 'tenant-a' }],
    ['delete its CA Secret', 'delete', 'secrets', { namespace: ns, name: 'vgpu-warden-tls' }],
    ['patch its CA Secret', 'patch', 'secrets', { namespace: ns, name: 'vgpu-warden-tls' }],
    [
      "read kube-scheduler's authentication ConfigMap",
      'get',
      'configmaps',
      { namespace: 'kube-system', name: 'extension-apiserver-authentication' },
    ],
    ['read ConfigMaps of its namespace', 'list', 'configmaps', { namespace: ns }],
    [
      "renew kube-scheduler's leader Lease",
      'update',
      'leases',
      { group: coordination, namespace: ns, name: 'vgpu-warden-scheduler' },
    ],
    ['renew other Leases', 'update', 'leases', { group: coordination, namespace: ns, name: 'another-lease' }],
    ['delete its Lease', 'delete', 'leases', { group: coordination, namespace: ns, name: 'vgpu-warden' }],
    ['create Leases elsewhere', 'create', 'leases', { group: coordination, namespace: 'kube-system' }],
    [
      "renew a kubelet's Lease (a dead node would look alive)",
      'update',
      'leases',
      { group: coordination, namespace: 'kube-node-lease', name: 'gpu-1' },
    ],
    ['list Leases anywhere', 'list', 'leases', { group: coordination }],
    [
      "change another webhook's configuration",
      'update',
      'mutatingwebhookconfigurations',
      { group: admission, name: 'someone-else' },
    ],
    ['register webhooks', 'create', 'mutatingwebhookconfigurations', { group: admission }],
    ['list every webhook configuration', 'list', 'mutatingwebhookconfigurations', { group: admission }],
    ['watch every webhook configuration', 'watch', 'mutatingwebhookconfigurations', { group: admission }],
    [
      "watch another webhook's configuration",
      'watch',
      'mutatingwebhookconfigurations',
      { group: admission, name: 'someone-else' },
    ],
    [
      "patch its webhook's configuration (only the caBundle is replaced, with update)",
      'patch',
      'mutatingwebhookconfigurations',
      { group: admission, name: 'vgpu-warden' },
    ],
    ['read validating webhook configurations', 'list', 'validatingwebhookconfigurations', { group: admission }],
    ['delete its webhook', 'delete', 'mutatingwebhookconfigurations', { group: admission, name: 'vgpu-warden' }],
    [
      'loosen the admission policies',
      'update',
      'validatingadmissionpolicies',
      { group: admission, name: 'vgpu-warden-scheduler-owned-pod-metadata' },
    ],
    [
      'unbind the admission policies',
      'delete',
      'validatingadmissionpolicybindings',
      { group: admission, name: 'vgpu-warden-scheduler-owned-pod-metadata' },
    ],
    [
      "mint kube-scheduler's tokens",
      'create',
      'serviceaccounts',
      { namespace: ns, name: 'vgpu-warden-scheduler', subresource: 'token' },
    ],
    ['impersonate ServiceAccounts', 'impersonate', 'serviceaccounts', { namespace: ns, name: 'vgpu-warden-scheduler' }],
    ['impersonate users', 'impersonate', 'users', { name: 'admin' }],
    ['grant itself roles', 'create', 'rolebindings', { group: rbac, namespace: ns }],
    ['grant itself cluster roles', 'create', 'clusterrolebindings', { group: rbac }],
    ['widen its roles', 'escalate', 'clusterroles', { group: rbac, name: 'vgpu-warden' }],
    [
      'change its own Deployment (image, ServiceAccount)',
      'patch',
      'deployments',
      { group: 'apps', namespace: ns, name: 'vgpu-warden' },
    ],
    ['bind persistent volumes', 'patch', 'persistentvolumes', { name: 'pv-1' }],
    ['change persistent volume claims', 'update', 'persistentvolumeclaims', { namespace: 'tenant-a', name: 'data' }],
  ];
}

/** kube-scheduler with the volume binder, delegated authentication and its own Lease. */
function schedulerNeeds(ns: string): Right[] {
  return [
    ['its informers list pods', 'list', 'pods'],
    ['its informers watch pods', 'watch', 'pods'],
    ['its informers list nodes', 'list', 'nodes'],
    [
      'the default binder binds non-GPU pods',
      'create',
      'pods',
      { namespace: 'tenant-a', name: 'web-0', subresource: 'binding' },
    ],
    [
      'PodScheduled conditions and nominatedNodeName',
      'patch',
      'pods',
      { namespace: 'tenant-a', name: 'web-0', subresource: 'status' },
    ],
    ['preemption deletes victims', 'delete', 'pods', { namespace: 'tenant-a', name: 'web-0' }],
    ['scheduling Events', 'create', 'events', { group: 'events.k8s.io', namespace: 'tenant-a' }],
    ['spreading reads Services', 'list', 'services'],
    ['spreading reads ReplicaSets', 'list', 'replicasets', { group: 'apps' }],
    ['spreading reads StatefulSets', 'list', 'statefulsets', { group: 'apps' }],
    ['preemption reads PodDisruptionBudgets', 'list', 'poddisruptionbudgets', { group: 'policy' }],
    ['the volume binder reads claims', 'list', 'persistentvolumeclaims'],
    ['the volume binder binds claims', 'update', 'persistentvolumeclaims', { namespace: 'tenant-a', name: 'data' }],
    ['the volume binder binds volumes', 'update', 'persistentvolumes', { name: 'pv-1' }],
    ['the volume binder reads storage classes', 'list', 'storageclasses', { group: 'storage.k8s.io' }],
    ['CSI limits read CSINodes', 'list', 'csinodes', { group: 'storage.k8s.io' }],
    ['its leader Lease', 'update', 'leases', { group: coordination, namespace: ns, name: 'vgpu-warden-scheduler' }],
    ['creates its leader Lease', 'create', 'leases', { group: coordination, namespace: ns }],
    [
      'delegated authentication of its /metrics',
      'get',
      'configmaps',
      { namespace: 'kube-system', name: 'extension-apiserver-authentication' },
    ],
    ['delegated authentication', 'create', 'tokenreviews', { group: 'authentication.k8s.io' }],
    ['delegated authorization', 'create', 'subjectaccessreviews', { group: 'authorization.k8s.io' }],
  ];
}

function schedulerMustNot(ns: string): Right[] {
  return [
    ['read the CA Secret (the CA key)', 'get', 'secrets', { namespace: ns, name: 'vgpu-warden-tls' }],
    [
      'read its client certificate Secret through the API (the kubelet mounts it)',
      'get',
      'secrets',
      { namespace: ns, name: 'vgpu-warden-scheduler-client' },
    ],
    ['list Secrets in its namespace', 'list', 'secrets', { namespace: ns }],
    ['read Secrets anywhere', 'get', 'secrets', { namespace: 'tenant-a', name: 'token' }],
    ['write pod annotations (HAMi allocations)', 'patch', 'pods', { namespace: 'tenant-a', name: 'train-0' }],
    ['replace pods', 'update', 'pods', { namespace: 'tenant-a', name: 'train-0' }],
    ['create pods', 'create', 'pods', { namespace: 'tenant-a' }],
    ['write the node lock', 'patch', 'nodes', { name: 'gpu-1' }],
    ['replace nodes', 'update', 'nodes', { name: 'gpu-1' }],
    [
      "renew vgpu-warden's sweeper Lease",
      'update',
      'leases',
      { group: coordination, namespace: ns, name: 'vgpu-warden' },
    ],
    [
      "change vgpu-warden's webhook",
      'update',
      'mutatingwebhookconfigurations',
      { group: admission, name: 'vgpu-warden' },
    ],
    ['create Secrets', 'create', 'secrets', { namespace: ns }],
    [
      "mint vgpu-warden's tokens",
      'create',
      'serviceaccounts',
      { namespace: ns, name: 'vgpu-warden', subresource: 'token' },
    ],
  ];
}

describe('RBAC of manifests/: each identity can do what the design needs, and nothing more (real kube-apiserver)', function () {
  this.timeout(90_000);

  async function wrongAnswers(subject: Subject, needs: Right[], mustNot: Right[]): Promise<string[]> {
    const authorization = testCluster().kubeConfig.makeApiClient(AuthorizationV1Api);
    const wrong: string[] = [];
    for (const [expected, rights] of [
      [true, needs],
      [false, mustNot],
    ] as const) {
      for (const [why, verb, resource, attributes] of rights) {
        const allowed = await accessReview(authorization, subject, { verb, resource, ...attributes });
        if (allowed !== expected)
          wrong.push(
            `${expected ? 'denied' : 'allowed'}: ${verb} ${resource} ${JSON.stringify(attributes ?? {})} (${why})`,
          );
      }
    }
    return wrong;
  }

  it("vgpu-warden's ServiceAccount: pods, bindings, nodes, events, ResourceQuotas (read), its webhook, its Lease and its two Secrets; none of kube-scheduler's rights", async () => {
    const { kubeConfig, namespace } = testCluster();
    const cleanup = await applyShippedIdentities(kubeConfig, namespace);
    try {
      const wrong = await wrongAnswers(
        serviceAccountSubject(namespace, 'vgpu-warden'),
        wardenNeeds(namespace),
        wardenMustNot(namespace),
      );
      expect(wrong, wrong.join('\n')).to.deep.equal([]);
    } finally {
      await cleanup();
    }
  });

  it("kube-scheduler's ServiceAccount: kube-scheduler's roles and its Lease; no Secret, no pod or node writes of vgpu-warden's", async () => {
    const { kubeConfig, namespace } = testCluster();
    const cleanup = await applyShippedIdentities(kubeConfig, namespace);
    try {
      const wrong = await wrongAnswers(
        serviceAccountSubject(namespace, 'vgpu-warden-scheduler'),
        schedulerNeeds(namespace),
        schedulerMustNot(namespace),
      );
      expect(wrong, wrong.join('\n')).to.deep.equal([]);
    } finally {
      await cleanup();
    }
  });

  it("refuses real requests made with the two ServiceAccounts' own tokens where RBAC says no", async () => {
    const { kubeConfig, core, namespace, controlPlane } = testCluster();
    const cleanup = await applyShippedIdentities(kubeConfig, namespace);
    const dir = mkdtempSync(join(tmpdir(), 'rbac-tokens-'));
    const node = uniqueName('rbac-node');
    try {
      // What is there to get at: its own Secret, another Secret, a Secret elsewhere, a pod and a node.
      const secret = (name: string, where: string) =>
        core.createNamespacedSecret({ namespace: where, body: { metadata: { name }, stringData: { key: 'value' } } });
      await secret('vgpu-warden-tls', namespace);
      await secret('another-secret', namespace);
      await secret(`tenant-secret-${namespace}`.slice(0, 60), 'default');
      await core.createNamespacedPod({
        namespace,
        body: { metadata: { name: 'victim' }, spec: { containers: [{ name: 'c', image: 'registry.invalid/none:1' }] } },
      });
      await core.createNode({ body: simulatedGpuNode({ name: node, gpus: 1 }) });

      const as = async (serviceAccount: string): Promise<CoreV1Api> => {
        const path = join(dir, serviceAccount);
        await writeServiceAccountKubeconfig(core, controlPlane, namespace, serviceAccount, path);
        return loadKubeConfig(path).makeApiClient(CoreV1Api);
      };
      const status = (call: Promise<unknown>) =>
        call.then(
          () => 200,
          (error: unknown) => httpStatusOf(error) ?? -1,
        );
      const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

      const warden = await as('vgpu-warden');
      expect(
        await status(warden.readNamespacedSecret({ name: 'vgpu-warden-tls', namespace })),
        'its own Secret',
      ).to.equal(200);
      expect(
        await status(warden.readNamespacedSecret({ name: 'another-secret', namespace })),
        'another Secret',
      ).to.equal(403);
      expect(await status(warden.listNamespacedSecret({ namespace })), 'listing Secrets').to.equal(403);
      expect(
        await status(
          warden.readNamespacedSecret({ name: `tenant-secret-${namespace}`.slice(0, 60), namespace: 'default' }),
        ),
        'a Secret elsewhere',
      ).to.equal(403);
      expect(await status(warden.deleteNamespacedPod({ name: 'victim', namespace })), 'deleting a pod').to.equal(403);
      expect(
        await status(
          warden.createNamespacedPod({
            namespace,
            body: { metadata: { name: 'planted' }, spec: { containers: [{ name: 'c', image: 'x' }] } },
          }),
        ),
        'creating a pod',
      ).to.equal(403);
      expect(
        await status(warden.replaceNode({ name: node, body: await core.readNode({ name: node }) })),
        'replacing a node',
      ).to.equal(403);
      expect(await status(warden.readNamespacedPod({ name: 'victim', namespace })), 'reading a pod').to.equal(200);
      // The caBundle watch's LIST, exactly as src/tls/webhook-configuration-source.ts sends it, and
      // without the selector.
      const wardenAdmission = loadKubeConfig(join(dir, 'vgpu-warden')).makeApiClient(AdmissionregistrationV1Api);
      expect(
        await status(wardenAdmission.listMutatingWebhookConfiguration({ fieldSelector: 'metadata.name=vgpu-warden' })),
        'listing its webhook by name',
      ).to.equal(200);
      expect(await status(wardenAdmission.listMutatingWebhookConfiguration()), 'listing every webhook').to.equal(403);
      expect(
        await status(wardenAdmission.listMutatingWebhookConfiguration({ fieldSelector: 'metadata.name=someone-else' })),
        'listing another webhook',
      ).to.equal(403);

      const scheduler = await as('vgpu-warden-scheduler');
      expect(
        await status(scheduler.readNamespacedSecret({ name: 'vgpu-warden-tls', namespace })),
        'the CA Secret',
      ).to.equal(403);
      expect(
        await status(
          scheduler.patchNode(
            { name: node, body: { metadata: { annotations: { 'hami.io/mutex.lock': 'x' } } } },
            mergePatch,
          ),
        ),
        'the node lock',
      ).to.equal(403);
      expect(
        await status(
          scheduler.patchNamespacedPod(
            {
              name: 'victim',
              namespace,
              body: { metadata: { annotations: { 'hami.io/vgpu-devices-allocated': 'x' } } },
            },
            mergePatch,
          ),
        ),
        'pod annotations',
      ).to.equal(403);
      expect(await status(scheduler.listNode()), 'listing nodes').to.equal(200);
    } finally {
      await core.deleteNode({ name: node }).catch(() => undefined);
      await core
        .deleteNamespacedSecret({ name: `tenant-secret-${namespace}`.slice(0, 60), namespace: 'default' })
        .catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
      await cleanup();
    }
  });
});
