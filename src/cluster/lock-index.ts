import { parseLockValue } from '../lock/lock-value.js';

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
export class LockIndex {
  private readonly locks = new Map<string, IndexedLock>();
  private readonly holders = new Map<string, Set<string>>();
  private readonly listeners = new Map<string, Set<() => void>>();

  constructor(
    private readonly clock: () => number,
    /** Runs each listener; the store's fan-out, which keeps one failing listener from stopping the rest. */
    private readonly emit: (listeners: Set<() => void>) => void,
  ) {}

  /**
   * Records the node's current lock value (undefined: none) as of the node's `version` (`exactly`:
   * the version of the change itself, a watch event or our write's answer); true when it changed.
   * Does not notify.
   */
  observe(node: string, raw: string | undefined, version?: string, exactly = false): boolean {
    const before = this.locks.get(node)?.raw;
    if (raw === before) return false;
    this.reindex(node, before, raw);
    if (raw === undefined) this.locks.delete(node);
    else this.locks.set(node, { raw, firstSeenMs: this.clock(), firstSeenVersion: version, seenExactly: exactly });
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

  /** Wakes the waiters of every node whose lock names this pod (its state decides a takeover). */
  notifyHolder(namespace: string, name: string): void {
    for (const node of this.nodesLockedBy(namespace, name)) this.notify(node);
  }

  private reindex(node: string, before: string | undefined, after: string | undefined): void {
    const [old, next] = [holderKey(before), holderKey(after)];
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

function holderKey(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const value = parseLockValue(raw);
  return value.kind === 'owned' ? `${value.owner.namespace}/${value.owner.name}` : undefined;
}
