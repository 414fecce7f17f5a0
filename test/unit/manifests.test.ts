import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadYaml, type V1Container, type V1PolicyRule } from '@kubernetes/client-node';
import { expect } from 'chai';
import { loadConfig } from '../../src/config/load.js';
import { kubeSchedulerConfiguration } from '../../src/extender/scheduler-config.js';
import { servingNames } from '../../src/tls/serving-names.js';
import {
  findObject,
  loadManifestObjects,
  MANIFESTS_DIR,
  objectsOfKind,
  readKustomization,
} from '../support/manifests.js';

const NAMESPACE = 'vgpu-warden';
const RBAC_KINDS = new Set(['ClusterRole', 'Role']);
const BINDING_KINDS = new Set(['ClusterRoleBinding', 'RoleBinding']);
const CLUSTER_SCOPED = new Set([
  'Namespace',
  'PriorityClass',
  'ClusterRole',
  'ClusterRoleBinding',
  'MutatingWebhookConfiguration',
  'ValidatingAdmissionPolicy',
  'ValidatingAdmissionPolicyBinding',
]);
const REQUIRED_LABELS = [
  'app.kubernetes.io/name',
  'app.kubernetes.io/instance',
  'app.kubernetes.io/component',
  'app.kubernetes.io/part-of',
];
// Roles the bindings may reference without shipping them: the apiserver's bootstrap roles.
const BUILT_IN_ROLES = new Set([
  'ClusterRole/system:kube-scheduler',
  'ClusterRole/system:volume-scheduler',
  'Role/kube-system/extension-apiserver-authentication-reader',
]);

const packageVersion = (
  JSON.parse(readFileSync(resolve(MANIFESTS_DIR, '..', 'package.json'), 'utf8')) as { version: string }
).version;
const kustomization = readKustomization();
const objects = loadManifestObjects(kustomization);
const deployment = findObject(objects, 'Deployment', 'vgpu-warden');
const podSpec = deployment.spec!.template.spec!;
const podLabels = deployment.spec!.template.metadata!.labels!;
const schedulerDeployment = findObject(objects, 'Deployment', 'vgpu-warden-scheduler');
const schedulerPodSpec = schedulerDeployment.spec!.template.spec!;
const schedulerPodLabels = schedulerDeployment.spec!.template.metadata!.labels!;
const container = (name: string): V1Container => {
  const found = [...podSpec.containers, ...schedulerPodSpec.containers].find((candidate) => candidate.name === name);
  if (!found) throw new Error(`no container ${name} in the Deployments`);
  return found;
};
const warden = container('vgpu-warden');
const scheduler = container('kube-scheduler');
const webhookService = findObject(objects, 'Service', 'vgpu-warden');
const webhookConfig = findObject(objects, 'MutatingWebhookConfiguration', 'vgpu-warden');
const schedulerConfigMap = findObject(objects, 'ConfigMap', 'vgpu-warden-scheduler-config');
const roles = [...objectsOfKind(objects, 'Role'), ...objectsOfKind(objects, 'ClusterRole')];
const bindings = [...objectsOfKind(objects, 'RoleBinding'), ...objectsOfKind(objects, 'ClusterRoleBinding')];

/** The container port a Service targetPort or probe port names (by name or number). */
function containerPort(ports: V1Container['ports'], target: number | string | undefined): number | undefined {
  return (ports ?? []).find((port) =>
    typeof target === 'number' ? port.containerPort === target : port.name === target,
  )?.containerPort;
}

const QUANTITY_SUFFIXES: Record<string, number> = {
  '': 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
};

/** A Kubernetes resource quantity in the forms the manifests use (100m, 1, 128Mi, 1Gi). */
function quantity(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(m|k|M|G|Ki|Mi|Gi)?$/.exec(text);
  if (!match) throw new Error(`unsupported quantity ${JSON.stringify(text)}`);
  return Number(match[1]) * (QUANTITY_SUFFIXES[match[2] ?? ''] ?? Number.NaN);
}

function selects(selector: Record<string, string> | undefined, labels: Record<string, string>): boolean {
  return (
    selector !== undefined &&
    Object.keys(selector).length > 0 &&
    Object.entries(selector).every(([key, value]) => labels[key] === value)
  );
}

/** The resource names a namespaced Role of the manifests grants `verb` on, for `resource` in `namespace`. */
function namedGrants(resource: string, verb: string, namespace: string): string[] {
  return roles
    .filter((role) => role.metadata?.namespace === namespace)
    .flatMap((role) => role.rules ?? [])
    .filter((rule) => rule.resources?.includes(resource) === true && rule.verbs.includes(verb))
    .flatMap((rule) => rule.resourceNames ?? []);
}

/** The environment the vgpu-warden container would see, with the downward API filled in. */
function wardenEnvironment(podName: string): Record<string, string> {
  const fields: Record<string, string> = {
    'metadata.name': podName,
    'metadata.namespace': deployment.metadata!.namespace!,
  };
  return Object.fromEntries(
    (warden.env ?? []).map((variable) => {
      const field = variable.valueFrom?.fieldRef?.fieldPath;
      return [variable.name, field === undefined ? (variable.value ?? '') : (fields[field] ?? '')];
    }),
  );
}

describe('manifests/ (the kustomize base)', () => {
  describe('kustomization.yaml', () => {
    it('lists resource files that exist and parse into named Kubernetes objects', () => {
      expect(kustomization).to.deep.include({ apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization' });
      expect(kustomization.resources).to.be.an('array').that.is.not.empty;
      for (const file of kustomization.resources ?? []) {
        expect(existsSync(resolve(MANIFESTS_DIR, file)), `${file} is listed but missing`).to.equal(true);
        expect(
          objects.filter((entry) => entry.file === file),
          `${file} holds no object`,
        ).to.not.be.empty;
      }
      for (const { file, object } of objects) {
        expect(object.apiVersion, file).to.be.a('string').and.not.empty;
        expect(object.kind, file).to.be.a('string').and.not.empty;
        expect(object.metadata?.name, `${file}: ${object.kind} without a name`).to.be.a('string').and.not.empty;
      }
      const keys = objects.map(
        ({ object }) => `${object.kind}/${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`,
      );
      expect(new Set(keys).size, 'duplicate objects').to.equal(keys.length);
    });

    it('forgets no manifest and does not list the kube-scheduler configuration as a resource', () => {
      const files = readdirSync(MANIFESTS_DIR).filter((file) => file.endsWith('.yaml'));
      const notResources = ['kustomization.yaml', 'kube-scheduler-config.yaml'];
      expect([...(kustomization.resources ?? [])].sort()).to.deep.equal(
        files.filter((file) => !notResources.includes(file)).sort(),
      );
    });

    it('sets no namespace: it would move the kube-system RoleBinding of kube-scheduler', () => {
      expect(kustomization.namespace).to.equal(undefined);
    });
  });

  it('puts every namespaced object in vgpu-warden, except the RoleBinding that must live in kube-system and the node-Lease reader in kube-node-lease', () => {
    findObject(objects, 'Namespace', NAMESPACE);
    for (const { file, object } of objects) {
      const where = `${file}: ${object.kind} ${object.metadata?.name ?? ''}`;
      if (CLUSTER_SCOPED.has(object.kind ?? '')) {
        expect(object.metadata?.namespace, where).to.equal(undefined);
      } else if (
        object.kind === 'RoleBinding' &&
        object.metadata?.name === 'vgpu-warden-extension-apiserver-authentication-reader'
      ) {
        expect(object.metadata.namespace, where).to.equal('kube-system');
      } else if (object.metadata?.name === 'vgpu-warden-node-leases') {
        expect(object.metadata.namespace, where).to.equal('kube-node-lease');
      } else {
        expect(object.metadata?.namespace, where).to.equal(NAMESPACE);
      }
    }
  });

  it('labels every object with app.kubernetes.io/*, and the pods with the version of package.json', () => {
    for (const { file, object } of objects) {
      for (const label of REQUIRED_LABELS) {
        expect(
          object.metadata?.labels?.[label],
          `${file}: ${object.kind} ${object.metadata?.name ?? ''} lacks ${label}`,
        ).to.be.a('string').and.not.empty;
      }
      expect(object.metadata?.labels?.['app.kubernetes.io/name']).to.equal('vgpu-warden');
    }
    for (const labels of [podLabels, schedulerPodLabels]) {
      for (const label of REQUIRED_LABELS) expect(labels[label], label).to.be.a('string').and.not.empty;
      expect(labels['app.kubernetes.io/version']).to.equal(packageVersion);
    }
    expect(deployment.metadata?.labels?.['app.kubernetes.io/version']).to.equal(packageVersion);
    expect(schedulerDeployment.metadata?.labels?.['app.kubernetes.io/version']).to.equal(packageVersion);
    expect(warden.image).to.equal(`vgpu-warden:${packageVersion}`);
  });

  it('keeps vgpu-warden itself out of its webhook and enforces Pod Security restricted on its namespace', () => {
    const namespace = findObject(objects, 'Namespace', NAMESPACE);
    expect(namespace.metadata?.labels).to.deep.include({
      'hami.io/webhook': 'ignore',
      'pod-security.kubernetes.io/enforce': 'restricted',
    });
    // The opt-out is the namespace label only (cluster admins set it); a pod label would be the tenant's own.
    for (const webhook of webhookConfig.webhooks ?? []) {
      expect(webhook.objectSelector, webhook.name).to.equal(undefined);
      expect(webhook.namespaceSelector?.matchExpressions).to.deep.include({
        key: 'hami.io/webhook',
        operator: 'NotIn',
        values: ['ignore'],
      });
    }
  });

  describe('the Deployment', () => {
    it('runs 2 replicas of vgpu-warden serve alone, under its own ServiceAccount, spread over nodes', () => {
      expect(deployment.spec?.replicas).to.equal(2);
      expect(
        selects(deployment.spec?.selector.matchLabels, podLabels),
        'selector does not match the pod labels',
      ).to.equal(true);
      expect(podSpec.containers.map((entry) => entry.name)).to.deep.equal(['vgpu-warden']);
      expect(warden.args).to.deep.equal(['serve']);
      expect(
        findObject(objects, 'ServiceAccount', podSpec.serviceAccountName ?? '', NAMESPACE).metadata?.name,
      ).to.equal('vgpu-warden');
      const term =
        podSpec.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution?.[0]?.podAffinityTerm;
      expect(term?.topologyKey).to.equal('kubernetes.io/hostname');
      expect(selects(term?.labelSelector?.matchLabels, podLabels)).to.equal(true);
    });

    it('runs 2 replicas of the stock kube-scheduler in a Deployment of their own, under another ServiceAccount', () => {
      expect(schedulerDeployment.spec?.replicas).to.equal(2);
      expect(selects(schedulerDeployment.spec?.selector.matchLabels, schedulerPodLabels)).to.equal(true);
      // Neither Deployment's selector takes the other's pods.
      expect(selects(deployment.spec?.selector.matchLabels, schedulerPodLabels)).to.equal(false);
      expect(selects(schedulerDeployment.spec?.selector.matchLabels, podLabels)).to.equal(false);
      expect(schedulerPodSpec.containers.map((entry) => entry.name)).to.deep.equal(['kube-scheduler']);
      expect(scheduler.image).to.equal('registry.k8s.io/kube-scheduler:v1.37.2');
      expect(scheduler.command).to.include('--config=/config/config.yaml');
      expect(schedulerPodSpec.serviceAccountName).to.equal('vgpu-warden-scheduler');
      expect(findObject(objects, 'ServiceAccount', schedulerPodSpec.serviceAccountName ?? '', NAMESPACE)).to.not.equal(
        undefined,
      );
      const term =
        schedulerPodSpec.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution?.[0]
          ?.podAffinityTerm;
      expect(term?.topologyKey).to.equal('kubernetes.io/hostname');
      expect(selects(term?.labelSelector?.matchLabels, schedulerPodLabels)).to.equal(true);
    });

    it('gives both Deployments the shipped PriorityClass, the highest a user-defined class may have', () => {
      const classes = objects
        .filter(({ object }) => object.kind === 'PriorityClass')
        .map(({ object }) => object as { metadata: { name: string }; value: number; globalDefault?: boolean });
      expect(classes.map((entry) => entry.metadata.name)).to.deep.equal(['vgpu-warden-critical']);
      expect(classes[0]).to.deep.include({ value: 1_000_000_000, globalDefault: false });
      expect(podSpec.priorityClassName).to.equal('vgpu-warden-critical');
      expect(schedulerPodSpec.priorityClassName).to.equal('vgpu-warden-critical');
    });

    it('mounts the scheduler ConfigMap where --config points', () => {
      const mount = scheduler.volumeMounts?.find((entry) => entry.mountPath === '/config');
      const volume = schedulerPodSpec.volumes?.find((entry) => entry.name === mount?.name);
      expect(volume?.configMap?.name).to.equal(schedulerConfigMap.metadata?.name);
      expect(volume?.configMap?.items).to.deep.equal([{ key: 'config.yaml', path: 'config.yaml' }]);
      expect(schedulerConfigMap.data).to.have.property('config.yaml');
    });

    it("mounts vgpu-warden's client-certificate Secret where kube-scheduler's tlsConfig points, readable by its group only", () => {
      const config = loadConfig(wardenEnvironment('vgpu-warden-7d9f-abcde'));
      const { tlsConfig } = loadYaml<{ extenders: { tlsConfig: Record<string, string> }[] }>(
        schedulerConfigMap.data!['config.yaml']!,
      ).extenders[0]!;
      const volume = schedulerPodSpec.volumes?.find(
        (entry) => entry.secret?.secretName === config.extenderClientSecretName,
      );
      const mount = scheduler.volumeMounts?.find((entry) => entry.name === volume?.name);
      expect(mount?.readOnly).to.equal(true);
      expect(tlsConfig).to.deep.equal({
        certFile: `${mount?.mountPath ?? ''}/tls.crt`,
        keyFile: `${mount?.mountPath ?? ''}/tls.key`,
        caFile: `${mount?.mountPath ?? ''}/ca.crt`,
      });
      expect(volume?.secret?.defaultMode).to.equal(0o440);
      expect(schedulerPodSpec.securityContext?.fsGroup).to.equal(scheduler.securityContext?.runAsGroup);
      // vgpu-warden's own pod mounts no Secret: its certificates come from the API.
      expect((podSpec.volumes ?? []).filter((entry) => entry.secret !== undefined)).to.deep.equal([]);
    });

    for (const name of ['vgpu-warden', 'kube-scheduler']) {
      it(`runs ${name} non-root, read-only, without privileges or capabilities, under RuntimeDefault seccomp`, () => {
        const entry = container(name);
        expect(entry.securityContext).to.deep.include({
          runAsNonRoot: true,
          runAsUser: 10001,
          readOnlyRootFilesystem: true,
          allowPrivilegeEscalation: false,
        });
        expect(entry.securityContext?.privileged).to.not.equal(true);
        expect(entry.securityContext?.capabilities).to.deep.equal({ drop: ['ALL'] });
        expect(entry.securityContext?.seccompProfile).to.deep.equal({ type: 'RuntimeDefault' });
        expect(
          entry.volumeMounts?.find((mount) => mount.mountPath === '/tmp'),
          'a writable /tmp',
        ).to.not.equal(undefined);
      });

      it(`gives ${name} CPU and memory requests and limits, limits above requests`, () => {
        const { requests, limits } = container(name).resources ?? {};
        for (const resource of ['cpu', 'memory']) {
          expect(requests?.[resource], `requests.${resource}`).to.be.a('string').and.not.empty;
          expect(limits?.[resource], `limits.${resource}`).to.be.a('string').and.not.empty;
          expect(quantity(limits?.[resource] ?? ''), resource).to.be.at.least(quantity(requests?.[resource] ?? ''));
        }
      });
    }

    it('probes vgpu-warden on /healthz (liveness) and /readyz (readiness) over HTTPS on its webhook port', () => {
      for (const [probe, path] of [
        [warden.livenessProbe, '/healthz'],
        [warden.readinessProbe, '/readyz'],
        [warden.startupProbe, '/healthz'],
      ] as const) {
        expect(probe?.httpGet?.path).to.equal(path);
        expect(probe?.httpGet?.scheme).to.equal('HTTPS');
        expect(containerPort(warden.ports, probe?.httpGet?.port)).to.equal(9443);
      }
      expect(scheduler.livenessProbe?.httpGet).to.deep.include({ path: '/healthz', scheme: 'HTTPS' });
      expect(containerPort(scheduler.ports, scheduler.livenessProbe?.httpGet?.port)).to.equal(10259);
    });

    it('passes the pod name and namespace through the downward API and names the Secret, webhook config and Service', () => {
      const env = Object.fromEntries((warden.env ?? []).map((variable) => [variable.name, variable]));
      expect(env.POD_NAME?.valueFrom?.fieldRef?.fieldPath).to.equal('metadata.name');
      expect(env.POD_NAMESPACE?.valueFrom?.fieldRef?.fieldPath).to.equal('metadata.namespace');
      expect(env.CERT_SECRET_NAME?.value).to.equal('vgpu-warden-tls');
      expect(env.WEBHOOK_CONFIG_NAME?.value).to.equal(webhookConfig.metadata?.name);
      expect(env.SERVICE_NAME?.value).to.equal(webhookService.metadata?.name);
    });

    it('configures vgpu-warden consistently with the Service, the scheduler, the webhook and the RBAC', () => {
      const config = loadConfig(wardenEnvironment('vgpu-warden-7d9f-abcde'));
      const namespace = deployment.metadata!.namespace!;
      expect(config.namespace).to.equal(namespace);
      expect(config.podName).to.equal('vgpu-warden-7d9f-abcde');
      expect(containerPort(warden.ports, 'webhook')).to.equal(config.webhookPort);
      expect(containerPort(warden.ports, 'metrics')).to.equal(config.metricsPort);
      const schedulerConfig = loadYaml<{
        profiles: { schedulerName: string }[];
        extenders: { urlPrefix: string }[];
        leaderElection: { resourceNamespace: string; resourceName: string };
      }>(schedulerConfigMap.data!['config.yaml']!);
      expect(schedulerConfig.profiles.map((profile) => profile.schedulerName)).to.deep.equal([config.schedulerName]);
      // The extender off loopback, behind its own Service, and only for kube-scheduler's certificate.
      expect(config).to.deep.include({ extenderHost: '0.0.0.0', extenderClientAuth: true });
      const extenderService = findObject(objects, 'Service', 'vgpu-warden-extender', namespace);
      const url = new URL(schedulerConfig.extenders[0]?.urlPrefix ?? '');
      expect(url.protocol).to.equal('https:');
      expect(url.hostname).to.equal(`${extenderService.metadata?.name ?? ''}.${namespace}.svc`);
      const servicePort = extenderService.spec?.ports?.find((entry) => entry.port === Number(url.port || 443));
      expect(containerPort(warden.ports, servicePort?.targetPort)).to.equal(config.extenderPort);
      // kube-scheduler verifies our serving certificate for the name it dials.
      expect(servingNames({ serviceName: config.serviceName, namespace, extraHosts: config.certHosts })).to.include(
        url.hostname,
      );
      expect(schedulerConfig.leaderElection.resourceNamespace).to.equal(namespace);
      expect(namedGrants('leases', 'update', namespace)).to.include.members([
        config.leaseName,
        schedulerConfig.leaderElection.resourceName,
      ]);
      expect(namedGrants('secrets', 'update', namespace)).to.have.members([
        config.certSecretName,
        config.extenderClientSecretName,
      ]);
      expect(
        roles
          .filter((role) => role.kind === 'ClusterRole')
          .flatMap((role) => role.rules ?? [])
          .filter((rule) => rule.resources?.includes('mutatingwebhookconfigurations') === true)
          .flatMap((rule) => rule.resourceNames ?? []),
      ).to.deep.equal([config.webhookConfigName]);
      expect(webhookService.metadata?.name).to.equal(config.serviceName);
    });
  });

  describe('the kube-scheduler ConfigMap', () => {
    it('carries manifests/kube-scheduler-config.yaml verbatim', () => {
      expect(schedulerConfigMap.data?.['config.yaml']).to.equal(
        readFileSync(resolve(MANIFESTS_DIR, 'kube-scheduler-config.yaml'), 'utf8'),
      );
    });

    it('is exactly what src/extender/scheduler-config.ts builds for the cluster, for the node policy vgpu-warden runs with', () => {
      // NODE_SCHEDULER_POLICY of the Deployment (unset: the default, binpack) and the profile must match.
      const nodePolicy = loadConfig(wardenEnvironment('vgpu-warden-7d9f-abcde')).nodeSchedulerPolicy;
      expect(nodePolicy).to.equal('binpack');
      const clientDir = '/etc/vgpu-warden/extender-client';
      expect(loadYaml(schedulerConfigMap.data?.['config.yaml'] ?? '')).to.deep.equal(
        kubeSchedulerConfiguration({
          schedulerName: 'hami-scheduler',
          extenderUrl: `https://vgpu-warden-extender.${NAMESPACE}.svc:443`,
          nodePolicy,
          clientTls: {
            certFile: `${clientDir}/tls.crt`,
            keyFile: `${clientDir}/tls.key`,
            caFile: `${clientDir}/ca.crt`,
          },
          leaderElection: { leaderElect: true, resourceNamespace: NAMESPACE, resourceName: 'vgpu-warden-scheduler' },
        }),
      );
    });
  });

  describe('the Services and the webhook registration', () => {
    it('routes the webhook Service (443) to the port vgpu-warden serves the webhook on', () => {
      expect(selects(webhookService.spec?.selector, podLabels), 'the Service selects no vgpu-warden pod').to.equal(
        true,
      );
      const port = webhookService.spec?.ports?.find((entry) => entry.port === 443);
      expect(containerPort(warden.ports, port?.targetPort)).to.equal(9443);
    });

    it('registers the webhook at that Service: its name, namespace, port 443 and /mutate', () => {
      for (const webhook of webhookConfig.webhooks ?? []) {
        expect(webhook.clientConfig.service).to.deep.equal({
          name: webhookService.metadata?.name,
          namespace: webhookService.metadata?.namespace,
          path: '/mutate',
          port: 443,
        });
        // No caBundle field at all: vgpu-warden injects and watches it, and a manifest that names the
        // field (even empty) would make every forced server-side apply or GitOps sync blank it.
        expect(webhook.clientConfig, 'vgpu-warden fills the caBundle in').to.not.have.property('caBundle');
      }
    });

    it("routes the extender Service (443) to vgpu-warden's extender port, never to kube-scheduler, with client-IP affinity", () => {
      const extender = findObject(objects, 'Service', 'vgpu-warden-extender');
      expect(selects(extender.spec?.selector, podLabels)).to.equal(true);
      expect(selects(extender.spec?.selector, schedulerPodLabels)).to.equal(false);
      expect(
        containerPort(warden.ports, extender.spec?.ports?.find((entry) => entry.port === 443)?.targetPort),
      ).to.equal(9444);
      expect(extender.spec?.sessionAffinity).to.equal('ClientIP');
    });

    it('exposes the metrics port through the metrics Service', () => {
      const metrics = findObject(objects, 'Service', 'vgpu-warden-metrics');
      expect(selects(metrics.spec?.selector, podLabels)).to.equal(true);
      expect(containerPort(warden.ports, metrics.spec?.ports?.[0]?.targetPort)).to.equal(9395);
    });

    it('keeps one replica of each Deployment through disruptions', () => {
      const budget = findObject(objects, 'PodDisruptionBudget', 'vgpu-warden');
      expect(budget.spec?.minAvailable).to.equal(1);
      expect(selects(budget.spec?.selector?.matchLabels, podLabels)).to.equal(true);
      const schedulerBudget = findObject(objects, 'PodDisruptionBudget', 'vgpu-warden-scheduler');
      expect(schedulerBudget.spec?.minAvailable).to.equal(1);
      expect(selects(schedulerBudget.spec?.selector?.matchLabels, schedulerPodLabels)).to.equal(true);
      expect(selects(schedulerBudget.spec?.selector?.matchLabels, podLabels)).to.equal(false);
    });
  });

  describe('RBAC', () => {
    it('has no wildcard in any rule', () => {
      for (const role of roles) {
        for (const rule of role.rules ?? []) {
          const fields: (keyof V1PolicyRule)[] = [
            'verbs',
            'resources',
            'apiGroups',
            'resourceNames',
            'nonResourceURLs',
          ];
          for (const field of fields) {
            expect(rule[field] ?? [], `${role.kind ?? ''} ${role.metadata?.name ?? ''} ${field}`).to.not.include('*');
          }
        }
      }
      expect(objects.every(({ object }) => !RBAC_KINDS.has(object.kind ?? '') || 'rules' in object)).to.equal(true);
    });

    it('grants vgpu-warden cluster-wide exactly what it calls', () => {
      expect(findObject(objects, 'ClusterRole', 'vgpu-warden').rules).to.deep.equal([
        { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'patch'] },
        { apiGroups: [''], resources: ['pods/binding'], verbs: ['create'] },
        { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch', 'patch'] },
        { apiGroups: [''], resources: ['resourcequotas'], verbs: ['list', 'watch'] },
        { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
        { apiGroups: [''], resources: ['events'], verbs: ['list'] },
        {
          apiGroups: ['admissionregistration.k8s.io'],
          resources: ['mutatingwebhookconfigurations'],
          resourceNames: ['vgpu-warden'],
          verbs: ['get', 'list', 'watch', 'update'],
        },
      ]);
    });

    it('grants Secrets and Leases only in its namespace, by name wherever the verb allows it; kubelet Leases only to get', () => {
      for (const role of roles) {
        for (const rule of role.rules ?? []) {
          const sensitive = rule.resources?.some((resource) => ['secrets', 'leases'].includes(resource)) === true;
          if (!sensitive) continue;
          if (role.metadata?.namespace === 'kube-node-lease') {
            // Node names are not known in advance: get by name at run time, nothing else.
            expect(rule, `${role.metadata.name ?? ''} in kube-node-lease`).to.deep.equal({
              apiGroups: ['coordination.k8s.io'],
              resources: ['leases'],
              verbs: ['get'],
            });
            continue;
          }
          expect(
            role.kind,
            `${role.metadata?.name ?? ''} grants ${rule.resources?.join(',') ?? ''} cluster-wide`,
          ).to.equal('Role');
          expect(role.metadata?.namespace).to.equal(NAMESPACE);
          expect(rule.verbs).to.not.include.members(['list', 'watch', 'delete', 'patch']);
          if (rule.verbs.some((verb) => verb !== 'create'))
            expect(rule.resourceNames, `${role.metadata?.name ?? ''}: ${rule.verbs.join(',')}`).to.not.be.empty;
        }
      }
    });

    it("binds vgpu-warden's ServiceAccount to its own roles only, and the built-in kube-scheduler roles to kube-scheduler's only", () => {
      const shipped = new Set(
        roles.map((role) =>
          role.kind === 'Role'
            ? `Role/${role.metadata?.namespace ?? ''}/${role.metadata?.name ?? ''}`
            : `ClusterRole/${role.metadata?.name ?? ''}`,
        ),
      );
      const reference = (binding: (typeof bindings)[number]) =>
        binding.roleRef.kind === 'Role'
          ? `Role/${binding.metadata?.namespace ?? ''}/${binding.roleRef.name}`
          : `ClusterRole/${binding.roleRef.name}`;
      for (const binding of bindings)
        expect(shipped.has(reference(binding)) || BUILT_IN_ROLES.has(reference(binding)), reference(binding)).to.equal(
          true,
        );
      const boundTo = (serviceAccount: string | undefined) =>
        bindings
          .filter((binding) => {
            expect(BINDING_KINDS.has(binding.kind ?? '')).to.equal(true);
            expect(binding.subjects, `${binding.metadata?.name ?? ''} binds one ServiceAccount`).to.have.length(1);
            expect(binding.subjects?.[0]).to.deep.include({ kind: 'ServiceAccount', namespace: NAMESPACE });
            return binding.subjects?.[0]?.name === serviceAccount;
          })
          .map(reference);
      expect(boundTo(podSpec.serviceAccountName)).to.have.members([
        'ClusterRole/vgpu-warden',
        `Role/${NAMESPACE}/vgpu-warden`,
        'Role/kube-node-lease/vgpu-warden-node-leases',
      ]);
      expect(boundTo(schedulerPodSpec.serviceAccountName)).to.have.members([
        ...BUILT_IN_ROLES,
        `Role/${NAMESPACE}/vgpu-warden-scheduler`,
      ]);
      expect(boundTo(podSpec.serviceAccountName).length + boundTo(schedulerPodSpec.serviceAccountName).length).to.equal(
        bindings.length,
      );
    });
  });
});
