import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { BIND_PHASE_ANNOTATION } from '../../src/hami/wire.js';
import { podStory } from './observations.js';
import { eventually, notYet, testCluster } from './test-cluster.js';

/** The pod once it is bound and its device plugin has allocated it (bind-phase success). */
export function allocatedPod(namespace: string, name: string, timeoutMs = 30_000): Promise<V1Pod> {
  const { core } = testCluster();
  return eventually(
    `${name} bound and allocated`,
    async () => {
      const pod = await core.readNamespacedPod({ name, namespace });
      return pod.spec?.nodeName !== undefined && pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION] === 'success'
        ? pod
        : notYet(await podStory(core, namespace, name, pod));
    },
    timeoutMs,
    100,
  );
}

/** The first event on the pod whose message matches, from kube-scheduler or from vgpu-warden. */
export function eventMatching(namespace: string, pod: string, pattern: RegExp): Promise<CoreV1Event> {
  const { core } = testCluster();
  return eventually(
    `an event on ${pod} matching ${String(pattern)}`,
    async () => {
      const events = await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${pod}` });
      return (
        events.items.find((event) => pattern.test(event.message ?? '')) ??
        notYet(
          `${events.items.length} events: ${
            events.items
              .slice(-3)
              .map((event) => `${event.reason ?? '?'}: ${(event.message ?? '').slice(0, 160)}`)
              .join(' | ') || 'none'
          }`,
        )
      );
    },
    30_000,
    200,
  );
}
