import { classifyLock, type LockRulesConfig } from '../lock/lock-rules.js';
import type { LockValue } from '../lock/lock-value.js';
import type { LockInspection } from '../lock/lock-events.js';
import { ownerPodFrom } from '../lock/owner-pod.js';
import type { LockSample } from './metrics.js';
import { type Clock, systemClock } from '../base/clock.js';

type PodLike = Parameters<typeof ownerPodFrom>[0];

/** The read-only slice of the informer cache (ClusterCache) the lock gauges need. */
export interface LockedNodeView {
  lockedNodes(): string[];
  /**
   * The node's lock as the store keeps it: parsed once, with when this process first saw the value
   * (ages are judged by our clock).
   */
  lockOf(node: string): { value: LockValue; firstSeen?: Date } | undefined;
  pod(namespace: string, name: string): PodLike | undefined;
}

/** One inspected node as a gauge sample; undefined when the node carries no lock. */
export function lockSampleOf(inspection: LockInspection): LockSample | undefined {
  if (inspection.classification === undefined) return undefined;
  const { ageMs, state } = inspection.classification;
  return { node: inspection.node, ageSeconds: ageMs === undefined ? undefined : ageMs / 1000, state };
}

/**
 * A LockSource that classifies every locked node from the informer cache with the lock rules, at
 * scrape time: no API call per scrape, and ages that are current rather than a sweep old. The
 * cache can lag the apiserver by a watch event; for a gauge that is fine.
 */
export function cachedLockSource(
  view: LockedNodeView,
  config: LockRulesConfig,
  clock: Clock = systemClock,
): () => LockSample[] {
  return () => {
    const now = new Date(clock());
    const samples: LockSample[] = [];
    for (const node of view.lockedNodes()) {
      const lock = view.lockOf(node);
      if (lock === undefined) continue;
      const { value } = lock;
      const pod = value.kind === 'owned' ? view.pod(value.owner.namespace, value.owner.name) : undefined;
      const { ageMs, state } = classifyLock({
        lock: value,
        owner: pod === undefined ? undefined : ownerPodFrom(pod),
        node,
        now,
        config,
        seenAt: lock.firstSeen,
      });
      samples.push({ node, ageSeconds: ageMs === undefined ? undefined : ageMs / 1000, state });
    }
    return samples;
  };
}
