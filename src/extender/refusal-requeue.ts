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
 * event that requeues it. One write per refusal at most; the annotation means nothing else.
 */

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

export class RefusalRequeue {
  /** pod uid → the refusal, in insertion order (oldest first). */
  private readonly watched = new Map<string, Watched>();
  /** node → uids of watched pods it refused. */
  private readonly byNode = new Map<string, Set<string>>();
  private unsubscribe: (() => void) | undefined;
  private readonly clock: () => number;

  constructor(private readonly deps: RefusalRequeueDeps) {
    this.clock = deps.clock ?? Date.now;
  }

  start(): void {
    this.unsubscribe ??= this.deps.onNodeChange((node) => {
      this.onNodeChange(node);
    });
  }

  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
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
      if (!this.deps.stillPending(entry.pod)) continue;
      this.deps.nudge(entry.pod).catch((error: unknown) => {
        this.deps.log?.(
          `could not requeue ${entry.pod.namespace}/${entry.pod.name} after node ${node} changed (kube-scheduler retries it on its next event): ${error instanceof Error ? error.message : String(error)}`,
        );
      });
    }
  }
}
