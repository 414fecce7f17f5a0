/**
 * The pod status a kubelet reports, reduced to what schedulers, controllers and our tests read:
 * phase, the kubelet-owned conditions, container states. Bodies for a strategic-merge patch of
 * pods/status (conditions merge by type, so PodScheduled stays). Pure.
 */
import type { V1Pod } from '@kubernetes/client-node';

/** kubelet's reason when an admit handler (the device manager's Allocate) fails. */
export const UNEXPECTED_ADMISSION_ERROR = 'UnexpectedAdmissionError';

/** Go's metav1.Time form: RFC3339, second precision. */
export function kubeTime(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function condition(type: string, status: 'True' | 'False', at: string, reason?: string) {
  return { type, status, lastTransitionTime: at, ...(reason === undefined ? {} : { reason }) };
}

function containerId(pod: V1Pod, name: string): string {
  return `sim://${pod.metadata?.uid ?? ''}/${name}`;
}

export function runningStatus(pod: V1Pod, now: Date, hostIP: string) {
  const at = kubeTime(now);
  return {
    status: {
      phase: 'Running',
      hostIP,
      hostIPs: [{ ip: hostIP }],
      startTime: at,
      conditions: ['PodReadyToStartContainers', 'Initialized', 'ContainersReady', 'Ready'].map((type) =>
        condition(type, 'True', at),
      ),
      initContainerStatuses: (pod.spec?.initContainers ?? []).map((container) => ({
        name: container.name,
        image: container.image ?? '',
        imageID: '',
        containerID: containerId(pod, container.name),
        ready: false,
        restartCount: 0,
        started: false,
        state: {
          terminated: {
            exitCode: 0,
            reason: 'Completed',
            startedAt: at,
            finishedAt: at,
            containerID: containerId(pod, container.name),
          },
        },
      })),
      containerStatuses: (pod.spec?.containers ?? []).map((container) => ({
        name: container.name,
        image: container.image ?? '',
        imageID: '',
        containerID: containerId(pod, container.name),
        ready: true,
        restartCount: 0,
        started: true,
        state: { running: { startedAt: at } },
      })),
    },
  };
}

/** kubelet's rejectPod: phase Failed, the admit handler's reason, "Pod was rejected: <message>". */
export function rejectedStatus(reason: string, message: string) {
  return { status: { phase: 'Failed', reason, message: `Pod was rejected: ${message}` } };
}

/** Every container ended (`exitCode` 0 → Succeeded, otherwise Failed); not ready any more. */
export function terminatedStatus(pod: V1Pod, now: Date, exitCode: number, started: boolean) {
  const at = kubeTime(now);
  const reason = exitCode === 0 ? 'Completed' : 'Error';
  return {
    status: {
      phase: exitCode === 0 && started ? 'Succeeded' : 'Failed',
      conditions: ['ContainersReady', 'Ready'].map((type) => condition(type, 'False', at, 'PodCompleted')),
      containerStatuses: (pod.spec?.containers ?? []).map((container) => ({
        name: container.name,
        image: container.image ?? '',
        imageID: '',
        containerID: containerId(pod, container.name),
        ready: false,
        restartCount: 0,
        started: false,
        state: started
          ? {
              terminated: {
                exitCode,
                reason,
                startedAt: at,
                finishedAt: at,
                containerID: containerId(pod, container.name),
              },
            }
          : { waiting: { reason: 'ContainerCreating' } },
      })),
    },
  };
}
