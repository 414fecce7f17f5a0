/**
 * kube-scheduler retries a pod the extender refused on every node only on the next cluster event
 * (extender refusals are requeued by any event, kubernetes#122019). When that event is a change our
 * state store has not seen yet (a device plugin reporting again, a pod ending, a node added: its
 * informer and ours race), the retry is refused on the old view, and the pod then waits for an
 * unrelated event or kube-scheduler's 5-minute flush of unschedulable pods.
 *
 * This keeps, for recent refusals, the generation at which each refusing node was judged. When the
 * store later changes one of those nodes while the pod is still unbound, the refusal may be stale:
 * the pod's requeue annotation is written, and an update of an unschedulable pod is itself an
 * event that requeues it. One write per refusal at most; the annotation means nothing else. The
 * writes go through a work queue keyed by pod uid, so a change of a node that refused many pods
 * does not send all their writes at once.
 */

import { WorkQueue } from '../base/work-queue.js';

export interface RefusedPod {
  namespace: string;
  name: string;
  uid: string;
}

export interface RefusalRequeueDeps {
  /** The store's node generation, undefined for a node it has not seen. */
  nodeGeneration: (node: string) => number | undefined;
  /** Subscribes to every node change of the store; returns the unsubscribe. */
  onNodeChange: (listener: (node: string) => void) => () => void;
  /** Whether the store still shows this pod incarnation unbound and not finished. */
  stillPending: (pod: RefusedPod) => boolean;
  /** Writes the requeue annotation (uid-preconditioned); failures are the caller's to log. */
  nudge: (pod: RefusedPod) => Promise<void>;
  clock?: () => number;
  /** How long a refusal is watched (default 60 s; kube-scheduler's own retries take over after). */
  windowMs?: number;
  /** Pods watched at once; the oldest refusal is dropped beyond it (default 256). */
  maxPods?: number;
  /** Refusing nodes remembered per pod (default 5000; a filter may name 100,000 node names). */
  maxNodesPerPod?: number;
  log?: (message: string) => void;
}

interface Watched {
  pod: RefusedPod;
  nodes: Map<string, number | undefined>;
  at: number;
}

/** A requeue write owed to a pod, with the node whose change made it. */
interface Owed {
  pod: RefusedPod;
  node: string;
}

/** Requeue writes in flight at once at most. */
const NUDGE_WORKERS = 8;

export class RefusalRequeue {
  /** pod uid → the refusal, in insertion order (oldest first). */
  private readonly watched = new Map<string, Watched>();
  /** node → uids of watched pods it refused. */
  private readonly byNode = new Map<string, Set<string>>();
  /** pod uid → the write owed to it, waiting in `nudges` under the same uid. */
  private readonly owed = new Map<string, Owed>();
  private nudges: WorkQueue<string> | undefined;
  private unsubscribe: (() => void) | undefined;
  private readonly clock: () => number;

  constructor(private readonly deps: RefusalRequeueDeps) {
    this.clock = deps.clock ?? Date.now;
  }

  start(): void {
    this.nudges ??= new WorkQueue({
      workers: NUDGE_WORKERS,
      process: (uid) => this.nudge(uid),
    });
    this.unsubscribe ??= this.deps.onNodeChange((node) => {
      this.onNodeChange(node);
    });
  }

  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    void this.nudges?.shutDown();
    this.nudges = undefined;
    this.owed.clear();
    this.watched.clear();
    this.byNode.clear();
  }

  /** A filter refused `pod` on every node; `nodes` are the refusing nodes with the generation judged. */
  noteRefusal(pod: RefusedPod, nodes: Iterable<[string, number | undefined]>): void {
    this.forget(pod.uid);
    const limit = this.deps.maxNodesPerPod ?? 5_000;
    const kept = new Map<string, number | undefined>();
    for (const [node, generation] of nodes) {
      if (kept.size >= limit) break;
      kept.set(node, generation);
    }
    if (kept.size === 0) return;
    this.watched.set(pod.uid, { pod, nodes: kept, at: this.clock() });
    for (const node of kept.keys()) {
      let uids = this.byNode.get(node);
      if (uids === undefined) this.byNode.set(node, (uids = new Set()));
      uids.add(pod.uid);
    }
    const max = this.deps.maxPods ?? 256;
    while (this.watched.size > max) {
      const oldest = this.watched.keys().next().value;
      if (oldest === undefined) break;
      this.forget(oldest);
    }
  }

  /** A pod placed (or answered otherwise) needs no nudge. */
  forget(uid: string): void {
    const entry = this.watched.get(uid);
    if (entry === undefined) return;
    this.watched.delete(uid);
    for (const node of entry.nodes.keys()) {
      const uids = this.byNode.get(node);
      uids?.delete(uid);
      if (uids?.size === 0) this.byNode.delete(node);
    }
  }

  get size(): number {
    return this.watched.size;
  }

  private onNodeChange(node: string): void {
    const uids = this.byNode.get(node);
    if (uids === undefined) return;
    const now = this.clock();
    const window = this.deps.windowMs ?? 60_000;
    const generation = this.deps.nodeGeneration(node);
    for (const uid of [...uids]) {
      const entry = this.watched.get(uid);
      if (entry === undefined) continue;
      if (now - entry.at > window) {
        this.forget(uid);
        continue;
      }
      // A change that leaves the verdict's inputs alone (a status heartbeat) keeps the generation.
      if (entry.nodes.get(node) === generation) continue;
      this.forget(uid);
      this.owed.set(uid, { pod: entry.pod, node });
      this.nudges?.add(uid);
    }
  }

  private async nudge(uid: string): Promise<void> {
    const owed = this.owed.get(uid);
    this.owed.delete(uid);
    if (owed === undefined) return;
    const { pod, node } = owed;
    // Judged when the write is due, which is at once unless every worker is busy.
    if (!this.deps.stillPending(pod)) return;
    try {
      await this.deps.nudge(pod);
    } catch (error) {
      this.deps.log?.(
        `could not requeue ${pod.namespace}/${pod.name} after node ${node} changed ` +
          `(kube-scheduler retries it on its next event): ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }
}
