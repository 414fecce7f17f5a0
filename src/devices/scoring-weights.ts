/**
 * The pod annotation `hami.io/device-scoring-weights` (hami-wire-contract.md §3.4): how much slot,
 * core and memory utilisation each weigh in the GPU score. Pure; never throws.
 */
import { quoted } from '../base/user-text.js';
import { DEVICE_SCORING_WEIGHTS_ANNOTATION } from '../hami/wire.js';

export interface ScoringWeights {
  slot: number;
  core: number;
  memory: number;
}

export const DEFAULT_SCORING_WEIGHTS: Readonly<ScoringWeights> = Object.freeze({ slot: 1, core: 1, memory: 1 });

const KEYS = new Set<keyof ScoringWeights>(['slot', 'core', 'memory']);

function isWeightKey(key: string): key is keyof ScoringWeights {
  return KEYS.has(key as keyof ScoringWeights);
}

/**
 * `slot=1,core=1,memory=3`: exactly the three keys once each, non-negative integers, at least one
 * above zero. Absent annotation = the defaults. HAMi fails the whole Filter on an invalid value, so
 * the caller gets the problem rather than a silent fallback.
 */
export function parseScoringWeights(annotations: Readonly<Record<string, string>>): ScoringWeights | { error: string } {
  const raw = annotations[DEVICE_SCORING_WEIGHTS_ANNOTATION];
  if (raw === undefined) return { ...DEFAULT_SCORING_WEIGHTS };
  // The pod's author wrote the value: quote it clipped, never whole.
  const invalid = (why: string): { error: string } => ({
    error: `invalid ${DEVICE_SCORING_WEIGHTS_ANNOTATION} ${quoted(raw)}: ${why}`,
  });
  const entries = raw.split(',');
  if (entries.length !== 3) return invalid('expected slot=<int>,core=<int>,memory=<int>');
  const weights: Partial<ScoringWeights> = {};
  for (const entry of entries) {
    const [key = '', value = '', ...rest] = entry.split('=').map((part) => part.trim());
    if (rest.length > 0 || !isWeightKey(key)) return invalid(`unknown entry ${quoted(entry.trim())}`);
    if (weights[key] !== undefined) return invalid(`${key} given twice`);
    if (!/^\d+$/.test(value) || Number(value) > 2 ** 31 - 1) return invalid(`${key} must be a non-negative integer`);
    weights[key] = Number(value);
  }
  const { slot = 0, core = 0, memory = 0 } = weights;
  if (slot + core + memory === 0) return invalid('at least one weight must be above zero');
  return { slot, core, memory };
}
