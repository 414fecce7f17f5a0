import { readQuantity } from './quantity.js';

/**
 * Which pods a ResourceQuota counts, as kube-apiserver's quota admission and the quota controller
 * decide it (k8s.io/apiserver generic.Matches with k8s.io/kubernetes pkg/quota/v1/evaluator/core
 * pods.go podMatchesScopeFunc). Pure: plain Pod and ResourceQuota JSON (or client-node objects)
 * through property access, never throws.
 *
 * A quota's `spec.scopes` each read as the requirement `<scope> Exists`, followed by the
 * `spec.scopeSelector.matchExpressions`; the quota counts a pod when every requirement matches (no
 * requirement: every pod of the namespace).
 * - `Terminating`: `spec.activeDeadlineSeconds` is set and >= 0; `NotTerminating`: it is not.
 * - `BestEffort` / `NotBestEffort`: the pod's QoS class is / is not BestEffort: `status.qosClass`
 *   when set (kube-apiserver sets it at creation), else computed as kubelet does, from cpu and
 *   memory only (pod-level `spec.resources` when present, else every container and init
 *   container): a GPU pod with no cpu or memory request or limit IS BestEffort.
 * - `PriorityClass`: the requirement as a label selector on the one label
 *   `PriorityClass=<spec.priorityClassName>`, absent when the pod names none: `In`, `NotIn`,
 *   `Exists`, `DoesNotExist`.
 * - `CrossNamespacePodAffinity`: a pod (anti-)affinity term, required or preferred, names
 *   `namespaces` or has a `namespaceSelector`.
 * The operator of the other scopes is not read (kube-apiserver's validation allows only `Exists`).
 * Any other scope (`VolumeAttributesClass` is a PVC's) matches no pod.
 */

export interface ScopeRequirement {
  scopeName?: string;
  operator?: string;
  values?: readonly string[];
}

type Json = Record<string, unknown>;

function asRecord(value: unknown): Json | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : undefined;
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? (value as unknown[]) : [];
}

/** getScopeSelectorsFromQuota: `spec.scopes` as `Exists` requirements, then `scopeSelector.matchExpressions`. */
export function quotaScopeRequirements(quota: unknown): ScopeRequirement[] {
  const spec = asRecord(asRecord(quota)?.spec);
  const scopes = list(spec?.scopes).map((scope): ScopeRequirement => ({
    scopeName: String(scope),
    operator: 'Exists',
  }));
  const expressions = list(asRecord(spec?.scopeSelector)?.matchExpressions).flatMap(
    (expression): ScopeRequirement[] => {
      const record = asRecord(expression);
      if (record === undefined) return [];
      return [
        {
          ...(typeof record.scopeName === 'string' ? { scopeName: record.scopeName } : {}),
          ...(typeof record.operator === 'string' ? { operator: record.operator } : {}),
          values: list(record.values).map(String),
        },
      ];
    },
  );
  return [...scopes, ...expressions];
}

/** isTerminating: `activeDeadlineSeconds` is set and not negative. */
function isTerminating(spec: Json | undefined): boolean {
  const deadline = spec?.activeDeadlineSeconds;
  return typeof deadline === 'number' && deadline >= 0;
}

const QOS_RESOURCES = ['cpu', 'memory'] as const;

function positive(value: unknown): boolean {
  const read = readQuantity(value);
  switch (read.kind) {
    case 'integer':
      return read.value > 0n;
    case 'fraction':
    case 'huge':
      return !read.negative;
    default:
      return false;
  }
}

/** Does this resources block name a positive cpu or memory request or limit? */
function hasQosResource(resources: unknown): boolean {
  const record = asRecord(resources);
  return ['requests', 'limits'].some((field) => {
    const values = asRecord(record?.[field]);
    return QOS_RESOURCES.some((name) => values?.[name] !== undefined && positive(values[name]));
  });
}

/**
 * qos.GetPodQOS(pod) == BestEffort: `status.qosClass` when set; else no positive cpu or memory in
 * the pod-level resources when the pod has them (PodLevelResources), else in any container or init
 * container (ephemeral containers have no resources).
 */
export function isBestEffort(pod: unknown): boolean {
  const record = asRecord(pod);
  const qosClass = asRecord(record?.status)?.qosClass;
  if (typeof qosClass === 'string' && qosClass !== '') return qosClass === 'BestEffort';
  const spec = asRecord(record?.spec);
  if (asRecord(spec?.resources) !== undefined) return !hasQosResource(spec?.resources);
  return ![...list(spec?.containers), ...list(spec?.initContainers)].some((container) =>
    hasQosResource(asRecord(container)?.resources),
  );
}

function crossNamespaceTerm(term: unknown): boolean {
  const record = asRecord(term);
  return (
    list(record?.namespaces).length > 0 ||
    (record?.namespaceSelector !== undefined && record.namespaceSelector !== null)
  );
}

/**
 * usesCrossNamespacePodAffinity: any pod affinity or anti-affinity
 * term, required or preferred, reaching other namespaces.
 */
function usesCrossNamespacePodAffinity(spec: Json | undefined): boolean {
  const affinity = asRecord(spec?.affinity);
  return [affinity?.podAffinity, affinity?.podAntiAffinity].some((kind) => {
    const record = asRecord(kind);
    return (
      list(record?.requiredDuringSchedulingIgnoredDuringExecution).some(crossNamespaceTerm) ||
      list(record?.preferredDuringSchedulingIgnoredDuringExecution).some((weighted) =>
        crossNamespaceTerm(asRecord(weighted)?.podAffinityTerm),
      )
    );
  });
}

/** A Kubernetes label value, as labels.NewRequirement checks each value of a selector. */
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/**
 * podMatchesSelector: the requirement as a label selector on `PriorityClass=<name>`. One that
 * labels.NewRequirement refuses (an unknown operator, In/NotIn without values, Exists/DoesNotExist
 * with values, a value that is no label value) is an error in kube-apiserver, which then admits no
 * pod the quota would count: it is read here as matching, so such a quota still holds pods back.
 */
function priorityClassMatches(requirement: ScopeRequirement, priorityClassName: string): boolean {
  const values = requirement.values ?? [];
  const present = priorityClassName !== '';
  switch (requirement.operator) {
    case 'In':
    case 'NotIn': {
      if (values.length === 0 || values.some((value) => value.length > 63 || !LABEL_VALUE.test(value))) return true;
      const listed = present && values.includes(priorityClassName);
      return requirement.operator === 'In' ? listed : !listed;
    }
    case 'Exists':
    case 'DoesNotExist':
      if (values.length > 0) return true;
      return requirement.operator === 'Exists' ? present : !present;
    default:
      return true;
  }
}

/** podMatchesScopeFunc: does the pod match one scope requirement? */
export function podMatchesScope(requirement: ScopeRequirement, pod: unknown): boolean {
  const spec = asRecord(asRecord(pod)?.spec);
  switch (requirement.scopeName) {
    case 'Terminating':
      return isTerminating(spec);
    case 'NotTerminating':
      return !isTerminating(spec);
    case 'BestEffort':
      return isBestEffort(pod);
    case 'NotBestEffort':
      return !isBestEffort(pod);
    case 'PriorityClass': {
      const name = typeof spec?.priorityClassName === 'string' ? spec.priorityClassName : '';
      // kube-apiserver answers Exists without parsing the selector.
      if (requirement.operator === 'Exists') return name !== '';
      return priorityClassMatches(requirement, name);
    }
    case 'CrossNamespacePodAffinity':
      return usesCrossNamespacePodAffinity(spec);
    default:
      return false;
  }
}

/** Does a quota with these requirements (quotaScopeRequirements) count the pod? All must match; none: every pod. */
export function scopesMatchPod(requirements: readonly ScopeRequirement[], pod: unknown): boolean {
  return requirements.every((requirement) => podMatchesScope(requirement, pod));
}
