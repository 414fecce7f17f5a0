import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  loadAllYaml,
  loadYaml,
  type KubernetesObject,
  type V1ClusterRole,
  type V1ClusterRoleBinding,
  type V1ConfigMap,
  type V1Deployment,
  type V1MutatingWebhookConfiguration,
  type V1Namespace,
  type V1PodDisruptionBudget,
  type V1Role,
  type V1RoleBinding,
  type V1Service,
  type V1ServiceAccount,
  type V1ValidatingAdmissionPolicy,
  type V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';

/** Where the kustomize base lives. */
export const MANIFESTS_DIR = resolve(import.meta.dirname, '..', '..', 'manifests');

export interface Kustomization {
  apiVersion?: string;
  kind?: string;
  namespace?: string;
  resources?: string[];
  [field: string]: unknown;
}

/** One object of the base, with the file it came from. */
export interface ManifestObject {
  file: string;
  object: KubernetesObject & Record<string, unknown>;
}

export function readKustomization(): Kustomization {
  return loadYaml<Kustomization>(readFileSync(resolve(MANIFESTS_DIR, 'kustomization.yaml'), 'utf8'));
}

/** Every object of every resource file the kustomization lists, in order (empty YAML documents skipped). */
export function loadManifestObjects(kustomization: Kustomization = readKustomization()): ManifestObject[] {
  return (kustomization.resources ?? []).flatMap((file) => {
    const documents = loadAllYaml(readFileSync(resolve(MANIFESTS_DIR, file), 'utf8')) as unknown[];
    return documents
      .filter((document): document is ManifestObject['object'] => typeof document === 'object' && document !== null)
      .map((object) => ({ file, object }));
  });
}

/** The client-node model of each kind the base ships. */
export interface ManifestKinds {
  Namespace: V1Namespace;
  ServiceAccount: V1ServiceAccount;
  ClusterRole: V1ClusterRole;
  ClusterRoleBinding: V1ClusterRoleBinding;
  Role: V1Role;
  RoleBinding: V1RoleBinding;
  ConfigMap: V1ConfigMap;
  Deployment: V1Deployment;
  Service: V1Service;
  PodDisruptionBudget: V1PodDisruptionBudget;
  MutatingWebhookConfiguration: V1MutatingWebhookConfiguration;
  ValidatingAdmissionPolicy: V1ValidatingAdmissionPolicy;
  ValidatingAdmissionPolicyBinding: V1ValidatingAdmissionPolicyBinding;
}

/** Every object of `kind`, in order. */
export function objectsOfKind<K extends keyof ManifestKinds>(
  objects: readonly { object: KubernetesObject }[],
  kind: K,
): ManifestKinds[K][] {
  return objects.filter(({ object }) => object.kind === kind).map(({ object }) => object as ManifestKinds[K]);
}

/** The one object of `kind` named `name` (in `namespace`, if given); throws when it is missing or not unique. */
export function findObject<K extends keyof ManifestKinds>(
  objects: readonly { object: KubernetesObject }[],
  kind: K,
  name: string,
  namespace?: string,
): ManifestKinds[K] {
  const found = objectsOfKind(objects, kind).filter(
    ({ metadata }) => metadata?.name === name && (namespace === undefined || metadata.namespace === namespace),
  );
  if (found.length !== 1)
    throw new Error(`expected exactly one ${kind} ${name} in the manifests, found ${found.length}`);
  return found[0]!;
}
