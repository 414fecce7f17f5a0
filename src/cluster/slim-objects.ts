import type { V1Container, V1Node, V1Pod, V1PodSpec, V1PodStatus } from '@kubernetes/client-node';
import { managesLockAnnotation } from '../lock/lock-written-at.js';

/** Of a pod's spec, what slimPod keeps besides its containers and affinity terms. */
const POD_SPEC_KEPT = [
  'nodeName',
  'schedulerName',
  'restartPolicy',
  'priority',
  'priorityClassName',
  'nodeSelector',
  'overhead',
  'runtimeClassName',
  'activeDeadlineSeconds',
  'resources',
] as const satisfies readonly (keyof V1PodSpec)[];

/** Of a pod's status, what slimPod keeps. */
const POD_STATUS_KEPT = [
  'phase',
  'startTime',
  'initContainerStatuses',
  'reason',
  'qosClass',
] as const satisfies readonly (keyof V1PodStatus)[];

/**
 * What the state store keeps of the objects its watches deliver: only what its readers use, as
 * controller-runtime's cache transforms do.
 * - A pod keeps its metadata without `managedFields` (the apiserver's record of every writer's
 *   fields, often larger than the rest of the pod); of its spec the node, scheduler, priority,
 *   restart policy, node selector, overhead and runtime class, and its containers and init
 *   containers as name, resources and restartPolicy (a sidecar's); of its status the phase, start
 *   time, reason and init container statuses (HAMi frees init containers' GPUs once all succeeded).
 *   What a ResourceQuota's scopes read (quota-scopes.ts) stays too: `activeDeadlineSeconds`,
 *   the pod-level `resources`, `status.qosClass`, and of `affinity` the pod (anti-)affinity terms.
 *   What only kubelet and kube-scheduler read (volumes, tolerations, node affinity, env, probes,
 *   conditions, IPs) goes: a real pod's projected service-account volume, env and probes are most
 *   of its size.
 * - A node keeps only the managedFields entries that manage the lock annotation (lockWrittenAt
 *   reads them) and loses `status.images` (kubelet lists up to 50 images with all their names).
 * New objects: the objects of a LIST or watch event are not changed, so a caller holding one sees it whole.
 */
export function slimPod(pod: V1Pod): V1Pod {
  const slim: V1Pod = { ...pod };
  if (pod.metadata !== undefined) {
    const metadata = { ...pod.metadata };
    delete metadata.managedFields;
    slim.metadata = metadata;
  }
  if (pod.spec !== undefined) {
    const { podAffinity, podAntiAffinity } = pod.spec.affinity ?? {};
    const affinity = defined({ podAffinity, podAntiAffinity });
    slim.spec = {
      containers: pod.spec.containers.map(slimContainer),
      ...(pod.spec.initContainers === undefined ? {} : { initContainers: pod.spec.initContainers.map(slimContainer) }),
      ...definedOf(pod.spec, POD_SPEC_KEPT),
      ...(Object.keys(affinity).length === 0 ? {} : { affinity }),
    };
  }
  if (pod.status !== undefined) slim.status = definedOf(pod.status, POD_STATUS_KEPT);
  return slim;
}

function slimContainer(container: V1Container): V1Container {
  return {
    name: container.name,
    ...defined({ resources: container.resources, restartPolicy: container.restartPolicy }),
  };
}

/** The fields that have a value: an absent field stays absent, as in the object it came from. */
function defined<T extends object>(fields: T): Partial<T> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined)) as Partial<T>;
}

/** The `keys` of `object` that have a value, in `keys` order (defined). */
function definedOf<T extends object, K extends keyof T>(object: T, keys: readonly K[]): Partial<Pick<T, K>> {
  return defined(Object.fromEntries(keys.map((key) => [key, object[key]])) as Pick<T, K>);
}

export function slimNode(node: V1Node): V1Node {
  const managed = node.metadata?.managedFields;
  const images = node.status?.images;
  if (managed === undefined && images === undefined) return node;
  const kept = managed?.filter((entry) => managesLockAnnotation(entry));
  const metadata = node.metadata === undefined ? undefined : { ...node.metadata, managedFields: kept };
  if (metadata !== undefined && (kept === undefined || kept.length === 0)) delete metadata.managedFields;
  const status = node.status === undefined ? undefined : { ...node.status };
  if (status !== undefined) delete status.images;
  return { ...node, ...(metadata === undefined ? {} : { metadata }), ...(status === undefined ? {} : { status }) };
}
