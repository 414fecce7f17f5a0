import type { V1Pod } from '@kubernetes/client-node';
import type { VanishedOwner } from '../lock/kubelet-admission.js';
import { BIND_PHASE_ANNOTATION } from '../hami/wire.js';

/**
 * The last state of deleted pods (as their watch DELETED events carried it), by namespace/name, so
 * the lock rules can tell whether kubelet may still admit a lock owner that is gone
 * (lock/kubelet-admission.ts). Every deleted pod, not only lock holders: a bind in flight may take a
 * lock for a pod after the pod is gone (chaos on real nodes, seed 23). Bounded: at most `capacity`
 * entries, oldest dropped first (about 2 MB); a lock outlives its owner by minutes at most
 * (NODELOCK_EXPIRE), so older entries are never asked for.
 */
export class VanishedPods {
  private readonly entries = new Map<string, VanishedOwner>();

  constructor(private readonly capacity = 10_000) {}

  remember(pod: V1Pod, at: Date): void {
    const key = keyOf(pod.metadata?.namespace, pod.metadata?.name);
    if (key === undefined) return;
    this.entries.delete(key);
    this.entries.set(key, {
      uid: pod.metadata?.uid,
      boundTo: pod.spec?.nodeName === '' ? undefined : pod.spec?.nodeName,
      bindPhase: pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION],
      vanishedAt: at,
    });
    while (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.entries.delete(oldest);
    }
  }

  lastState(namespace: string, name: string): VanishedOwner | undefined {
    const key = keyOf(namespace, name);
    return key === undefined ? undefined : this.entries.get(key);
  }
}

function keyOf(namespace: string | undefined, name: string | undefined): string | undefined {
  return namespace === undefined || name === undefined ? undefined : `${namespace}/${name}`;
}
