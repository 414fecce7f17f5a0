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

/** Fuller first, then name order: the order every pod of a burst agrees on. */
function before(a: PlanCandidate, b: PlanCandidate): boolean {
  return a.utilization > b.utilization || (a.utilization === b.utilization && a.node < b.node);
}

/**
 * Picks in plan order one at a time while few are needed (a plan is usually a handful of nodes, and
 * a linear pass each beats sorting thousands of names for every pod), and sorts what is left only
 * when a big burst needs more than PICKS_BEFORE_SORT nodes.
 */
const PICKS_BEFORE_SORT = 8;

export function packingTargets(candidates: readonly PlanCandidate[], pending: number, roomOn: (node: string) => number): Set<string> {
  const targets = new Set<string>();
  let remaining = pending;
  const take = (node: string): void => {
    const room = roomOn(node);
    if (room <= 0) return;
    targets.add(node);
    remaining -= room;
  };
  const taken = new Set<number>();
  for (let pick = 0; pick < PICKS_BEFORE_SORT && remaining > 0 && taken.size < candidates.length; pick++) {
    let best = -1;
    for (let index = 0; index < candidates.length; index++) {
      const candidate = candidates[index];
      const current = candidates[best];
      if (candidate !== undefined && !taken.has(index) && (current === undefined || before(candidate, current))) best = index;
    }
    taken.add(best);
    take(candidates[best]?.node ?? '');
  }
  if (remaining <= 0) return targets;
  const rest = candidates.filter((_, index) => !taken.has(index)).sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0));
  for (const { node } of rest) {
    if (remaining <= 0) break;
    take(node);
  }
  return targets;
}
