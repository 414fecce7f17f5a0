import type { GpuDevice, LinkScores } from './inventory.js';

/**
 * The `topology-aware` GPU policy's choice among the GPUs that fit (pkg/device/nvidia/device.go
 * Fit with needTopology, computeWorstSingleCard, generateCombinations, computeBestCombination).
 * Pure. Candidates come in policy order, and every tie goes to the earlier candidate.
 *
 * - One GPU: the one with the lowest sum of link scores to the other candidates, which leaves the
 *   well-linked GPUs together for multi-GPU pods.
 * - N GPUs: the set with the highest sum of pairwise link scores. HAMi tries every combination;
 * so do we up to COMBINATION_LIMIT (C(8,4) = 70, C(12,6) = 924;
 * C(16,8) = 12,870 is past it), beyond which a greedy pick
 *   (best pair, then the GPU adding most) keeps a filter over many nodes fast.
 */
export const COMBINATION_LIMIT = 2_000;

/** a's score for b as the plugin wrote it, else b's for a (the plugin writes both ways), else 0. */
export function linkScore(scores: LinkScores, a: string, b: string): number {
  return scores.get(a)?.get(b) ?? scores.get(b)?.get(a) ?? 0;
}

export function leastLinked(candidates: readonly GpuDevice[], scores: LinkScores): GpuDevice | undefined {
  let best: { device: GpuDevice; total: number } | undefined;
  for (const device of candidates) {
    let total = 0;
    for (const other of candidates) if (other !== device) total += linkScore(scores, device.uuid, other.uuid);
    if (best === undefined || total < best.total) best = { device, total };
  }
  return best?.device;
}

function setScore(devices: readonly GpuDevice[], scores: LinkScores): number {
  let total = 0;
  for (let i = 0; i < devices.length; i++) {
    for (let j = i + 1; j < devices.length; j++)
      total += linkScore(scores, devices[i]?.uuid ?? '', devices[j]?.uuid ?? '');
  }
  return total;
}

/** C(n, k), or `cap + 1` as soon as it exceeds `cap`. */
function combinationsUpTo(n: number, k: number, cap: number): number {
  let count = 1;
  for (let i = 1; i <= k; i++) {
    count = (count * (n - k + i)) / i;
    if (count > cap) return cap + 1;
  }
  return count;
}

function exhaustive(
  candidates: readonly GpuDevice[],
  count: number,
  scores: LinkScores,
): { devices: GpuDevice[]; score: number } {
  const picks = Array.from({ length: count }, (_, i) => i);
  let best: { devices: GpuDevice[]; score: number } | undefined;
  for (;;) {
    const devices = picks.map((i) => candidates[i] as GpuDevice);
    const score = setScore(devices, scores);
    if (best === undefined || score > best.score) best = { devices, score };
    // Next combination in lexicographic order, so earlier candidates win ties.
    let slot = count - 1;
    while (slot >= 0 && (picks[slot] ?? 0) === candidates.length - count + slot) slot--;
    if (slot < 0) return best;
    picks[slot] = (picks[slot] ?? 0) + 1;
    for (let next = slot + 1; next < count; next++) picks[next] = (picks[next - 1] ?? 0) + 1;
  }
}

function greedy(
  candidates: readonly GpuDevice[],
  count: number,
  scores: LinkScores,
): { devices: GpuDevice[]; score: number } {
  const chosen: GpuDevice[] = [];
  const rest = [...candidates];
  while (chosen.length < count) {
    let bestIndex = 0;
    let bestGain = -Infinity;
    for (const [index, device] of rest.entries()) {
      // The first pick has no partner yet: rate it by its best link, so the best pair starts the set.
      const gain =
        chosen.length === 0
          ? Math.max(
              0,
              ...rest.filter((other) => other !== device).map((other) => linkScore(scores, device.uuid, other.uuid)),
            )
          : chosen.reduce((sum, other) => sum + linkScore(scores, device.uuid, other.uuid), 0);
      if (gain > bestGain) [bestIndex, bestGain] = [index, gain];
    }
    chosen.push(...rest.splice(bestIndex, 1));
  }
  const order = new Map(candidates.map((device, index) => [device, index]));
  chosen.sort((a, b) => (order.get(a) ?? 0) - (order.get(b) ?? 0));
  return { devices: chosen, score: setScore(chosen, scores) };
}

/** The best-linked `count` of `candidates` (count ≥ 2, candidates ≥ count) and its score. */
export function bestLinkedSet(
  candidates: readonly GpuDevice[],
  count: number,
  scores: LinkScores,
): { devices: GpuDevice[]; score: number } {
  if (combinationsUpTo(candidates.length, count, COMBINATION_LIMIT) <= COMBINATION_LIMIT)
    return exhaustive(candidates, count, scores);
  return greedy(candidates, count, scores);
}
