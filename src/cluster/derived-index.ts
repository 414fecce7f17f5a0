import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { ObjectChange } from './object-store.js';

/**
 * How a batch of changes reached the store: a relist (the sum of many writes, seen at the LIST's
 * resourceVersion), one watch event (`object` is the event's object), or our own write's answer.
 */
export type Delivery =
  | { kind: 'relist'; version: string }
  | { kind: 'event'; type: 'ADDED' | 'MODIFIED' | 'DELETED'; object: unknown }
  | { kind: 'write' };

/** What an index may ask of the store while it takes in a change. */
export interface IndexEffects {
  /** Something a fit or lock decision on the node depends on changed: the node's generation moves. */
  changed(node: string): void;
  /** The node's lock waiters should look again; woken once every index has taken in the batch. */
  wake(node: string): void;
  warn(message: string): void;
}

/**
 * A structure the store derives from its nodes and pods (client-go's Indexers): registered once in
 * the store's list, told of every change both apply paths make, in the order of the list. The store
 * runs every index over a whole batch (a relist, or the one or two changes of a watch event) before
 * it wakes a lock waiter or calls a listener, so neither sees an index behind the objects.
 */
export interface DerivedIndex {
  onNode?(change: ObjectChange<V1Node>, delivery: Delivery, effects: IndexEffects): void;
  onPod?(change: ObjectChange<V1Pod>, delivery: Delivery, effects: IndexEffects): void;
}
