import { seededRandom, type Random } from './kubelet-sim/index.js';

/**
 * A small seeded input generator for property tests: random code units, and near-valid strings
 * made by mutating valid ones (the inputs a buggy writer or an attacker produces, which random
 * bytes almost never reach). Deterministic per seed, so a failure names the seed that reproduces it.
 */
export interface Fuzz {
  random: Random;
  /** An integer in [0, max]. */
  int(max: number): number;
  pick<T>(items: readonly T[]): T;
  /** Up to `maxLength` random UTF-16 code units, control characters and lone surrogates included. */
  bytes(maxLength: number): string;
  /** `valid` with 1-3 mutations, each drawing its new characters from `alphabet`. */
  mutate(valid: string, alphabet: string): string;
}

/** The seed a property test runs with: FUZZ_SEED to reproduce a failure, else a fixed one. */
export function fuzzSeed(fallback: number): number {
  const fromEnv = Number(process.env.FUZZ_SEED);
  return Number.isInteger(fromEnv) && process.env.FUZZ_SEED !== '' ? fromEnv : fallback;
}

export function fuzz(seed: number): Fuzz {
  const random = seededRandom(seed);
  const int = (max: number): number => Math.floor(random() * (max + 1));
  const pick = <T>(items: readonly T[]): T => items[int(items.length - 1)] as T;
  const char = (alphabet: string): string => alphabet.charAt(int(alphabet.length - 1));

  const bytes = (maxLength: number): string => {
    const length = int(maxLength);
    let text = '';
    for (let i = 0; i < length; i++) {
      // Mostly ASCII (where the separators live), sometimes any code unit at all.
      text += String.fromCharCode(random() < 0.8 ? int(0x7f) : int(0xffff));
    }
    return text;
  };

  const flipCase = (c: string): string => (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase());
  const mutations: ((text: string, alphabet: string) => string)[] = [
    // Replace, insert or delete one character.
    (text, alphabet) => {
      const at = int(text.length - 1);
      return text.slice(0, at) + char(alphabet) + text.slice(at + 1);
    },
    // Hit the structure: a separator or upper-case letter (T, Z, NVIDIA) flipped or replaced.
    // Positions drawn uniformly would land in long names almost every time.
    (text, alphabet) => {
      const positions = [...text].flatMap((c, at) => (/[^a-z0-9]/.test(c) ? [at] : []));
      if (positions.length === 0) return text;
      const at = pick(positions);
      const c = text.charAt(at);
      return text.slice(0, at) + (random() < 0.5 ? flipCase(c) : char(alphabet)) + text.slice(at + 1);
    },
    (text, alphabet) => {
      const at = int(text.length);
      return text.slice(0, at) + char(alphabet) + text.slice(at);
    },
    (text) => {
      const at = int(text.length - 1);
      return text.slice(0, at) + text.slice(at + 1);
    },
    // Flip the case of one letter anywhere.
    (text) => {
      const at = int(text.length - 1);
      return text.slice(0, at) + flipCase(text.charAt(at)) + text.slice(at + 1);
    },
    // Duplicate or drop a slice (repeated separators, truncation).
    (text) => {
      const from = int(text.length);
      const to = from + int(Math.min(8, text.length - from));
      return text.slice(0, to) + text.slice(from, to) + text.slice(to);
    },
    (text) => text.slice(0, int(text.length)),
    (text) => text.slice(int(text.length)),
    // Stray text at either end, or a digit run grown long.
    (text, alphabet) => `${char(alphabet)}${char(alphabet)}${text}`,
    (text, alphabet) => `${text}${char(alphabet)}`,
    (text) => text.replace(/\d/, (digit) => digit.repeat(2 + int(12))),
    // Step a number over its bound: 23 → 24, 59 → 60, 01 → 00, 100 → 101 (same width where it fits).
    (text) => {
      const runs = [...text.matchAll(/\d+/g)];
      if (runs.length === 0) return text;
      const run = pick(runs);
      const stepped = String(Math.max(0, Number(run[0]) + pick([-1, 1, 1]))).padStart(run[0].length, '0');
      return text.slice(0, run.index) + stepped + text.slice(run.index + run[0].length);
    },
  ];

  const mutate = (valid: string, alphabet: string): string => {
    let text = valid;
    // Often a single mutation: a near miss is most telling one step away from a valid value.
    for (let count = random() < 0.5 ? 1 : 2 + int(2); count > 0; count--) text = pick(mutations)(text, alphabet);
    return text;
  };

  return { random, int, pick, bytes, mutate };
}
