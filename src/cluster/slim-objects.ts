import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { managesLockAnnotation } from '../lock/lock-written-at.js';

/**
 * What the state store keeps of the objects its watches deliver: everything but the large parts no
 * code reads, as controller-runtime's cache transforms do. A pod's `metadata.managedFields` (the
 * apiserver's record of every writer's fields, often larger than the rest of the pod) is dropped; a
 * node keeps only the managedFields entries that manage the lock annotation (lockWrittenAt reads
 * them) and loses `status.images` (kubelet lists up to 50 images with all their names). Shallow
 * copies: the objects of a LIST or watch event are not changed, so a caller holding one sees it whole.
 */
export function slimPod(pod: V1Pod): V1Pod {
  if (pod.metadata?.managedFields === undefined) return pod;
  const metadata = { ...pod.metadata };
  delete metadata.managedFields;
  return { ...pod, metadata };
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
