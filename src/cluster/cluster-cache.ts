import { makeInformer, type CoreV1Api, type KubeConfig, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { parseNodeInventory, type NodeInventory } from '../devices/inventory.js';
import type { GpuUse } from '../devices/usage.js';
import { PodUsageIndex } from './pod-usage-index.js';

export interface ClusterCacheDeps {
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  log?: (level: 'info' | 'warn', message: string) => void;
  /** Pause before an informer that failed is started again. */
  restartDelayMs?: number;
}

type NodeListener = (node: V1Node) => void;
type PodListener = (pod: V1Pod, change: 'add' | 'update' | 'delete') => void;

interface Watched<T> {
  informer: ReturnType<typeof makeInformer<T & { metadata?: { name?: string } }>>;
  synced: boolean;
}

/**
 * Informer-backed view of nodes (with their parsed GPU inventory) and of GPU usage from pods.
 * Informers restart themselves after errors (client-node stops a ListWatch on any non-410 error).
 * `synced` turns true once both initial lists have been delivered; /readyz and filter wait for it.
 */
export class ClusterCache {
  readonly usage = new PodUsageIndex();
  private readonly inventories = new Map<string, NodeInventory>();
  private readonly nodeListeners = new Set<NodeListener>();
  private readonly podListeners = new Set<PodListener>();
  private nodes: Watched<V1Node> | undefined;
  private pods: Watched<V1Pod> | undefined;
  private stopped = false;
  private readonly syncWaiters: (() => void)[] = [];

  constructor(private readonly deps: ClusterCacheDeps) {}

  get synced(): boolean {
    return this.nodes?.synced === true && this.pods?.synced === true;
  }

  async start(): Promise<void> {
    const { kubeConfig, core } = this.deps;
    const nodeInformer = makeInformer<V1Node>(kubeConfig, '/api/v1/nodes', () => core.listNode());
    const podInformer = makeInformer<V1Pod>(kubeConfig, '/api/v1/pods', () => core.listPodForAllNamespaces());
    this.nodes = { informer: nodeInformer, synced: false };
    this.pods = { informer: podInformer, synced: false };

    const onNode = (node: V1Node) => {
      const name = node.metadata?.name;
      if (name === undefined) return;
      this.inventories.set(name, parseNodeInventory(node.metadata?.annotations));
      for (const listener of this.nodeListeners) listener(node);
    };
    nodeInformer.on('add', onNode);
    nodeInformer.on('update', onNode);
    nodeInformer.on('delete', (node) => {
      if (node.metadata?.name !== undefined) this.inventories.delete(node.metadata.name);
      for (const listener of this.nodeListeners) listener(node);
    });
    const onPod = (change: 'add' | 'update') => (pod: V1Pod) => {
      const problem = this.usage.upsert(pod);
      if (problem !== undefined) this.deps.log?.('warn', problem);
      for (const listener of this.podListeners) listener(pod, change);
    };
    podInformer.on('add', onPod('add'));
    podInformer.on('update', onPod('update'));
    podInformer.on('delete', (pod) => {
      if (pod.metadata?.uid !== undefined) this.usage.remove(pod.metadata.uid);
      for (const listener of this.podListeners) listener(pod, 'delete');
    });

    for (const [what, watched] of [['nodes', this.nodes], ['pods', this.pods]] as const) {
      watched.informer.on('error', (error: unknown) => {
        if (this.stopped) return;
        this.deps.log?.('warn', `${what} informer failed (${String((error as Error | undefined)?.message ?? error)}); restarting`);
        setTimeout(() => { if (!this.stopped) void watched.informer.start().catch(() => undefined); }, this.deps.restartDelayMs ?? 1000).unref();
      });
    }
    // start() resolves after the initial list has been delivered to the handlers.
    await Promise.all([
      nodeInformer.start().then(() => { this.markSynced(this.nodes); }),
      podInformer.start().then(() => { this.markSynced(this.pods); }),
    ]);
    this.deps.log?.('info', `cluster cache synced: ${this.inventories.size} nodes`);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([this.nodes?.informer.stop(), this.pods?.informer.stop()]);
  }

  /** Resolves once synced, or false after `timeoutMs`. */
  async waitForSync(timeoutMs: number): Promise<boolean> {
    if (this.synced) return true;
    return new Promise((resolve) => {
      const timer = setTimeout(() => { resolve(this.synced); }, timeoutMs);
      this.syncWaiters.push(() => { clearTimeout(timer); resolve(true); });
    });
  }

  inventory(nodeName: string): NodeInventory | undefined {
    return this.inventories.get(nodeName);
  }

  node(nodeName: string): V1Node | undefined {
    return this.nodes?.informer.get(nodeName);
  }

  pod(namespace: string, name: string): V1Pod | undefined {
    return this.pods?.informer.get(name, namespace);
  }

  usageOn(nodeName: string, excludeUid?: string): Map<string, GpuUse> {
    return this.usage.usageOn(nodeName, excludeUid);
  }

  /** Calls `listener` on every node add, update or delete until the returned function is called. */
  onNodeChange(listener: NodeListener): () => void {
    this.nodeListeners.add(listener);
    return () => { this.nodeListeners.delete(listener); };
  }

  /** Calls `listener` on every pod add, update or delete until the returned function is called. */
  onPodChange(listener: PodListener): () => void {
    this.podListeners.add(listener);
    return () => { this.podListeners.delete(listener); };
  }

  /** Nodes carrying hami.io/mutex.lock now, from the cache (the sweeper's work list). */
  lockedNodes(): string[] {
    return (this.nodes?.informer.list() ?? [])
      .filter((node) => node.metadata?.annotations?.['hami.io/mutex.lock'] !== undefined)
      .map((node) => node.metadata?.name ?? '')
      .filter((name) => name !== '');
  }

  /** Every node in the cache (for simulators and diagnostics). */
  nodeNames(): string[] {
    return [...this.inventories.keys()];
  }

  private markSynced(watched: Watched<V1Node> | Watched<V1Pod> | undefined): void {
    if (watched) watched.synced = true;
    if (this.synced) for (const waiter of this.syncWaiters.splice(0)) waiter();
  }
}
