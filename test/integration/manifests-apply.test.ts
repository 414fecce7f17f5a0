import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import {
  AdmissionregistrationV1Api,
  CoordinationV1Api,
  KubernetesObjectApi,
  loadYaml,
  PatchStrategy,
  setHeaderOptions,
  type KubernetesObject,
  type V1ConfigMap,
  type V1MutatingWebhookConfiguration,
  type V1Pod,
  type V1RoleBinding,
} from '@kubernetes/client-node';
import { expect } from 'chai';
import { ALLOCATED_ANNOTATION } from '../../src/hami/wire.js';
import { apiStatusOf, httpStatusOf } from '../../src/kube/errors.js';
import { findFreePort, findFreePorts } from '../../src/local/free-port.js';
import { locateBinaries } from '../../src/local/k8s-binaries.js';
import { ManagedProcess } from '../../src/local/managed-process.js';
import { simulatedGpuNode } from '../../src/local/simulated-gpu-node.js';
import { waitUntilReady } from '../../src/local/wait-until-ready.js';
import { findObject, loadManifestObjects, type ManifestObject } from '../support/manifests.js';
import { mtlsRequest } from '../support/mtls-request.js';
import { podStory } from '../support/observations.js';
import { writeServiceAccountKubeconfig } from '../support/shipped-identities.js';
import { eventually, notYet, testCluster } from '../support/test-cluster.js';

const REPO = resolve(import.meta.dirname, '..', '..');
const SHIPPED_NAMESPACE = 'vgpu-warden';
const WARDEN_SERVICE_ACCOUNT = 'vgpu-warden';
const SCHEDULER_SERVICE_ACCOUNT = 'vgpu-warden-scheduler';

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
        if (webhook.clientConfig.service?.namespace === SHIPPED_NAMESPACE)
          webhook.clientConfig.service.namespace = namespace;
      }
    }
    if (copy.kind === 'ConfigMap') {
      const data = (copy as unknown as V1ConfigMap).data ?? {};
      for (const [key, value] of Object.entries(data))
        data[key] = value.replace(`resourceNamespace: ${SHIPPED_NAMESPACE}\n`, `resourceNamespace: ${namespace}\n`);
    }
    return copy;
  });
}

function describeFailure(object: KubernetesObject, error: unknown): string {
  const message = apiStatusOf(error)?.message ?? (error instanceof Error ? error.message : String(error));
  return `${object.kind ?? '?'} ${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}: ${message}`;
}

const of = (objects: AnyObject[], kind: string) => objects.filter((object) => object.kind === kind);

/**
 * Creates the shipped PriorityClass (cluster-scoped) unless it exists; returns it when this call
 * created it, for the caller to delete.
 */
async function ensurePriorityClass(api: KubernetesObjectApi, objects: AnyObject[]): Promise<AnyObject | undefined> {
  const priorityClass = of(objects, 'PriorityClass')[0];
  if (priorityClass === undefined) throw new Error('the manifests ship no PriorityClass');
  try {
    await api.create(priorityClass);
    return priorityClass;
  } catch (error) {
    if (httpStatusOf(error) === 409) return undefined;
    throw error;
  }
}

describe('manifests/ on the real apiserver', function () {
  this.timeout(120_000);

  it('accepts every object of the kustomization in a server-side dry run, and its pod under Pod Security restricted', async () => {
    const { kubeConfig, core, namespace } = testCluster();
    const api = KubernetesObjectApi.makeApiClient(kubeConfig);
    const shipped = loadManifestObjects();
    // The Namespace exactly as shipped: a dry run creates nothing. Everything that lives in it goes
    // into this test's namespace, which exists (a dry-run create in a missing namespace fails).
    const objects = relocate(shipped, namespace);
    expect(objects.map((object) => object.kind)).to.include.members([
      'Namespace',
      'Deployment',
      'MutatingWebhookConfiguration',
      'ClusterRole',
      'Role',
    ]);
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

    // The pods name the shipped PriorityClass, which must exist for them to be admitted at all.
    const createdPriorityClass = await ensurePriorityClass(api, objects);
    try {
      await dryRunPods(core, namespace, shipped, objects);
    } finally {
      if (createdPriorityClass) await api.delete(createdPriorityClass).catch(() => undefined);
    }
  });

  async function dryRunPods(
    core: ReturnType<typeof testCluster>['core'],
    namespace: string,
    shipped: ManifestObject[],
    objects: AnyObject[],
  ): Promise<void> {
    // Pod Security is enforced on pods, not Deployments: give this namespace the shipped Namespace's
    // labels and dry-run the pod the Deployment would make.
    const shippedNamespace = findObject(shipped, 'Namespace', SHIPPED_NAMESPACE);
    const podSecurity = Object.fromEntries(
      Object.entries(shippedNamespace.metadata?.labels ?? {}).filter(([key]) =>
        key.startsWith('pod-security.kubernetes.io/'),
      ),
    );
    expect(podSecurity).to.deep.include({ 'pod-security.kubernetes.io/enforce': 'restricted' });
    await core.patchNamespace(
      { name: namespace, body: { metadata: { labels: podSecurity } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const podOf = (deployment: string): V1Pod => {
      const template = findObject(
        objects.map((object) => ({ file: '', object })),
        'Deployment',
        deployment,
      ).spec!.template;
      return { metadata: { name: `${deployment}-pod`, labels: template.metadata?.labels }, spec: template.spec };
    };
    const admitted = await core.createNamespacedPod({ namespace, body: podOf('vgpu-warden'), dryRun: 'All' });
    expect(admitted.spec?.containers.map((container) => container.name)).to.deep.equal(['vgpu-warden']);
    const pod = podOf('vgpu-warden-scheduler');
    const admittedScheduler = await core.createNamespacedPod({ namespace, body: pod, dryRun: 'All' });
    expect(admittedScheduler.spec?.containers.map((container) => container.name)).to.deep.equal(['kube-scheduler']);
    // The same pod with one setting loosened is refused, so the check above did enforce "restricted".
    const loosened = structuredClone(pod);
    delete loosened.spec!.containers[0]!.securityContext!.allowPrivilegeEscalation;
    const refusal = await core.createNamespacedPod({ namespace, body: loosened, dryRun: 'All' }).then(
      () => undefined,
      (error: unknown) => apiStatusOf(error)?.message,
    );
    expect(refusal).to.be.a('string').that.includes('restricted').and.includes('allowPrivilegeEscalation');
  }

  // What each ServiceAccount may and may not do, right by right: test/integration/rbac-least-privilege.test.ts.
  it('runs vgpu-warden serve and kube-scheduler each under its own ServiceAccount, never forbidden, scheduling a GPU pod through the mTLS extender', async () => {
    const { kubeConfig, core, namespace, controlPlane } = testCluster();
    const api = KubernetesObjectApi.makeApiClient(kubeConfig);
    const objects = relocate(loadManifestObjects(), namespace);
    // The MutatingWebhookConfiguration is created for real (serve patches its caBundle) but made to
    // match no namespace, so no other test's pods are sent to a Service without endpoints.
    for (const config of of(objects, 'MutatingWebhookConfiguration') as V1MutatingWebhookConfiguration[]) {
      for (const webhook of config.webhooks ?? [])
        webhook.namespaceSelector = { matchLabels: { 'vgpu-warden.test/never': namespace } };
    }
    const applied = [
      'ServiceAccount',
      'ClusterRole',
      'ClusterRoleBinding',
      'Role',
      'RoleBinding',
      'ConfigMap',
      'MutatingWebhookConfiguration',
    ].flatMap((kind) => of(objects, kind));
    const created: AnyObject[] = [];
    const workDir = mkdtempSync(join(tmpdir(), 'manifests-apply-'));
    const processes: ManagedProcess[] = [];
    const node = `manifests-gpu-${namespace}`.slice(0, 60);
    try {
      for (const object of applied) {
        await api.create(object);
        created.push(object);
      }
      // Credentials of each ServiceAccount, as its pod would have them.
      const wardenKubeconfig = join(workDir, 'vgpu-warden.kubeconfig');
      const schedulerKubeconfig = join(workDir, 'vgpu-warden-scheduler.kubeconfig');
      await writeServiceAccountKubeconfig(core, controlPlane, namespace, WARDEN_SERVICE_ACCOUNT, wardenKubeconfig);
      await writeServiceAccountKubeconfig(
        core,
        controlPlane,
        namespace,
        SCHEDULER_SERVICE_ACCOUNT,
        schedulerKubeconfig,
      );

      // vgpu-warden serve with the Deployment's environment (downward API filled in): the extender on
      // all interfaces with client authentication, as shipped; the other listeners on free loopback ports.
      const deployment = findObject(
        objects.map((object) => ({ file: '', object })),
        'Deployment',
        'vgpu-warden',
      );
      const warden = deployment.spec!.template.spec!.containers.find((container) => container.name === 'vgpu-warden')!;
      const podName = `vgpu-warden-${namespace}`.slice(0, 60);
      const fields: Record<string, string> = { 'metadata.name': podName, 'metadata.namespace': namespace };
      const [webhookPort = 0, extenderPort = 0, metricsPort = 0] = await findFreePorts(3);
      const env: NodeJS.ProcessEnv = {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        ...Object.fromEntries(
          (warden.env ?? []).map((variable) => [
            variable.name,
            variable.valueFrom?.fieldRef ? fields[variable.valueFrom.fieldRef.fieldPath] : variable.value,
          ]),
        ),
        KUBECONFIG: wardenKubeconfig,
        WEBHOOK_HOST: '127.0.0.1',
        WEBHOOK_PORT: String(webhookPort),
        EXTENDER_PORT: String(extenderPort),
        METRICS_HOST: '127.0.0.1',
        METRICS_PORT: String(metricsPort),
        LOG_LEVEL: 'info',
      };
      expect(env).to.deep.include({ EXTENDER_HOST: '0.0.0.0', EXTENDER_CLIENT_AUTH: 'true' });
      const serve = ManagedProcess.start({
        name: 'vgpu-warden serve',
        command: process.execPath,
        args: ['--import', 'tsx', join(REPO, 'src', 'main.ts'), ...(warden.args ?? [])],
        logFile: join(workDir, 'serve.log'),
        cwd: REPO,
        env,
      });
      processes.push(serve);
      await waitUntilReady(serve, { url: `https://127.0.0.1:${webhookPort}/readyz`, timeoutMs: 45_000 });
      const secret = await core.readNamespacedSecret({ name: env.CERT_SECRET_NAME ?? '', namespace });
      expect(secret.type).to.equal('kubernetes.io/tls');
      expect(secret.data?.['tls.crt']).to.be.a('string').and.not.empty;

      // kube-scheduler's client certificate, mounted the way the kubelet mounts the Secret volume.
      const clientSecret = await core.readNamespacedSecret({ name: env.EXTENDER_CLIENT_SECRET_NAME ?? '', namespace });
      expect(Object.keys(clientSecret.data ?? {}).sort()).to.deep.equal(['ca.crt', 'tls.crt', 'tls.key']);
      const clientDir = join(workDir, 'extender-client');
      mkdirSync(clientDir);
      for (const [key, value] of Object.entries(clientSecret.data ?? {}))
        writeFileSync(join(clientDir, key), Buffer.from(value, 'base64'), { mode: 0o440 });
      const clientFile = (key: string) => readFileSync(join(clientDir, key), 'utf8');
      // The extender is ready once the pod and node informers have synced (list and watch allowed);
      // it answers only kube-scheduler's certificate.
      await eventually(
        'the extender to be ready',
        async () => {
          const answer = await mtlsRequest({
            host: '127.0.0.1',
            port: extenderPort,
            path: '/readyz',
            caPem: clientFile('ca.crt'),
            client: { certPem: clientFile('tls.crt'), keyPem: clientFile('tls.key') },
          });
          return 'status' in answer && answer.status === 200 ? true : notYet(JSON.stringify(answer).slice(0, 300));
        },
        30_000,
        200,
      );
      expect(
        await mtlsRequest({ host: '127.0.0.1', port: extenderPort, path: '/readyz', caPem: clientFile('ca.crt') }),
      ).to.have.property('refused');
      const admission = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
      const caBundles = (config: V1MutatingWebhookConfiguration) =>
        (config.webhooks ?? [])
          .map(
            (webhook) =>
              `${webhook.name}: ${(webhook.clientConfig.caBundle ?? '') === '' ? 'no caBundle' : 'caBundle set'}`,
          )
          .join(', ');
      await eventually(
        'serve to patch the caBundle',
        async () => {
          const config = await admission.readMutatingWebhookConfiguration({ name: env.WEBHOOK_CONFIG_NAME ?? '' });
          return (config.webhooks ?? []).every((webhook) => (webhook.clientConfig.caBundle ?? '') !== '')
            ? true
            : notYet(caBundles(config));
        },
        20_000,
        200,
      );
      // A reset of the caBundle (what a forced GitOps apply of an older manifest does) is repaired by
      // serve's watch, under the shipped RBAC (list and watch by name), within seconds.
      const resetAt = Date.now();
      await admission.patchMutatingWebhookConfiguration(
        {
          name: env.WEBHOOK_CONFIG_NAME ?? '',
          body: [{ op: 'replace', path: '/webhooks/0/clientConfig/caBundle', value: '' }],
        },
        setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
      );
      await eventually(
        'serve to repair the reset caBundle',
        async () => {
          const config = await admission.readMutatingWebhookConfiguration({ name: env.WEBHOOK_CONFIG_NAME ?? '' });
          return (config.webhooks ?? []).every((webhook) => (webhook.clientConfig.caBundle ?? '') !== '')
            ? true
            : notYet(caBundles(config));
        },
        10_000,
        100,
      );
      expect(Date.now() - resetAt, 'repaired within seconds').to.be.below(10_000);
      const coordination = kubeConfig.makeApiClient(CoordinationV1Api);
      await eventually(
        'serve to take its leader Lease',
        async () => {
          const lease = await coordination.readNamespacedLease({ name: env.LEASE_NAME ?? '', namespace });
          return lease.spec?.holderIdentity?.startsWith(`${podName}_`) === true
            ? true
            : notYet(`holder ${lease.spec?.holderIdentity ?? 'none'}`);
        },
        20_000,
        200,
      );

      // The stock kube-scheduler with the shipped configuration and its own ServiceAccount,
      // authenticating and authorizing its own clients through the apiserver as in its pod, calling
      // serve's extender with the mounted client certificate (the address is this machine's).
      const configMap = of(objects, 'ConfigMap')[0] as V1ConfigMap;
      type Extender = { urlPrefix: string; tlsConfig: Record<string, string> };
      const schedulerConfig = loadYaml<
        Record<string, unknown> & {
          extenders: Extender[];
          leaderElection: { resourceNamespace: string; resourceName: string };
        }
      >(configMap.data?.['config.yaml'] ?? '');
      const extender = schedulerConfig.extenders[0]!;
      extender.urlPrefix = `https://127.0.0.1:${extenderPort}`;
      for (const [field, path] of Object.entries(extender.tlsConfig))
        extender.tlsConfig[field] = join(clientDir, basename(path));
      expect(Object.keys(extender.tlsConfig).sort()).to.deep.equal(['caFile', 'certFile', 'keyFile']);
      const schedulerConfigPath = join(workDir, 'kube-scheduler.json');
      writeFileSync(
        schedulerConfigPath,
        JSON.stringify({ ...schedulerConfig, clientConnection: { kubeconfig: schedulerKubeconfig } }),
      );
      const schedulerPort = await findFreePort();
      const scheduler = ManagedProcess.start({
        name: 'kube-scheduler',
        command: locateBinaries({ repoRoot: REPO, env: process.env }).kubeScheduler,
        args: [
          `--config=${schedulerConfigPath}`,
          '--bind-address=127.0.0.1',
          `--secure-port=${schedulerPort}`,
          `--authentication-kubeconfig=${schedulerKubeconfig}`,
          `--authorization-kubeconfig=${schedulerKubeconfig}`,
          '--v=2',
        ],
        logFile: join(workDir, 'kube-scheduler.log'),
        cwd: workDir,
      });
      processes.push(scheduler);
      await waitUntilReady(scheduler, { url: `https://127.0.0.1:${schedulerPort}/healthz`, timeoutMs: 30_000 });
      expect(schedulerConfig.leaderElection.resourceNamespace).to.equal(namespace);
      await eventually(
        'kube-scheduler to take its leader Lease',
        async () => {
          const lease = await coordination.readNamespacedLease({
            name: schedulerConfig.leaderElection.resourceName,
            namespace,
          });
          return lease.spec?.holderIdentity?.startsWith(`${hostname()}_`) === true
            ? true
            : notYet(`holder ${lease.spec?.holderIdentity ?? 'none'}`);
        },
        30_000,
        200,
      );

      // A GPU pod goes kube-scheduler → extender (filter, prioritize, bind over mTLS) → Binding by
      // vgpu-warden's ServiceAccount.
      await core.createNode({ body: simulatedGpuNode({ name: node, gpus: 2 }) });
      await core.createNamespacedPod({
        namespace,
        body: {
          metadata: { name: 'gpu-pod' },
          spec: {
            schedulerName: 'hami-scheduler',
            nodeSelector: { 'kubernetes.io/hostname': node },
            containers: [
              {
                name: 'main',
                image: 'registry.invalid/none:1',
                resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1000' } },
              },
            ],
          },
        },
      });
      const bound = await eventually(
        'the GPU pod to be bound through the extender',
        async () => {
          const pod = await core.readNamespacedPod({ name: 'gpu-pod', namespace });
          return pod.spec?.nodeName === node ? pod : notYet(await podStory(core, namespace, 'gpu-pod', pod));
        },
        45_000,
        250,
      );
      expect(
        bound.metadata?.annotations?.[ALLOCATED_ANNOTATION],
        'bound by the extender, with HAMi annotations',
      ).to.be.a('string').and.not.empty;

      const schedulerLog = readFileSync(scheduler.logFile, 'utf8');
      const serveLog = readFileSync(serve.logFile, 'utf8');
      expect(
        schedulerLog.split('\n').filter((line) => /forbidden/i.test(line)),
        'kube-scheduler was refused',
      ).to.deep.equal([]);
      expect(
        serveLog.split('\n').filter((line) => /forbidden|HTTP 403|refused a client/i.test(line)),
        'serve was refused, or refused kube-scheduler',
      ).to.deep.equal([]);
      // The one handshake refused is this test's own request without a certificate.
      expect(serveLog.split('\n').filter((line) => /TLS handshake refused/.test(line))).to.have.length(1);
    } finally {
      for (const child of processes.reverse()) await child.stop();
      await core.deleteNode({ name: node }).catch(() => undefined);
      for (const object of created.reverse()) {
        if (object.metadata?.namespace === undefined || object.metadata.namespace === 'kube-system')
          await api.delete(object).catch(() => undefined);
      }
      rmSync(workDir, { recursive: true, force: true });
    }
  });
});
