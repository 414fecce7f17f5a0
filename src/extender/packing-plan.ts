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

/**
 * The nodes a plan may use, as two parallel arrays (no object per node: prioritize builds this from
 * thousands of names for every pod, and passes kube-scheduler's names as they are).
 */
export interface PlanCandidates {
  nodes: readonly string[];
  /**
   * How full each node is with the pod placed on it (score.ts nodeUtilization), 0..1;
   * NOT_A_CANDIDATE (or any negative or NaN value) for a node the plan may not use.
   */
  utilizations: ArrayLike<number>;
}

export const NOT_A_CANDIDATE = -1;

/**
 * The first PICKS_BEFORE_SORT nodes in plan order come from one pass that keeps them in a short
 * sorted list (a plan is usually a handful of nodes, and one pass beats sorting thousands of names
 * for every pod); what is left is sorted only when a big burst needs more nodes than that.
 */
const PICKS_BEFORE_SORT = 8;

export function packingTargets(
  candidates: PlanCandidates,
  pending: number,
  /** How many pods like this one fit on the node; it may stop counting at `needed`, all the plan still needs. */
  roomOn: (node: string, needed: number) => number,
): Set<string> {
  const { nodes, utilizations } = candidates;
  const targets = new Set<string>();
  let remaining = pending;
  if (remaining <= 0) return targets;
  // Fuller first, then name order: the order every pod of a burst agrees on.
  const before = (a: number, b: number): boolean => {
    const ua = utilizations[a] ?? 0;
    const ub = utilizations[b] ?? 0;
    return ua > ub || (ua === ub && (nodes[a] ?? '') < (nodes[b] ?? ''));
  };
  const isCandidate = (index: number): boolean => (utilizations[index] ?? Number.NaN) >= 0;
  const take = (index: number): void => {
    const node = nodes[index] ?? '';
    const room = roomOn(node, remaining);
    if (room <= 0) return;
    targets.add(node);
    remaining -= room;
  };
  // Indexes of the best candidates so far, best first; an equal one goes after those before it,
  // so among equals (a name given twice) the earlier stays first.
  const best: number[] = [];
  for (let index = 0; index < nodes.length; index++) {
    if (!isCandidate(index)) continue;
    const last = best[best.length - 1];
    if (best.length === PICKS_BEFORE_SORT && last !== undefined && !before(index, last)) continue;
    let at = best.length;
    while (at > 0 && before(index, best[at - 1] as number)) at -= 1;
    best.splice(at, 0, index);
    if (best.length > PICKS_BEFORE_SORT) best.pop();
  }
  for (const index of best) {
    if (remaining <= 0) return targets;
    take(index);
  }
  if (remaining <= 0 || best.length < PICKS_BEFORE_SORT) return targets;
  const picked = new Set(best);
  const rest = nodes
    .map((_, index) => index)
    .filter((index) => isCandidate(index) && !picked.has(index))
    .sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0));
  for (const index of rest) {
    if (remaining <= 0) break;
    take(index);
  }
  return targets;
}
