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
  /**
   * metadata.creationTimestamp (apiserver clock, whole seconds): orders a lock's write and this pod (lock-owner.ts).
   */
  createdAt?: Date | undefined;
  /**
   * kubelet has admitted the pod on its node: it reported `status.startTime` (set in the first
   * status after admission, which allocates every container's devices), or a container has started.
   */
  admitted?: boolean;
}

interface PodLike {
  metadata?: {
    uid?: string;
    deletionTimestamp?: unknown;
    creationTimestamp?: unknown;
    annotations?: Record<string, string> | undefined;
  };
  spec?: { nodeName?: string };
  status?: {
    phase?: string;
    startTime?: unknown;
    containerStatuses?: { started?: boolean; state?: { running?: unknown; terminated?: unknown } }[];
    initContainerStatuses?: { started?: boolean; state?: { running?: unknown; terminated?: unknown } }[];
  };
}

export function ownerPodFrom(pod: PodLike): OwnerPod {
  return {
    uid: pod.metadata?.uid,
    phase: pod.status?.phase,
    deleting: pod.metadata?.deletionTimestamp !== undefined && pod.metadata.deletionTimestamp !== null,
    nodeName: pod.spec?.nodeName === '' ? undefined : pod.spec?.nodeName,
    bindPhase: pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION],
    createdAt: dateOf(pod.metadata?.creationTimestamp),
    admitted: admittedByKubelet(pod.status),
  };
}

function admittedByKubelet(status: PodLike['status']): boolean {
  if (dateOf(status?.startTime) !== undefined) return true;
  const started = (container: { started?: boolean; state?: { running?: unknown; terminated?: unknown } }) =>
    container.started === true || container.state?.running != null || container.state?.terminated != null;
  return (status?.containerStatuses ?? []).some(started) || (status?.initContainerStatuses ?? []).some(started);
}

function dateOf(value: unknown): Date | undefined {
  const date = value instanceof Date ? value : typeof value === 'string' ? new Date(value) : undefined;
  return date === undefined || Number.isNaN(date.getTime()) ? undefined : date;
}
