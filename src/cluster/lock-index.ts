import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { isOwnedBy, parseLockValue, type LockValue, type PodRef } from '../lock/lock-value.js';
import { NODE_LOCK_ANNOTATION } from '../hami/wire.js';
import type { DerivedIndex, Delivery, IndexEffects } from './derived-index.js';
import type { ObjectChange } from './object-store.js';

/** A node's lock as the store has it: the raw value and when this process first saw it. */
export interface IndexedLock {
  raw: string;
  firstSeenMs: number;
  /**
   * The node's resourceVersion when the store first saw this value: the version of its write for a
   * watch event or our own write's answer, an upper bound of it after a relist. The order of this
   * lock against pod events (lock-owner.ts) is read from it, not from clocks.
   */
  firstSeenVersion: string | undefined;
  /** True when `firstSeenVersion` is the version of the write itself (not a relist's). */
  seenExactly: boolean;
  /** The pod UID this process wrote the value for, when it did. */
  writtenFor?: string;
}

/**
 * The state store's locks: each node's lock value with the time this process first saw it (lock
 * age is judged by our clock, ARCHITECTURE §5), an index from holder to its nodes (so a change of
 * the holder pod wakes that node's waiters in O(1)), and the waiters parked per node. The store
 * feeds it node changes; it never reads the API.
 */
export class LockIndex implements DerivedIndex {
  private readonly locks = new Map<string, IndexedLock>();
  /** Each node's lock value, parsed once when the store first sees it: its readers never parse it again. */
  private readonly values = new Map<string, LockValue>();
  private readonly holders = new Map<string, Set<string>>();
  private readonly listeners = new Map<string, Set<() => void>>();

  constructor(
    private readonly clock: () => number,
    /** Runs each listener; the store's fan-out, which keeps one failing listener from stopping the rest. */
    private readonly emit: (listeners: Set<() => void>) => void,
  ) {}

  /**
   * A node's lock value as each change leaves it (a new value moves the node's generation), and its
   * waiters woken. `exactly` below: a watch event or our write's answer, not a relist's sum of many.
   */
  onNode(change: ObjectChange<V1Node>, delivery: Delivery, effects: IndexEffects): void {
    const node = change.object;
    const name = node.metadata?.name;
    if (name === undefined) return;
    if (change.type === 'delete') {
      this.remove(name);
      effects.wake(name);
      return;
    }
    const raw = node.metadata?.annotations?.[NODE_LOCK_ANNOTATION];
    if (this.observe(name, raw, node.metadata?.resourceVersion, delivery.kind !== 'relist')) {
      effects.changed(name);
      effects.wake(name);
    }
  }

  /** A change of the pod a lock names wakes that node's waiters: its state decides a takeover. */
  onPod(change: ObjectChange<V1Pod>, _delivery: unknown, effects: IndexEffects): void {
    const [namespace, name] = [change.object.metadata?.namespace, change.object.metadata?.name];
    if (namespace === undefined || name === undefined) return;
    for (const node of this.nodesLockedBy(namespace, name)) effects.wake(node);
  }

  /**
   * Records the node's current lock value (undefined: none) as of the node's `version` (`exactly`:
   * the version of the change itself, a watch event or our write's answer); true when it changed.
   * Does not notify.
   */
  observe(node: string, raw: string | undefined, version?: string, exactly = false): boolean {
    if (raw === this.locks.get(node)?.raw) return false;
    const value = raw === undefined ? undefined : parseLockValue(raw);
    this.reindex(node, holderKey(this.values.get(node)), holderKey(value));
    if (raw === undefined || value === undefined) {
      this.locks.delete(node);
      this.values.delete(node);
    } else {
      this.locks.set(node, { raw, firstSeenMs: this.clock(), firstSeenVersion: version, seenExactly: exactly });
      this.values.set(node, value);
    }
    return true;
  }

  /** Notes that this process wrote the node's current value `raw` for the pod with `uid`. */
  markWrittenFor(node: string, raw: string, uid: string): void {
    const lock = this.locks.get(node);
    if (lock?.raw === raw) lock.writtenFor = uid;
  }

  /** Forgets a deleted node's lock. Does not notify. */
  remove(node: string): void {
    this.observe(node, undefined);
  }

  of(node: string): IndexedLock | undefined {
    return this.locks.get(node);
  }

  /** Whether the node's lock names `pod` (namespace and name, as the lock does; never a legacy or malformed value). */
  heldBy(node: string, pod: PodRef): boolean {
    const value = this.values.get(node);
    return value !== undefined && isOwnedBy(value, pod);
  }

  /** The node's lock value as parsed when the store first saw it (lock-value.ts); undefined for no lock. */
  valueOf(node: string): LockValue | undefined {
    return this.values.get(node);
  }

  /** When this process first saw exactly `value` on the node, if that is its lock now. */
  seenAt(node: string, value: string): Date | undefined {
    const lock = this.locks.get(node);
    return lock?.raw === value ? new Date(lock.firstSeenMs) : undefined;
  }

  /** Nodes carrying a lock now (the sweeper's work list). */
  lockedNodes(): string[] {
    return [...this.locks.keys()];
  }

  /** Nodes whose lock names this pod (by namespace/name, as the lock does); O(1). */
  nodesLockedBy(namespace: string, name: string): string[] {
    const nodes = this.holders.get(`${namespace}/${name}`);
    return nodes === undefined ? [] : [...nodes];
  }

  /** Wakes the waiters of every node whose lock names this pod (its state decides a takeover). */
  notifyHolder(namespace: string, name: string): void {
    for (const node of this.nodesLockedBy(namespace, name)) this.notify(node);
  }

  /** Parks `listener` on the node until the returned function is called. */
  onChange(node: string, listener: () => void): () => void {
    let listeners = this.listeners.get(node);
    if (!listeners) this.listeners.set(node, (listeners = new Set()));
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.listeners.get(node) === listeners) this.listeners.delete(node);
    };
  }

  /** Wakes the node's waiters. */
  notify(node: string): void {
    const listeners = this.listeners.get(node);
    if (listeners) this.emit(listeners);
  }

  private reindex(node: string, old: string | undefined, next: string | undefined): void {
    if (old === next) return;
    if (old !== undefined) {
      const nodes = this.holders.get(old);
      nodes?.delete(node);
      if (nodes?.size === 0) this.holders.delete(old);
    }
    if (next !== undefined) {
      let nodes = this.holders.get(next);
      if (!nodes) this.holders.set(next, (nodes = new Set()));
      nodes.add(node);
    }
  }
}

function holderKey(value: LockValue | undefined): string | undefined {
  return value?.kind === 'owned' ? `${value.owner.namespace}/${value.owner.name}` : undefined;
}
