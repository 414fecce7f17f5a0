import type { V1Pod } from '@kubernetes/client-node';
import { BIND_PHASE_ANNOTATION } from '../hami/wire.js';

/**
 * Whether the node's kubelet has acknowledged a pod a HAMi-style bind placed there: `status.startTime`,
 * which kubelet sets in the first status it writes after admitting the pod (so after Allocate and its
 * device checkpoint) or in its rejection. A terminal pod needs nothing more; a pod being deleted still
 * counts (a kubelet admits a terminating pod it has not synced yet). Read by the bind's wait for
 * kubelet (cluster/unacknowledged-allocations.ts) and by NODELOCK_FORCE_AFTER (kubelet-admission.ts).
 */

/** The pod's node while it awaits kubelet's acknowledgement; undefined when it does not. Pure. */
export function nodeAwaitingAcknowledgement(pod: V1Pod): string | undefined {
  const node = pod.spec?.nodeName;
  if (node === undefined || node === '') return undefined;
  if (pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION] === undefined) return undefined;
  const phase = pod.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed') return undefined;
  return pod.status?.startTime === undefined ? node : undefined;
}
