import type { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { nodeAwaitingAcknowledgement } from './kubelet-acknowledgement.js';
import type { KubeletEvidenceApi, NodeLeaseRecord } from './kubelet-admission.js';
import type { PodRef } from './lock-value.js';
import { boundedSignal, withSignal } from '../kube/call-options.js';
import { isNotFound } from '../kube/errors.js';

/** Where every kubelet keeps its heartbeat Lease, named after its node. */
export const NODE_LEASE_NAMESPACE = 'kube-node-lease';

/**
 * KubeletEvidenceApi on @kubernetes/client-node: the node's Lease (kubelet renews it every 10 s by
 * default), the core/v1 Events kubelet records about a pod (source.component "kubelet",
 * source.host the node), and the node's pods kubelet has not acknowledged. Bounded like every
 * lock-path call (`callTimeoutMs`, default 10 s).
 */
export class KubeKubeletEvidenceApi implements KubeletEvidenceApi {
  private readonly callTimeoutMs: number;

  constructor(
    private readonly core: CoreV1Api,
    private readonly coordination: CoordinationV1Api,
    options: { callTimeoutMs?: number } = {},
  ) {
    this.callTimeoutMs = options.callTimeoutMs ?? 10_000;
  }

  private bounded(signal: AbortSignal | undefined): AbortSignal {
    return boundedSignal(signal, this.callTimeoutMs);
  }

  async nodeLease(node: string, signal?: AbortSignal): Promise<NodeLeaseRecord | undefined> {
    try {
      const answer = await this.coordination.readNamespacedLeaseWithHttpInfo(
        { namespace: NODE_LEASE_NAMESPACE, name: node },
        withSignal(this.bounded(signal)),
      );
      const lease = answer.data;
      const date = new Date(answer.headers.date ?? '');
      // kubelet is the Lease's one writer: its entry is re-stamped on every renewal.
      const times = (lease.metadata?.managedFields ?? [])
        .map((entry) => entry.time)
        .filter((time) => time instanceof Date && !Number.isNaN(time.getTime()));
      const renewedAt =
        times.length === 0 ? undefined : new Date(Math.max(...times.map((time) => (time as Date).getTime())));
      return {
        resourceVersion: lease.metadata?.resourceVersion ?? '',
        renewedAt,
        readAt: Number.isNaN(date.getTime()) ? undefined : date,
      };
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  async kubeletRegistered(node: string, signal?: AbortSignal): Promise<boolean> {
    try {
      const found = await this.core.readNode({ name: node }, withSignal(this.bounded(signal)));
      return (found.status?.nodeInfo?.kubeletVersion ?? '') !== '';
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
  }

  async kubeletReportedOn(node: string, pod: PodRef & { uid: string }, signal?: AbortSignal): Promise<boolean> {
    const events = await this.core.listNamespacedEvent(
      {
        namespace: pod.namespace,
        fieldSelector: `involvedObject.uid=${pod.uid},source=kubelet`,
        limit: 50,
      },
      withSignal(this.bounded(signal)),
    );
    return events.items.some((event) => event.source?.host === node);
  }

  async awaitingAcknowledgement(node: string, signal?: AbortSignal): Promise<PodRef[]> {
    const pods = await this.core.listPodForAllNamespaces(
      { fieldSelector: `spec.nodeName=${node}` },
      withSignal(this.bounded(signal)),
    );
    return pods.items
      .filter((pod) => nodeAwaitingAcknowledgement(pod) === node)
      .map((pod) => ({ namespace: pod.metadata?.namespace ?? '', name: pod.metadata?.name ?? '' }));
  }
}
