/**
 * Binpack's packing plan for a burst. Pure.
 *
 * kube-scheduler places the pods of a burst one scheduling cycle after another, while the binds of
 * the earlier ones are still in flight: every pod sees nearly the same usage, the extender's 0–10
 * score ties on many nodes, and kube-scheduler picks among equal top scores at random, so a burst
 * scattered over every node. The plan names the nodes the burst should fill now: the fullest first
 * (name order among equals, so that every pod of the burst agrees), as many as it takes for their
 * room to hold the pods still pending. Pods of a burst spread over those few nodes, so their binds
 * run in parallel on several node locks instead of queueing behind one.
 *
 * The plan holds still while the burst binds: a bound pod leaves the pending count and takes its
 * share of the room at the same moment (the store counts an assumed pod on its node and no longer
 * as pending), so the set grows only when the burst grows or a node fills with other pods.
 */
export interface PlanCandidate {
  node: string;
  /** How full the node is with the pod placed on it (score.ts nodeUtilization), 0..1. */
  utilization: number;
}

export function packingTargets(candidates: readonly PlanCandidate[], pending: number, roomOn: (node: string) => number): Set<string> {
  const ordered = [...candidates].sort((a, b) => b.utilization - a.utilization || (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
  const targets = new Set<string>();
  let remaining = pending;
  for (const { node } of ordered) {
    if (remaining <= 0) break;
    const room = roomOn(node);
    if (room <= 0) continue;
    targets.add(node);
    remaining -= room;
  }
  return targets;
}
