import { writeFileSync } from 'node:fs';
import {
  AuthorizationV1Api,
  KubernetesObjectApi,
  type CoreV1Api,
  type KubeConfig,
  type KubernetesObject,
  type V1RoleBinding,
} from '@kubernetes/client-node';
import { httpStatusOf } from '../../src/kube/errors.js';
import type { ControlPlane } from '../../src/local/control-plane.js';
import { renderKubeconfig } from '../../src/local/kubeconfig.js';
import { loadManifestObjects } from './manifests.js';
import { eventually, notYet } from './test-cluster.js';

export const SHIPPED_NAMESPACE = 'vgpu-warden';
const IDENTITY_KINDS = ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'];

type AnyObject = KubernetesObject & Record<string, unknown>;

/** A ServiceAccount as the authorizer sees it: its user name and groups. */
export interface Subject {
  user: string;
  groups: string[];
}

export function serviceAccountSubject(namespace: string, name: string): Subject {
  return {
    user: `system:serviceaccount:${namespace}:${name}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
  };
}

export interface ResourceAttributes {
  verb: string;
  resource: string;
  group?: string;
  namespace?: string;
  name?: string;
  subresource?: string;
}

/**
 * The ServiceAccounts and RBAC objects of manifests/ moved from vgpu-warden into `namespace`, the
 * way a kustomize namespace override would move them (the kube-system RoleBinding and the
 * kube-node-lease Role and RoleBinding stay there).
 */
/** Namespaces whose shipped objects stay where they are, shared by every test namespace. */
const FIXED_NAMESPACES = new Set(['kube-system', 'kube-node-lease']);

export function shippedIdentities(namespace: string): AnyObject[] {
  return loadManifestObjects()
    .filter(({ object }) => IDENTITY_KINDS.includes(object.kind ?? ''))
    .map(({ object }) => {
      const copy = structuredClone(object);
      if (copy.metadata?.namespace === SHIPPED_NAMESPACE) copy.metadata.namespace = namespace;
      for (const subject of (copy as unknown as V1RoleBinding).subjects ?? []) {
        if (subject.namespace === SHIPPED_NAMESPACE) subject.namespace = namespace;
      }
      return copy;
    });
}

/**
 * Creates the shipped identities in `namespace` (cluster-scoped and kube-system objects replaced
 * if a previous run left them) and waits until the authorizer has them; returns the clean-up,
 * which removes what outlives the namespace.
 */
export async function applyShippedIdentities(kubeConfig: KubeConfig, namespace: string): Promise<() => Promise<void>> {
  const api = KubernetesObjectApi.makeApiClient(kubeConfig);
  const created: AnyObject[] = [];
  const cleanup = async () => {
    for (const object of created.reverse()) {
      if (object.metadata?.namespace === undefined || FIXED_NAMESPACES.has(object.metadata.namespace))
        await api.delete(object).catch(() => undefined);
    }
  };
  try {
    for (const object of shippedIdentities(namespace)) {
      try {
        await api.create(object);
      } catch (error) {
        if (httpStatusOf(error) !== 409 || object.metadata?.namespace === namespace) throw error;
        await api.delete(object);
        const header = {
          apiVersion: object.apiVersion ?? '',
          kind: object.kind ?? '',
          metadata: {
            name: object.metadata?.name ?? '',
            ...(object.metadata?.namespace === undefined ? {} : { namespace: object.metadata.namespace }),
          },
        };
        await eventually(
          `${object.kind ?? ''} ${object.metadata?.name ?? ''} to be gone`,
          () =>
            api.read(header).then(
              () => notYet('it still exists'),
              () => true,
            ),
          10_000,
          100,
        );
        await api.create(object);
      }
      created.push(object);
    }
    // The RBAC authorizer reads through informers: wait until the last binding is in force.
    const authorization = kubeConfig.makeApiClient(AuthorizationV1Api);
    const allowed = (subject: Subject, attributes: ResourceAttributes) =>
      accessReview(authorization, subject, attributes);
    await eventually(
      'the shipped RBAC to take effect',
      async () =>
        (await allowed(serviceAccountSubject(namespace, 'vgpu-warden'), {
          verb: 'update',
          resource: 'leases',
          group: 'coordination.k8s.io',
          namespace,
          name: 'vgpu-warden',
        })) &&
        (await allowed(serviceAccountSubject(namespace, 'vgpu-warden-scheduler'), {
          verb: 'update',
          resource: 'leases',
          group: 'coordination.k8s.io',
          namespace,
          name: 'vgpu-warden-scheduler',
        })) &&
        (await allowed(serviceAccountSubject(namespace, 'vgpu-warden-scheduler'), {
          verb: 'get',
          resource: 'configmaps',
          namespace: 'kube-system',
          name: 'extension-apiserver-authentication',
        })) &&
        (await allowed(serviceAccountSubject(namespace, 'vgpu-warden-scheduler'), {
          verb: 'create',
          resource: 'pods',
          subresource: 'binding',
          namespace: 'default',
        })) &&
        (await allowed(serviceAccountSubject(namespace, 'vgpu-warden'), { verb: 'list', resource: 'pods' }))
          ? true
          : notYet('a SubjectAccessReview still denied'),
      20_000,
      100,
    );
  } catch (error) {
    await cleanup();
    throw error;
  }
  return cleanup;
}

/** What a SubjectAccessReview says about `subject` doing one request. */
export async function accessReview(
  authorization: AuthorizationV1Api,
  subject: Subject,
  attributes: ResourceAttributes,
): Promise<boolean> {
  const review = await authorization.createSubjectAccessReview({
    body: {
      spec: {
        user: subject.user,
        groups: subject.groups,
        resourceAttributes: {
          verb: attributes.verb,
          resource: attributes.resource,
          group: attributes.group ?? '',
          namespace: attributes.namespace ?? '',
          name: attributes.name ?? '',
          subresource: attributes.subresource ?? '',
        },
      },
    },
  });
  return review.status?.allowed === true;
}

/** A kubeconfig at `path` carrying a fresh token of the ServiceAccount, as its pod would have it. */
export async function writeServiceAccountKubeconfig(
  core: CoreV1Api,
  controlPlane: ControlPlane,
  namespace: string,
  name: string,
  path: string,
): Promise<void> {
  const token =
    (
      await core.createNamespacedServiceAccountToken({
        name,
        namespace,
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      })
    ).status?.token ?? '';
  if (token === '') throw new Error(`no token for ServiceAccount ${namespace}/${name}`);
  writeFileSync(
    path,
    renderKubeconfig({
      clusterName: 'test',
      server: controlPlane.server,
      caPem: controlPlane.caPem,
      userName: name,
      token,
    }),
    { mode: 0o600 },
  );
}
