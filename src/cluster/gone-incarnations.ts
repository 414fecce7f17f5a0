import type { V1Pod } from '@kubernetes/client-node';
import type { GoneIncarnation } from '../lock/lock-owner.js';
import { BIND_PHASE_ANNOTATION } from '../hami/wire.js';

/**
 * The incarnations of pod names that went away, per UID, so the lock rules can tell which one a lock
 * was written for and whether kubelet may still admit it (lock/lock-owner.ts, kubelet-admission.ts).
 * Every deleted pod, not only lock holders: a bind in flight may take a lock for a pod after the pod
 * is gone (chaos on real nodes, seed 23). Keyed by UID, listed per name: a StatefulSet pod deleted
 * while it awaited Allocate, recreated and deleted again, leaves two records, and the later one
 * does not hide the earlier (issue #42). A pod that only vanished from a relist is remembered with
 * its stale copy marked as not final: it may have been bound in the gap.
 *
 * Bounded: at most `capacity` incarnations (about 2 MB), oldest dropped first; a lock outlives its
 * owner by minutes at most (NODELOCK_EXPIRE), so older ones are never asked for.
 */
export class GoneIncarnations {
  /** uid → its name's key, in the order they went (the oldest first, for eviction). */
  private readonly order = new Map<string, string>();
  private readonly byName = new Map<string, GoneIncarnation[]>();

  constructor(private readonly capacity = 10_000) {}

  remember(pod: V1Pod, at: Date, final: boolean): void {
    const key = keyOf(pod.metadata?.namespace, pod.metadata?.name);
    const uid = pod.metadata?.uid;
    if (key === undefined || uid === undefined) return;
    const incarnation: GoneIncarnation = {
      uid,
      boundTo: pod.spec?.nodeName === '' ? undefined : pod.spec?.nodeName,
      bindPhase: pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION],
      lastVersion: pod.metadata?.resourceVersion,
      final,
      vanishedAt: at,
    };
    const list = (this.byName.get(key) ?? []).filter((known) => known.uid !== uid);
    list.push(incarnation);
    this.byName.set(key, list);
    this.order.delete(uid);
    this.order.set(uid, key);
    while (this.order.size > this.capacity) this.evictOldest();
  }

  /** The incarnations of that name the store saw go, oldest first (empty when none). */
  of(namespace: string, name: string): readonly GoneIncarnation[] {
    const key = keyOf(namespace, name);
    return key === undefined ? [] : (this.byName.get(key) ?? []);
  }

  /** The record of this very incarnation, if it went. */
  byUid(namespace: string, name: string, uid: string): GoneIncarnation | undefined {
    return this.of(namespace, name).find((incarnation) => incarnation.uid === uid);
  }

  private evictOldest(): void {
    const oldest = this.order.entries().next().value;
    if (oldest === undefined) return;
    const [uid, key] = oldest;
    this.order.delete(uid);
    const rest = (this.byName.get(key) ?? []).filter((known) => known.uid !== uid);
    if (rest.length === 0) this.byName.delete(key);
    else this.byName.set(key, rest);
  }
}

function keyOf(namespace: string | undefined, name: string | undefined): string | undefined {
  return namespace === undefined || name === undefined ? undefined : `${namespace}/${name}`;
}
