import { timeoutSignal, until } from '../base/abort.js';
import type { AcquireOptions, AcquireResult } from './lock-events.js';
import { LockContentionError, NodeBusyError } from './lock-errors.js';
import { NodeLockQueue } from './lock-queue.js';
import type { LockingPod } from './node-locks.js';

/** Why a try found the node busy: another pod holds the lock, or the node's kubelet lags. */
export type LockWaitReason = LockContentionError | NodeBusyError;

export interface LockWaiterDeps {
  locks: { acquire(node: string, pod: LockingPod, options?: AcquireOptions): Promise<AcquireResult> };
  /** Calls `listener` when the state store sees the node's lock (or its holder) change; returns the unsubscribe. */
  onLockChange(node: string, listener: () => void): () => void;
  /** The longest a caller waits for its turn and the lock together. */
  lockWaitMs: number;
  /** A busy node is tried again after this long even when no change was seen (a missed watch event). */
  waitPollMs?: number;
}

export interface LockWaitRequest {
  node: string;
  pod: LockingPod;
  /** The caller's deadline: aborting it ends the wait with its reason. */
  signal: AbortSignal;
  /** Passed to every try (signal aside). */
  options: Omit<AcquireOptions, 'signal'>;
  /** Runs before each try; throwing ends the wait (e.g. the pod was replaced meanwhile). */
  beforeEachTry?: () => void;
  /** Told each time a try finds the node busy. */
  onBusy?: (reason: LockWaitReason) => void;
  /** The error when lockWaitMs passes before the caller even got its turn. */
  turnTimedOut: () => Error;
  /** The error when lockWaitMs passes while the node stays busy. */
  gaveUp: (last: LockWaitReason) => Error;
}

/**
 * Takes a node lock in the node's FIFO turn (one queue per node, in this process): only the head
 * tries, woken when the lock or its holder changes, or by a poll; the others wait, so one lock change
 * wakes one waiter instead of every waiter re-reading the node and its owner.
 */
export class LockWaiter {
  private readonly queue = new NodeLockQueue();

  constructor(private readonly deps: LockWaiterDeps) {}

  /** Waiters for (or trying) the lock of `node`. */
  waiting(node: string): number {
    return this.queue.waiting(node);
  }

  async acquire(request: LockWaitRequest): Promise<AcquireResult> {
    const { node, pod, signal } = request;
    const wait = timeoutSignal(this.deps.lockWaitMs, request.turnTimedOut);
    const waitSignal = AbortSignal.any([signal, wait.signal]);
    const turn = this.queue.enter(node);
    let lastWait: LockWaitReason | undefined;
    try {
      await until(turn.ready, waitSignal);
      for (;;) {
        request.beforeEachTry?.();
        let wake: () => void = () => undefined;
        const changed = new Promise<void>((resolve) => {
          wake = resolve;
        });
        // Subscribed before the try, so a change between the try's read and the wait is not missed.
        const unsubscribe = this.deps.onLockChange(node, () => {
          wake();
        });
        try {
          return await this.deps.locks.acquire(node, pod, { ...request.options, signal });
        } catch (error) {
          if (!(error instanceof LockContentionError) && !(error instanceof NodeBusyError)) throw error;
          lastWait = error;
          request.onBusy?.(error);
          const poll = timeoutSignal(this.deps.waitPollMs ?? 2000, () => new Error('poll'));
          try {
            await until(changed, AbortSignal.any([waitSignal, poll.signal])).catch((reason: unknown) => {
              if (!poll.signal.aborted || waitSignal.aborted) throw reason;
            });
          } finally {
            poll.clear();
          }
        } finally {
          unsubscribe();
        }
      }
    } catch (error) {
      if (wait.signal.aborted && !signal.aborted && lastWait !== undefined) throw request.gaveUp(lastWait);
      throw error;
    } finally {
      wait.clear();
      turn.leave();
    }
  }
}
