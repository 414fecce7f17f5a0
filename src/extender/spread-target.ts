/**
 * Spread's one node for a pod of a burst. Pure but for the offers it remembers.
 *
 * kube-scheduler places the pods of a burst one scheduling cycle after another while the binds of
 * the earlier ones are still in flight, and picks at random among the nodes with the top score. A
 * rounded 0–10 score ties every empty node with every node holding one small pod, so a burst of 200
 * onto 1000 empty nodes put two pods on about 18 of them (the birthday problem), and on 500 nodes on
 * 30. Spread therefore names one node per pod, the one the policy wants most, exactly:
 *
 * 1. a node whose lock is free before one another pod holds (a bind there would queue behind it);
 * 2. the least utilised with the pod placed (score.ts nodeUtilization, not rounded);
 * 3. a node not offered to another pod in the last few seconds before one that was: that pod's bind
 *    may not have reached the store yet, so the node looks emptier than it is;
 * 4. name order, so that the choice is the same whoever asks.
 *
 * The offer is what keeps two pods of a burst apart: it lasts OFFER_MS, longer than a scheduling
 * cycle and its bind take, and a pod asked again (a retry) keeps its own offer.
 */

/** How long a node offered to one pod ranks after the others for the next pods. */
export const OFFER_MS = 5_000;

/** What spread needs to know of one named node; `fits: false` for a node it may not use. */
export interface SpreadCandidate {
  fits: boolean;
  /** How full the node is with the pod placed (0..1). */
  utilization: number;
  /** Another pod holds the node's lock (not for long: a long-held lock is not a candidate at all). */
  lockBusy: boolean;
}

/** Nodes recently offered to a pod, by node name. */
export class SpreadOffers {
  private readonly byNode = new Map<string, { uid: string; until: number }>();

  /** Whether `node` was offered to a pod other than `uid` less than OFFER_MS ago. */
  offeredToOther(node: string, uid: string | undefined, now: number): boolean {
    const offer = this.byNode.get(node);
    return offer !== undefined && offer.uid !== uid && offer.until > now;
  }

  offer(node: string, uid: string, now: number): void {
    this.byNode.delete(node);
    this.byNode.set(node, { uid, until: now + OFFER_MS });
    // Bounded by the nodes offered within OFFER_MS: the oldest (first in insertion order) go first.
    for (const [name, offer] of this.byNode) {
      if (offer.until > now) break;
      this.byNode.delete(name);
    }
  }
}

/** The index of the node spread gives the pod, or -1 when no candidate fits. */
export function spreadTarget(
  names: readonly string[],
  candidateAt: (index: number) => SpreadCandidate | undefined,
  offeredToOther: (node: string) => boolean,
): number {
  let best = -1;
  let bestBusy = true;
  let bestRank = Number.POSITIVE_INFINITY;
  for (let index = 0; index < names.length; index++) {
    const candidate = candidateAt(index);
    if (candidate?.fits !== true) continue;
    const name = names[index] ?? '';
    // An offered node ranks just after the nodes exactly as full that nobody was offered.
    const rank = candidate.utilization + (offeredToOther(name) ? OFFERED_PENALTY : 0);
    const better =
      best < 0 ||
      (bestBusy && !candidate.lockBusy) ||
      (bestBusy === candidate.lockBusy && (rank < bestRank || (rank === bestRank && name < (names[best] ?? ''))));
    if (!better) continue;
    best = index;
    bestBusy = candidate.lockBusy;
    bestRank = rank;
  }
  return best;
}

/** Far below one pod's share of a node, far above floating-point noise between equal nodes. */
const OFFERED_PENALTY = 1e-9;
