import { namesGpuResource } from '../devices/requests.js';

/** A GPU pod no node has been chosen for yet. */
export interface PendingPod {
  namespace: string;
  name: string;
  uid: string;
  createdAt: Date | undefined;
}

interface PodLike {
  metadata?: {
    uid?: string;
    name?: string;
    namespace?: string;
    deletionTimestamp?: unknown;
    creationTimestamp?: unknown;
  };
  spec?: { nodeName?: string };
  status?: { phase?: string };
}

function createdAtOf(value: unknown): Date | undefined {
  const date = value instanceof Date ? value : typeof value === 'string' ? new Date(value) : undefined;
  return date === undefined || Number.isNaN(date.getTime()) ? undefined : date;
}

/** Pending as the live view means it: names a GPU resource, unbound, not finished, not going away. */
export function isPendingGpuPod(pod: PodLike): boolean {
  const phase = pod.status?.phase;
  const deleting = pod.metadata?.deletionTimestamp !== undefined && pod.metadata.deletionTimestamp !== null;
  const bound = pod.spec?.nodeName !== undefined && pod.spec.nodeName !== '';
  return !bound && !deleting && phase !== 'Succeeded' && phase !== 'Failed' && namesGpuResource(pod);
}

/**
 * The pending GPU pods, kept up to date from a pod store's changes (add/update/delete by UID).
 * Pure bookkeeping: whoever owns the pod watch calls `apply`.
 */
export class PendingPods {
  private readonly pods = new Map<string, PendingPod>();

  apply(pod: PodLike, change: 'add' | 'update' | 'delete'): void {
    const uid = pod.metadata?.uid;
    if (uid === undefined) return;
    if (change === 'delete' || !isPendingGpuPod(pod)) {
      this.pods.delete(uid);
      return;
    }
    this.pods.set(uid, {
      namespace: pod.metadata?.namespace ?? '',
      name: pod.metadata?.name ?? '',
      uid,
      createdAt: createdAtOf(pod.metadata?.creationTimestamp),
    });
  }

  /** Oldest first: the pod waiting longest leads. */
  list(): PendingPod[] {
    return [...this.pods.values()].sort(
      (a, b) => (a.createdAt?.getTime() ?? 0) - (b.createdAt?.getTime() ?? 0) || (a.name < b.name ? -1 : 1),
    );
  }
}
