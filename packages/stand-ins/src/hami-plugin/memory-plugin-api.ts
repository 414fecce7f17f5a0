/**
 * An in-memory PluginApi: nodes and pods as plain objects, a resourceVersion per object, 409 on a
 * stale one. For unit tests of the stand-in (no apiserver), with hooks to inject a failure or a
 * concurrent write just before a call lands.
 */
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { PluginApi } from './plugin-api.js';
import { NODE_LOCK } from './wire.js';

/** An API error shaped like client-node's ApiException (numeric `code`). */
export class MemoryApiError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(`HTTP ${code}: ${message}`);
    this.name = 'MemoryApiError';
  }
}

export type MemoryCall = 'readNode' | 'readPod' | 'listPodsOnNode' | 'patchPodAnnotations' | 'patchNodeLock';

export class MemoryPluginApi implements PluginApi {
  readonly nodes = new Map<string, V1Node>();
  readonly pods = new Map<string, V1Pod>();
  /** Every call, in order, e.g. `patchNodeLock gpu-1`. */
  readonly calls: string[] = [];
  /**
   * Runs before each call; it may change the state (a concurrent writer) or throw (a failed call).
   * Return without throwing to let the call proceed.
   */
  before: ((call: MemoryCall, target: string) => void) | undefined;
  private version = 100;

  addNode(name: string, annotations: Record<string, string> = {}): V1Node {
    const node: V1Node = { metadata: { name, annotations: { ...annotations }, resourceVersion: this.nextVersion() } };
    this.nodes.set(name, node);
    return node;
  }

  addPod(pod: V1Pod): V1Pod {
    const stored: V1Pod = structuredClone(pod);
    stored.metadata = {
      uid: `uid-${stored.metadata?.name ?? ''}-${this.version}`,
      ...stored.metadata,
      resourceVersion: this.nextVersion(),
    };
    this.pods.set(`${stored.metadata.namespace ?? ''}/${stored.metadata.name ?? ''}`, stored);
    return stored;
  }

  pod(namespace: string, name: string): V1Pod | undefined {
    return this.pods.get(`${namespace}/${name}`);
  }

  lock(node: string): string | undefined {
    return this.nodes.get(node)?.metadata?.annotations?.[NODE_LOCK];
  }

  /**
   * Sets (a string) or deletes (undefined) node annotations as another writer would, e.g. the
   * plugin's own hami.io/node-nvidia-register report (bumps the resourceVersion).
   */
  annotateNode(node: string, annotations: Record<string, string | undefined>): void {
    const stored = this.requireNode(node);
    const next: Record<string, string> = { ...stored.metadata?.annotations };
    for (const [key, value] of Object.entries(annotations)) {
      if (value === undefined) Reflect.deleteProperty(next, key);
      else next[key] = value;
    }
    stored.metadata = { ...stored.metadata, annotations: next, resourceVersion: this.nextVersion() };
  }

  /** Sets or deletes the lock as another writer would (bumps the resourceVersion). */
  setLock(node: string, value: string | undefined): void {
    const stored = this.requireNode(node);
    const annotations = Object.fromEntries(
      Object.entries(stored.metadata?.annotations ?? {}).filter(([key]) => key !== NODE_LOCK),
    );
    if (value !== undefined) annotations[NODE_LOCK] = value;
    stored.metadata = { ...stored.metadata, annotations, resourceVersion: this.nextVersion() };
  }

  readNode(name: string): Promise<V1Node> {
    return this.call('readNode', name, () => structuredClone(this.requireNode(name)));
  }

  readPod(namespace: string, name: string): Promise<V1Pod> {
    return this.call('readPod', `${namespace}/${name}`, () => {
      const pod = this.pod(namespace, name);
      if (pod === undefined) throw new MemoryApiError(404, `pods "${name}" not found`);
      return structuredClone(pod);
    });
  }

  listPodsOnNode(node: string): Promise<V1Pod[]> {
    return this.call('listPodsOnNode', node, () =>
      [...this.pods.values()].filter((pod) => pod.spec?.nodeName === node).map((pod) => structuredClone(pod)),
    );
  }

  patchPodAnnotations(namespace: string, name: string, annotations: Record<string, string>): Promise<void> {
    return this.call('patchPodAnnotations', `${namespace}/${name}`, () => {
      const pod = this.pod(namespace, name);
      if (pod === undefined) throw new MemoryApiError(404, `pods "${name}" not found`);
      pod.metadata = {
        ...pod.metadata,
        annotations: { ...pod.metadata?.annotations, ...annotations },
        resourceVersion: this.nextVersion(),
      };
    });
  }

  patchNodeLock(node: string, resourceVersion: string, value: string | null): Promise<void> {
    return this.call('patchNodeLock', node, () => {
      const stored = this.requireNode(node);
      if (stored.metadata?.resourceVersion !== resourceVersion)
        throw new MemoryApiError(409, `the object has been modified (node ${node})`);
      this.setLock(node, value ?? undefined);
    });
  }

  private requireNode(name: string): V1Node {
    const node = this.nodes.get(name);
    if (node === undefined) throw new MemoryApiError(404, `nodes "${name}" not found`);
    return node;
  }

  private nextVersion(): string {
    this.version += 1;
    return String(this.version);
  }

  private call<T>(call: MemoryCall, target: string, run: () => T): Promise<T> {
    this.calls.push(`${call} ${target}`);
    try {
      this.before?.(call, target);
      return Promise.resolve(run());
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }
}
