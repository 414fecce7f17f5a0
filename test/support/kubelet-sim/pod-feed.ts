/**
 * The kubelet simulator's view of bound pods: LIST then WATCH of all pods with a node, relisting
 * after any watch failure (a 410, an apiserver restart, a reset connection) so it survives a chaos
 * run. A relist reports pods that vanished meanwhile as deleted. Handlers run synchronously, in
 * event order.
 */
import { Watch, type CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';

export interface PodFeedHandlers {
  upsert(pod: V1Pod): void;
  remove(pod: V1Pod): void;
}

export interface PodFeedOptions {
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  handlers: PodFeedHandlers;
  /** Pause before a relist after a failure. */
  retryDelayMs?: number;
  log?: (line: string) => void;
}

export class PodFeedStoppedError extends Error {
  constructor() {
    super('pod feed stopped');
    this.name = 'PodFeedStoppedError';
  }
}

// Bound pods only: what a kubelet watches is pods with its node name.
const FIELD_SELECTOR = 'spec.nodeName!=';

function keyOf(pod: V1Pod): string {
  return pod.metadata?.uid ?? `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
}

export class PodFeed {
  private readonly known = new Map<string, V1Pod>();
  private controller: AbortController | undefined;
  private stopped = false;
  private running: Promise<void> | undefined;
  private wakeRetry: (() => void) | undefined;

  constructor(private readonly options: PodFeedOptions) {}

  /** Resolves once the first LIST has been handed to the handlers. */
  start(): Promise<void> {
    return new Promise<void>((synced, failed) => {
      this.running = this.run(synced).catch((error: unknown) => {
        failed(error instanceof Error ? error : new Error(String(error)));
      });
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.controller?.abort();
    this.wakeRetry?.();
    await this.running;
  }

  /** A method, not the field: the field is set by stop() while run() awaits. */
  private isStopped(): boolean {
    return this.stopped;
  }

  private async run(synced: () => void): Promise<void> {
    while (!this.isStopped()) {
      try {
        const list = await this.options.core.listPodForAllNamespaces({ fieldSelector: FIELD_SELECTOR });
        if (this.isStopped()) return;
        this.reconcile(list.items);
        synced();
        let resourceVersion = list.metadata?.resourceVersion ?? '';
        // Keep watching from the last version seen until a watch fails; then relist.
        for (;;) {
          const next = await this.watchOnce(resourceVersion);
          if (this.isStopped()) return;
          resourceVersion = next;
        }
      } catch (error) {
        if (this.isStopped()) return;
        this.options.log?.(`pod feed: ${error instanceof Error ? error.message : String(error)}; relisting`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.options.retryDelayMs ?? 500);
          this.wakeRetry = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
    }
  }

  private reconcile(items: readonly V1Pod[]): void {
    const listed = new Set(items.map(keyOf));
    for (const [key, pod] of this.known) {
      if (!listed.has(key)) {
        this.known.delete(key);
        this.options.handlers.remove(pod);
      }
    }
    for (const pod of items) this.apply('upsert', pod);
  }

  private apply(kind: 'upsert' | 'remove', pod: V1Pod): void {
    const key = keyOf(pod);
    if (kind === 'remove') {
      this.known.delete(key);
      this.options.handlers.remove(pod);
    } else {
      this.known.set(key, pod);
      this.options.handlers.upsert(pod);
    }
  }

  /** One watch; resolves with the last resourceVersion when it ends normally, rejects on failure. */
  private watchOnce(resourceVersion: string): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      let latest = resourceVersion;
      let settled = false;
      const finish = (error?: Error) => {
        if (settled) return;
        settled = true;
        this.controller?.abort();
        if (error === undefined) resolve(latest);
        else reject(error);
      };
      if (this.stopped) {
        finish(new PodFeedStoppedError());
        return;
      }
      const onEvent = (type: string, object: V1Pod & { code?: number; message?: string }) => {
        if (settled) return;
        const version = object.metadata?.resourceVersion;
        if (type === 'ERROR') {
          finish(new Error(`watch error ${object.code ?? ''}: ${object.message ?? JSON.stringify(object)}`));
          return;
        }
        if (version !== undefined && version !== '') latest = version;
        if (type === 'ADDED' || type === 'MODIFIED') this.apply('upsert', object);
        else if (type === 'DELETED') this.apply('remove', object);
      };
      const onDone = (error: unknown) => {
        // client-node also ends a quiet watch after 30 s without data: an ordinary end.
        if (error === null || error === undefined || (error as { name?: unknown }).name === 'TimeoutError') finish();
        else finish(error instanceof Error ? error : new Error(`watch ended: ${JSON.stringify(error)}`));
      };
      new Watch(this.options.kubeConfig)
        .watch(
          '/api/v1/pods',
          { fieldSelector: FIELD_SELECTOR, resourceVersion, allowWatchBookmarks: true, timeoutSeconds: 300 },
          onEvent,
          onDone,
        )
        .then(
          (controller) => {
            this.controller = controller;
            if (settled || this.stopped) controller.abort();
          },
          (error: unknown) => {
            finish(error instanceof Error ? error : new Error(String(error)));
          },
        );
    });
  }
}
