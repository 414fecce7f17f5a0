/**
 * The Kubernetes calls HAMi's device plugin makes, and nothing else. The stand-in goes through this
 * interface so unit tests can run it on an in-memory cluster and a chaos run can hand it a client
 * that talks through a fault proxy.
 */
import { PatchStrategy, setHeaderOptions, type CoreV1Api, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { NODE_LOCK } from './wire.js';

export interface PluginApi {
  readNode(name: string): Promise<V1Node>;
  /** GET by name: whatever incarnation has that name now (HAMi checks no UID). */
  readPod(namespace: string, name: string): Promise<V1Pod>;
  /** LIST in all namespaces with field selector spec.nodeName=<node> (the fallback lookup). */
  listPodsOnNode(node: string): Promise<V1Pod[]>;
  /** Merge patch of annotations by pod name, no resourceVersion, no UID (HAMi's PatchPodAnnotations). */
  patchPodAnnotations(namespace: string, name: string, annotations: Record<string, string>): Promise<void>;
  /** Merge patch of the node lock carrying `resourceVersion` (a stale one is a 409); null deletes it. */
  patchNodeLock(node: string, resourceVersion: string, value: string | null): Promise<void>;
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export function pluginApiFromCore(core: CoreV1Api): PluginApi {
  return {
    readNode: (name) => core.readNode({ name }),
    readPod: (namespace, name) => core.readNamespacedPod({ namespace, name }),
    listPodsOnNode: async (node) =>
      (await core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node}` })).items,
    patchPodAnnotations: async (namespace, name, annotations) => {
      await core.patchNamespacedPod({ namespace, name, body: { metadata: { annotations } } }, mergePatch);
    },
    patchNodeLock: async (node, resourceVersion, value) => {
      await core.patchNode(
        { name: node, body: { metadata: { annotations: { [NODE_LOCK]: value }, resourceVersion } } },
        mergePatch,
      );
    },
  };
}
