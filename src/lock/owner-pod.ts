import { BIND_PHASE_ANNOTATION } from '../hami/wire.js';

/**
 * What the lock rules need to know about the pod a lock names, taken from a Pod object as plain
 * data (so the rules stay free of any Kubernetes client).
 */

export interface OwnerPod {
  uid: string | undefined;
  phase: string | undefined;
  /** metadata.deletionTimestamp is set: the pod is going away. */
  deleting: boolean;
  nodeName: string | undefined;
  /** hami.io/bind-phase: allocating (bound, waiting for Allocate), success or failed. */
  bindPhase: string | undefined;
  /** metadata.creationTimestamp (apiserver clock): a lock stamped well before it is an earlier incarnation's. */
  createdAt?: Date | undefined;
}

interface PodLike {
  metadata?: { uid?: string; deletionTimestamp?: unknown; creationTimestamp?: unknown; annotations?: Record<string, string> | undefined };
  spec?: { nodeName?: string };
  status?: { phase?: string };
}

export function ownerPodFrom(pod: PodLike): OwnerPod {
  return {
    uid: pod.metadata?.uid,
    phase: pod.status?.phase,
    deleting: pod.metadata?.deletionTimestamp !== undefined && pod.metadata.deletionTimestamp !== null,
    nodeName: pod.spec?.nodeName === '' ? undefined : pod.spec?.nodeName,
    bindPhase: pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION],
    createdAt: dateOf(pod.metadata?.creationTimestamp),
  };
}

function dateOf(value: unknown): Date | undefined {
  const date = value instanceof Date ? value : typeof value === 'string' ? new Date(value) : undefined;
  return date === undefined || Number.isNaN(date.getTime()) ? undefined : date;
}
