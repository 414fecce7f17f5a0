import { createHash } from 'node:crypto';
import { HAMI_PREFIX, NVIDIA_PREFIX } from '../hami/wire.js';
import type { PodView } from './gpu-placement.js';

/**
 * Everything about a pod that a fit depends on, as one short key; pods with equal shapes fit alike.
 * Hashed: the annotations in it are the pod author's (up to 256 KiB), and the caches keep hundreds
 * of shapes.
 */
export function shapeOf(pod: Pick<PodView, 'requests' | 'policies' | 'annotations'>): string {
  const relevant = Object.entries(pod.annotations)
    .filter(([key]) => key.startsWith(NVIDIA_PREFIX) || key.startsWith(HAMI_PREFIX))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash('sha256')
    .update(JSON.stringify([pod.requests, pod.policies, relevant]))
    .digest('base64');
}

/**
 * The pods of one burst: the replicas a Deployment or Job creates at once share a shape and a
 * scheduler (a pod for another scheduler never reaches this extender). The key is made of
 * kube-scheduler's copy of the pod in prioritize and of the store's copy for pending pods, so
 * both must read the same fields.
 */
export function burstKeyOf(shape: string, pod: unknown): string {
  const schedulerName = (pod as { spec?: { schedulerName?: unknown } }).spec?.schedulerName;
  return `${typeof schedulerName === 'string' ? schedulerName : 'default-scheduler'}/${shape}`;
}
