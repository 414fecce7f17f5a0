/**
 * One FIFO of waiting binds per node, in this process. Only the head tries the lock; the others
 * wait for their turn, so a lock change wakes one bind instead of every waiter re-reading the node
 * and its owner. Nodes without waiters hold no entry.
 */
export interface QueueTurn {
  /** Resolves when this entry is at the head of its node's queue. */
  readonly ready: Promise<void>;
  /** Leaves the queue (at the head or not); the next entry becomes the head. Idempotent. */
  leave(): void;
}

interface Entry {
  resolve: () => void;
  left: boolean;
}

export class NodeLockQueue {
  private readonly queues = new Map<string, Entry[]>();

  enter(node: string): QueueTurn {
    let resolve: () => void = () => undefined;
    const ready = new Promise<void>((done) => {
      resolve = done;
    });
    const entry: Entry = { resolve, left: false };
    let queue = this.queues.get(node);
    if (!queue) this.queues.set(node, (queue = []));
    queue.push(entry);
    if (queue.length === 1) entry.resolve();
    return {
      ready,
      leave: () => {
        if (entry.left) return;
        entry.left = true;
        const current = this.queues.get(node);
        if (!current) return;
        const wasHead = current[0] === entry;
        const index = current.indexOf(entry);
        if (index >= 0) current.splice(index, 1);
        if (current.length === 0) this.queues.delete(node);
        else if (wasHead) current[0]?.resolve();
      },
    };
  }

  /** Binds waiting for (or trying) the lock of `node`. */
  waiting(node: string): number {
    return this.queues.get(node)?.length ?? 0;
  }
}
