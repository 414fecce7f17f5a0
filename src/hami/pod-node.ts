import { isRecord } from '../base/json.js';
import { VGPU_NODE_ANNOTATION } from './wire.js';

/**
 * Which node a pod belongs to, in the two readings the code needs. They differ only when the pod's
 * `hami.io/vgpu-node` names another node than its spec.nodeName (a bind by someone else after ours
 * wrote its annotations), and each answers a different question:
 * - nodeOfPod: where the pod is, for its lock: bound → its node; else the node the scheduler was
 *   placing it on (the lock our bind took is there).
 * - allocationNodeOf: whose GPUs the pod's `hami.io/vgpu-devices-allocated` names, for usage: the
 *   annotation first, as HAMi's scheduler reads it (pkg/scheduler onAddPod), since the UUIDs are that
 *   node's GPUs.
 */

/** The pod's node: where it is bound, else where the scheduler was placing it. Raw pod JSON. */
export function nodeOfPod(pod: Record<string, unknown>): string | undefined {
  const spec = isRecord(pod.spec) ? pod.spec : {};
  if (typeof spec.nodeName === 'string' && spec.nodeName !== '') return spec.nodeName;
  const annotations = isRecord(pod.metadata) && isRecord(pod.metadata.annotations) ? pod.metadata.annotations : {};
  const annotated = annotations[VGPU_NODE_ANNOTATION];
  return typeof annotated === 'string' && annotated !== '' ? annotated : undefined;
}

interface PodNodeFields {
  metadata?: { annotations?: Record<string, string> | undefined } | undefined;
  spec?: { nodeName?: string | undefined } | undefined;
}

/** The node whose GPUs the pod's allocation names: `hami.io/vgpu-node`, else spec.nodeName; empty → undefined. */
export function allocationNodeOf(pod: PodNodeFields): string | undefined {
  const node = pod.metadata?.annotations?.[VGPU_NODE_ANNOTATION] ?? pod.spec?.nodeName;
  return node === '' ? undefined : node;
}
