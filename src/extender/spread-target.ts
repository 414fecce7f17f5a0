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
 *    counting each other pod the node was offered to in the last few seconds as one more pod like
 *    this one: that pod's bind may not have reached the store yet, so the node looks emptier than it
 *    is (while many binds are in flight, as for a burst onto a few nodes, this keeps them even);
 * 3. name order, so that the choice is the same whoever asks.
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

/** The pods each node was offered to in the last OFFER_MS, by node name; a pod holds one offer at a time. */
export class SpreadOffers {
  private readonly byNode = new Map<string, Map<string, number>>();
  private readonly nodeOf = new Map<string, string>();

  /**
   * How many pods other than `uid` were offered `node` less than OFFER_MS ago and are not yet
   * `counted` in the store's usage (once a pod's bind is counted there, its offer would count it twice).
   */
  offersToOthers(node: string, uid: string | undefined, now: number, counted: (uid: string) => boolean): number {
    const offers = this.byNode.get(node);
    if (offers === undefined) return 0;
    let count = 0;
    for (const [holder, until] of offers) if (holder !== uid && until > now && !counted(holder)) count += 1;
    return count;
  }

  offer(node: string, uid: string, now: number): void {
    const previous = this.nodeOf.get(uid);
    if (previous !== undefined) this.withdraw(previous, uid);
    let offers = this.byNode.get(node);
    if (offers === undefined) {
      offers = new Map();
      this.byNode.set(node, offers);
    }
    offers.set(uid, now + OFFER_MS);
    this.nodeOf.delete(uid);
    this.nodeOf.set(uid, node);
    // Bounded by the pods offered within OFFER_MS: the oldest (first in insertion order) go first.
    for (const [holder, at] of this.nodeOf) {
      if ((this.byNode.get(at)?.get(holder) ?? 0) > now) break;
      this.withdraw(at, holder);
    }
  }

  private withdraw(node: string, uid: string): void {
    this.nodeOf.delete(uid);
    const offers = this.byNode.get(node);
    offers?.delete(uid);
    if (offers?.size === 0) this.byNode.delete(node);
  }
}

/** The index of the node spread gives the pod, or -1 when no candidate fits. */
export function spreadTarget(
  names: readonly string[],
  candidateAt: (index: number) => SpreadCandidate | undefined,
  offersToOthers: (node: string) => number,
): number {
  // The pod's own share of a node: about the least any candidate is used with it placed. Each pod a
  // node was offered to counts as that much more use, since its bind may not be in the store yet.
  let share = Number.POSITIVE_INFINITY;
  for (let index = 0; index < names.length; index++) {
    const candidate = candidateAt(index);
    if (candidate?.fits === true) share = Math.min(share, candidate.utilization);
  }
  const perOffer = Math.max(share, MIN_SHARE);
  let best = -1;
  let bestBusy = true;
  let bestRank = Number.POSITIVE_INFINITY;
  for (let index = 0; index < names.length; index++) {
    const candidate = candidateAt(index);
    if (candidate?.fits !== true) continue;
    const name = names[index] ?? '';
    const offers = offersToOthers(name);
    const rank = candidate.utilization + (offers === 0 ? 0 : offers * perOffer);
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

/** A share for a pod that uses next to nothing: offered nodes still rank after equal ones nobody was offered. */
const MIN_SHARE = 1e-9;
