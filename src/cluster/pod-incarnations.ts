import type { V1Pod } from '@kubernetes/client-node';
import type { GoneIncarnation } from '../lock/lock-owner.js';
import type { DerivedIndex, Delivery } from './derived-index.js';
import { GoneIncarnations } from './gone-incarnations.js';
import type { ObjectChange } from './object-store.js';

/**
 * What the store knows of each pod incarnation's place in the apiserver's order (lock/lock-owner.ts
 * reads it to tell whose a lock is): the resourceVersion a pod was created at, when its creation
 * came as a watch event; a resourceVersion at which the store saw it exist (its creation, or the
 * LIST it first came in); and the incarnations that went (gone-incarnations.ts).
 */
export class PodIncarnations implements DerivedIndex {
  /** Pod UID -> the resourceVersion it was created at, for pods whose creation the watch delivered. */
  private readonly createdVersions = new Map<string, string>();
  /** Pod UID -> a resourceVersion at which the store saw it exist. */
  private readonly seenVersions = new Map<string, string>();
  private readonly gone = new GoneIncarnations();

  constructor(private readonly clock: () => number) {}

  onPod(change: ObjectChange<V1Pod>, delivery: Delivery): void {
    const pod = change.object;
    const uid = pod.metadata?.uid;
    if (change.type === 'delete') {
      // A DELETED event carries the pod's very last state. A pod missing from a relist went while the
      // watch was down, and a MODIFIED event of a new UID under its name ends it without one: its
      // stored copy is not its last state (it may have been bound in the gap).
      const final = delivery.kind === 'event' && delivery.type === 'DELETED' && delivery.object === pod;
      this.gone.remember(pod, new Date(this.clock()), final);
      if (uid === undefined) return;
      this.createdVersions.delete(uid);
      this.seenVersions.delete(uid);
      return;
    }
    if (uid === undefined) return;
    if (delivery.kind === 'relist') {
      if (change.type === 'add') this.seenVersions.set(uid, delivery.version);
      return;
    }
    const version = pod.metadata?.resourceVersion;
    if (delivery.kind !== 'event' || delivery.object !== pod || version === undefined) return;
    // An ADDED event on a watch is the pod's creation, and carries its creation resourceVersion.
    if (delivery.type === 'ADDED') {
      this.createdVersions.set(uid, version);
      this.seenVersions.set(uid, version);
    } else if (change.type === 'add' && !this.seenVersions.has(uid)) this.seenVersions.set(uid, version);
  }

  createdVersion(uid: string): string | undefined {
    return this.createdVersions.get(uid);
  }

  seenVersion(uid: string): string | undefined {
    return this.seenVersions.get(uid);
  }

  /** The incarnations of that name the store saw go, oldest first. */
  goneOf(namespace: string, name: string): readonly GoneIncarnation[] {
    return this.gone.of(namespace, name);
  }

  /** The record of this very incarnation, if it went. */
  goneByUid(namespace: string, name: string, uid: string): GoneIncarnation | undefined {
    return this.gone.byUid(namespace, name, uid);
  }
}
