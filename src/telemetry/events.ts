import type { CoreV1Api, CoreV1Event } from '@kubernetes/client-node';

export interface EventTarget {
  kind: 'Pod' | 'Node';
  name: string;
  namespace?: string;
  uid?: string;
}

/**
 * Writes core/v1 Events (what `kubectl describe` shows). Fire and forget: an event that cannot be
 * written is logged and never fails the operation it describes.
 */
export class EventRecorder {
  constructor(
    private readonly core: CoreV1Api,
    private readonly component: string,
    private readonly log: (message: string) => void = () => undefined,
  ) {}

  record(target: EventTarget, type: 'Normal' | 'Warning', reason: string, message: string): void {
    const namespace = target.namespace ?? 'default';
    const now = new Date();
    const body: CoreV1Event = {
      metadata: { generateName: `${target.name}.`, namespace },
      involvedObject: { kind: target.kind, name: target.name, namespace: target.namespace, uid: target.uid, apiVersion: 'v1' },
      reason,
      message: message.slice(0, 1024),
      type,
      source: { component: this.component },
      reportingComponent: this.component,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    void this.core.createNamespacedEvent({ namespace, body }).catch((error: unknown) => {
      this.log(`could not record event ${reason} for ${target.kind} ${namespace}/${target.name}: ${(error as Error).message}`);
    });
  }
}
