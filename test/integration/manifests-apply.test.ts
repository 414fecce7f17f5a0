import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  AdmissionregistrationV1Api,
  AuthorizationV1Api,
  CoordinationV1Api,
  KubernetesObjectApi,
  loadYaml,
  PatchStrategy,
  setHeaderOptions,
  type KubernetesObject,
  type V1ConfigMap,
  type V1Deployment,
  type V1MutatingWebhookConfiguration,
  type V1Pod,
  type V1RoleBinding,
} from '@kubernetes/client-node';
import { expect } from 'chai';
import { apiStatusOf } from '../../src/kube/errors.js';
import { findFreePort } from '../../src/local/free-port.js';
import { locateBinaries } from '../../src/local/k8s-binaries.js';
import { renderKubeconfig } from '../../src/local/kubeconfig.js';
import { ManagedProcess } from '../../src/local/managed-process.js';
import { waitUntilReady } from '../../src/local/wait-until-ready.js';
import { findObject, loadManifestObjects, type ManifestObject } from '../support/manifests.js';
import { eventually, testCluster } from '../support/test-cluster.js';

const REPO = resolve(import.meta.dirname, '..', '..');
const SHIPPED_NAMESPACE = 'vgpu-warden';
const SERVICE_ACCOUNT = 'vgpu-warden';

type AnyObject = KubernetesObject & Record<string, unknown>;

/**
 * The base moved into `namespace`, the way a kustomize namespace override would move it (objects,
 * RBAC subjects, the webhook's Service), plus the kube-scheduler leader Lease inside the embedded
 * configuration. kube-system stays where it is.
 */
function relocate(objects: readonly ManifestObject[], namespace: string): AnyObject[] {
  return objects.map(({ object }) => {
    const copy = structuredClone(object);
    if (copy.metadata?.namespace === SHIPPED_NAMESPACE) copy.metadata.namespace = namespace;
    if (copy.kind === 'RoleBinding' || copy.kind === 'ClusterRoleBinding') {
      for (const subject of (copy as unknown as V1RoleBinding).subjects ?? []) {
        if (subject.namespace === SHIPPED_NAMESPACE) subject.namespace = namespace;
      }
    }
    if (copy.kind === 'MutatingWebhookConfiguration') {
      for (const webhook of (copy as unknown as V1MutatingWebhookConfiguration).webhooks ?? []) {
        if (webhook.clientConfig.service?.namespace === SHIPPED_NAMESPACE) webhook.clientConfig.service.namespace = namespace;
      }
    }
    if (copy.kind === 'ConfigMap') {
      const data = (copy as unknown as V1ConfigMap).data ?? {};
      for (const [key, value] of Object.entries(data)) data[key] = value.replace(`resourceNamespace: ${SHIPPED_NAMESPACE}\n`, `resourceNamespace: ${namespace}\n`);
    }
    return copy;
  });
}

function describeFailure(object: KubernetesObject, error: unknown): string {
  const message = apiStatusOf(error)?.message ?? (error instanceof Error ? error.message : String(error));
  return `${object.kind ?? '?'} ${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}: ${message}`;
}

const of = (objects: AnyObject[], kind: string) => objects.filter((object) => object.kind === kind);

describe('manifests/ on the real apiserver', function () {
  this.timeout(120_000);

  it('accepts every object of the kustomization in a server-side dry run, and its pod under Pod Security restricted', async () => {
    const { kubeConfig, core, namespace } = testCluster();
    const api = KubernetesObjectApi.makeApiClient(kubeConfig);
    const shipped = loadManifestObjects();
    // The Namespace exactly as shipped: a dry run creates nothing. Everything that lives in it goes
    // into this test's namespace, which exists (a dry-run create in a missing namespace fails).
    const objects = relocate(shipped, namespace);
    expect(objects.map((object) => object.kind)).to.include.members(['Namespace', 'Deployment', 'MutatingWebhookConfiguration', 'ClusterRole', 'Role']);
    const failures: string[] = [];
    for (const object of objects) {
      try {
        const answer = await api.create(object, undefined, 'All');
        expect(answer.metadata?.name).to.equal(object.metadata?.name);
      } catch (error) {
        failures.push(describeFailure(object, error));
      }
    }
    expect(failures, failures.join('\n')).to.deep.equal([]);

    // Pod Security is enforced on pods, not Deployments: give this namespace the shipped Namespace's
    // labels and dry-run the pod the Deployment would make.
    const shippedNamespace = findObject(shipped, 'Namespace', SHIPPED_NAMESPACE);
    const podSecurity = Object.fromEntries(Object.entries(shippedNamespace.metadata?.labels ?? {}).filter(([key]) => key.startsWith('pod-security.kubernetes.io/')));
    expect(podSecurity).to.deep.include({ 'pod-security.kubernetes.io/enforce': 'restricted' });
    await core.patchNamespace({ name: namespace, body: { metadata: { labels: podSecurity } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    const template = findObject(objects.map((object) => ({ file: '', object })), 'Deployment', 'vgpu-warden').spec!.template;
    const pod: V1Pod = { metadata: { name: 'vgpu-warden-pod', labels: template.metadata?.labels }, spec: template.spec };
    const admitted = await core.createNamespacedPod({ namespace, body: pod, dryRun: 'All' });
    expect(admitted.spec?.containers.map((container) => container.name)).to.have.members(['vgpu-warden', 'kube-scheduler']);
    // The same pod with one setting loosened is refused, so the check above did enforce "restricted".
    const loosened = structuredClone(pod);
    delete loosened.spec!.containers[1]!.securityContext!.allowPrivilegeEscalation;
    const refusal = await core.createNamespacedPod({ namespace, body: loosened, dryRun: 'All' }).then(() => undefined, (error: unknown) => apiStatusOf(error)?.message);
    expect(refusal).to.be.a('string').that.includes('restricted').and.includes('allowPrivilegeEscalation');
  });

  it('grants enough for vgpu-warden serve and the kube-scheduler sidecar to run as the ServiceAccount, and no more', async () => {
    const { kubeConfig, core, namespace, controlPlane } = testCluster();
    const api = KubernetesObjectApi.makeApiClient(kubeConfig);
    const objects = relocate(loadManifestObjects(), namespace);
    // The MutatingWebhookConfiguration is created for real (serve patches its caBundle) but made to
    // match no namespace, so no other test's pods are sent to a Service without endpoints.
    for (const config of of(objects, 'MutatingWebhookConfiguration') as V1MutatingWebhookConfiguration[]) {
      for (const webhook of config.webhooks ?? []) webhook.namespaceSelector = { matchLabels: { 'vgpu-warden.test/never': namespace } };
    }
    const applied = ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding', 'ConfigMap', 'MutatingWebhookConfiguration'].flatMap((kind) => of(objects, kind));
    const created: AnyObject[] = [];
    const workDir = mkdtempSync(join(tmpdir(), 'manifests-apply-'));
    const processes: ManagedProcess[] = [];
    try {
      for (const object of applied) {
        await api.create(object);
        created.push(object);
      }
      const user = `system:serviceaccount:${namespace}:${SERVICE_ACCOUNT}`;
      const groups = ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'];
      const authorization = kubeConfig.makeApiClient(AuthorizationV1Api);
      const can = async (verb: string, resource: string, options: { group?: string; namespace?: string; name?: string; subresource?: string } = {}) => {
        const review = await authorization.createSubjectAccessReview({
          body: { spec: { user, groups, resourceAttributes: { verb, resource, group: options.group ?? '', namespace: options.namespace ?? '', name: options.name ?? '', subresource: options.subresource ?? '' } } },
        });
        return review.status?.allowed === true;
      };
      const checks: [boolean, string, string, Parameters<typeof can>[2]][] = [
        // vgpu-warden
        [true, 'watch', 'pods', {}], [true, 'patch', 'pods', { namespace: 'default' }], [true, 'create', 'pods', { namespace: 'default', subresource: 'binding' }],
        [true, 'list', 'nodes', {}], [true, 'patch', 'nodes', { name: 'gpu-1' }], [true, 'create', 'events', { namespace: 'default' }], [true, 'patch', 'events', { namespace: 'default' }],
        [true, 'update', 'mutatingwebhookconfigurations', { group: 'admissionregistration.k8s.io', name: 'vgpu-warden' }],
        [true, 'update', 'leases', { group: 'coordination.k8s.io', namespace, name: 'vgpu-warden' }],
        [true, 'create', 'secrets', { namespace }], [true, 'update', 'secrets', { namespace, name: 'vgpu-warden-tls' }],
        // the kube-scheduler sidecar
        [true, 'update', 'leases', { group: 'coordination.k8s.io', namespace, name: 'vgpu-warden-scheduler' }],
        [true, 'watch', 'configmaps', { namespace: 'kube-system', name: 'extension-apiserver-authentication' }],
        [true, 'list', 'persistentvolumeclaims', {}], [true, 'list', 'csinodes', { group: 'storage.k8s.io' }],
        // and nothing beyond
        [false, 'get', 'secrets', { namespace, name: 'another-secret' }], [false, 'list', 'secrets', { namespace }], [false, 'get', 'secrets', { namespace: 'default', name: 'vgpu-warden-tls' }],
        [false, 'update', 'mutatingwebhookconfigurations', { group: 'admissionregistration.k8s.io', name: 'someone-else' }],
        [false, 'create', 'mutatingwebhookconfigurations', { group: 'admissionregistration.k8s.io' }],
        [false, 'update', 'leases', { group: 'coordination.k8s.io', namespace, name: 'another-lease' }],
        [false, 'delete', 'nodes', { name: 'gpu-1' }], [false, 'update', 'nodes', { name: 'gpu-1' }], [false, 'create', 'pods', { namespace: 'default' }],
        [false, 'get', 'configmaps', { namespace: 'kube-system', name: 'another-config' }],
      ];
      const wrong: string[] = [];
      for (const [expected, verb, resource, options] of checks) {
        if (await can(verb, resource, options) !== expected) wrong.push(`${expected ? 'denied' : 'allowed'}: ${verb} ${resource} ${JSON.stringify(options)}`);
      }
      expect(wrong, wrong.join('\n')).to.deep.equal([]);

      // Credentials of the ServiceAccount, as the pod would have them.
      const token = (await core.createNamespacedServiceAccountToken({ name: SERVICE_ACCOUNT, namespace, body: { spec: { audiences: [], expirationSeconds: 3600 } } })).status?.token ?? '';
      expect(token).to.not.equal('');
      const kubeconfigPath = join(workDir, 'kubeconfig');
      writeFileSync(kubeconfigPath, renderKubeconfig({ clusterName: 'test', server: controlPlane.server, caPem: controlPlane.caPem, userName: SERVICE_ACCOUNT, token }), { mode: 0o600 });

      // vgpu-warden serve with the Deployment's environment (downward API filled in), on free loopback ports.
      const deployment = of(objects, 'Deployment')[0] as V1Deployment;
      const warden = deployment.spec!.template.spec!.containers.find((container) => container.name === 'vgpu-warden')!;
      const podName = `vgpu-warden-${namespace}`.slice(0, 60);
      const fields: Record<string, string> = { 'metadata.name': podName, 'metadata.namespace': namespace };
      const [webhookPort, extenderPort, metricsPort] = [await findFreePort(), await findFreePort(), await findFreePort()];
      const env: NodeJS.ProcessEnv = {
        PATH: process.env.PATH, HOME: process.env.HOME,
        ...Object.fromEntries((warden.env ?? []).map((variable) => [variable.name, variable.valueFrom?.fieldRef ? fields[variable.valueFrom.fieldRef.fieldPath] : variable.value])),
        KUBECONFIG: kubeconfigPath, CERT_HOSTS: '127.0.0.1', WEBHOOK_HOST: '127.0.0.1', WEBHOOK_PORT: String(webhookPort),
        EXTENDER_PORT: String(extenderPort), METRICS_HOST: '127.0.0.1', METRICS_PORT: String(metricsPort), LOG_LEVEL: 'info',
      };
      const serve = ManagedProcess.start({
        name: 'vgpu-warden serve', command: process.execPath, args: ['--import', 'tsx', join(REPO, 'src', 'main.ts'), ...(warden.args ?? [])],
        logFile: join(workDir, 'serve.log'), cwd: REPO, env,
      });
      processes.push(serve);
      await waitUntilReady(serve, { url: `https://127.0.0.1:${webhookPort}/readyz`, timeoutMs: 45_000 });
      // The extender is ready once the pod and node informers have synced (list and watch allowed).
      await waitUntilReady(serve, { url: `https://127.0.0.1:${extenderPort}/readyz`, timeoutMs: 30_000 });
      const secret = await core.readNamespacedSecret({ name: env.CERT_SECRET_NAME ?? '', namespace });
      expect(secret.type).to.equal('kubernetes.io/tls');
      expect(secret.data?.['tls.crt']).to.be.a('string').and.not.empty;
      const admission = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
      await eventually('serve to patch the caBundle', async () => {
        const config = await admission.readMutatingWebhookConfiguration({ name: env.WEBHOOK_CONFIG_NAME ?? '' });
        return (config.webhooks ?? []).every((webhook) => (webhook.clientConfig.caBundle ?? '') !== '') ? true : undefined;
      }, 20_000, 200);
      const coordination = kubeConfig.makeApiClient(CoordinationV1Api);
      await eventually('serve to take its leader Lease', async () => {
        const lease = await coordination.readNamespacedLease({ name: env.LEASE_NAME ?? '', namespace });
        return lease.spec?.holderIdentity?.startsWith(`${podName}_`) === true ? true : undefined;
      }, 20_000, 200);

      // The stock kube-scheduler with the shipped configuration, authenticating and authorizing
      // its own clients through the apiserver as in the pod, pointed at serve's extender.
      const configMap = of(objects, 'ConfigMap')[0] as V1ConfigMap;
      const schedulerConfig = loadYaml<Record<string, unknown> & { extenders: { urlPrefix: string }[]; leaderElection: { resourceNamespace: string; resourceName: string } }>(configMap.data?.['config.yaml'] ?? '');
      schedulerConfig.extenders[0]!.urlPrefix = `https://127.0.0.1:${extenderPort}`;
      const schedulerConfigPath = join(workDir, 'kube-scheduler.json');
      writeFileSync(schedulerConfigPath, JSON.stringify({ ...schedulerConfig, clientConnection: { kubeconfig: kubeconfigPath } }));
      const schedulerPort = await findFreePort();
      const scheduler = ManagedProcess.start({
        name: 'kube-scheduler', command: locateBinaries({ repoRoot: REPO, env: process.env }).kubeScheduler,
        args: [`--config=${schedulerConfigPath}`, '--bind-address=127.0.0.1', `--secure-port=${schedulerPort}`,
          `--authentication-kubeconfig=${kubeconfigPath}`, `--authorization-kubeconfig=${kubeconfigPath}`, '--v=2'],
        logFile: join(workDir, 'kube-scheduler.log'), cwd: workDir,
      });
      processes.push(scheduler);
      await waitUntilReady(scheduler, { url: `https://127.0.0.1:${schedulerPort}/healthz`, timeoutMs: 30_000 });
      expect(schedulerConfig.leaderElection.resourceNamespace).to.equal(namespace);
      await eventually('kube-scheduler to take its leader Lease', async () => {
        const lease = await coordination.readNamespacedLease({ name: schedulerConfig.leaderElection.resourceName, namespace });
        return lease.spec?.holderIdentity?.startsWith(`${hostname()}_`) === true ? true : undefined;
      }, 30_000, 200);
      // Leadership comes after the informers synced; give late ones a moment to complain.
      await new Promise((done) => setTimeout(done, 1000));

      const schedulerLog = readFileSync(scheduler.logFile, 'utf8');
      const serveLog = readFileSync(serve.logFile, 'utf8');
      expect(schedulerLog.split('\n').filter((line) => /forbidden/i.test(line)), 'kube-scheduler was refused').to.deep.equal([]);
      expect(serveLog.split('\n').filter((line) => /forbidden|HTTP 403/i.test(line)), 'serve was refused').to.deep.equal([]);
    } finally {
      for (const child of processes.reverse()) await child.stop();
      for (const object of created.reverse()) {
        if (object.metadata?.namespace === undefined || object.metadata.namespace === 'kube-system') await api.delete(object).catch(() => undefined);
      }
      rmSync(workDir, { recursive: true, force: true });
    }
  });
});
