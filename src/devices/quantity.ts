/**
 * Kubernetes resource quantities read the way kube-apiserver reads them (k8s.io/apimachinery
 * resource.ParseQuantity behind Quantity.UnmarshalJSON). Pure; never throws.
 *
 * Needed because the apiserver canonicalises quantities: a pod created with `nvidia.com/gpumem: 3000`
 * reads back as `"3k"`, and `1024` written as `1Ki` stays `"1Ki"`. Reading only plain digits would
 * silently drop such requests, and a stricter or looser grammar than the apiserver's would make the
 * webhook refuse pods the apiserver accepts, or accept what it refuses.
 *
 * Grammar: sign? number suffix, where the number is `digits`, `digits.digits`, `digits.` or
 * `.digits`, and the suffix is a binary SI unit (Ki…Ei), a decimal SI unit (n u m "" k M G T P E)
 * or a decimal exponent (`e3`, `E-2`). Quirks of Go's scanner kept on purpose, because the
 * apiserver accepts these: a sign or a suffix with no digits is zero (`-`, `k`, `.`), and a value
 * finer than 1n is rounded away from zero to 1n (`0.9999999999` is 1). One divergence: Go reads
 * an exponent as int64 and then truncates it to int32 (`1e4294967296` is 1); we read such an
 * exponent as what it says, a number beyond any bound. Another: a text longer than 64 characters
 * is malformed to us (Go would read `0.` followed by a million nines as 1). kube-apiserver never
 * sends such a string: admission sees the object re-encoded, every quantity in canonical form
 * (at most 19 digits and a suffix), so only a hand-made request can carry one, and reading it
 * exactly would cost time that grows faster than its length.
 */
export type QuantityValue =
  /** Not a quantity: kube-apiserver refuses to decode it. */
  | { kind: 'malformed' }
  /** A quantity with a fractional part (kube-apiserver refuses it for extended resources). */
  | { kind: 'fraction'; negative: boolean }
  /** An exact integer, at most about 10^30 in magnitude. */
  | { kind: 'integer'; value: bigint }
  /** An integer beyond 10^30 in magnitude: never computed, so `1e999999999` costs nothing. */
  | { kind: 'huge'; negative: boolean };

const MALFORMED: QuantityValue = Object.freeze({ kind: 'malformed' });

const DECIMAL_SUFFIX: Readonly<Record<string, number>> = {
  n: -9,
  u: -6,
  m: -3,
  '': 0,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18,
};
const BINARY_SUFFIX: Readonly<Record<string, number>> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const SUFFIX_LETTERS = 'eEinumkKMGTP';
/** Go's strings.TrimSpace set (Unicode White_Space), which UnmarshalJSON applies first. */
const GO_SPACE = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;
/** Beyond 10^HUGE_DIGITS we stop computing: no GPU bound comes near it. */
const HUGE_DIGITS = 30;
const MAX_TEXT = 64;
const NANO = 10n ** 9n;
const INT64_MAX = 2n ** 63n - 1n;

/** strings.TrimSpace in linear time (a regex anchored at the end backtracks on long inner runs). */
function trimGoSpace(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && GO_SPACE.test(text[start] ?? '')) start += 1;
  while (end > start && GO_SPACE.test(text[end - 1] ?? '')) end -= 1;
  return text.slice(start, end);
}

function isDigit(char: string | undefined): boolean {
  return char !== undefined && char >= '0' && char <= '9';
}

/** The exponent of a suffix, as Go's suffixHandler.interpret reads it; undefined = not a suffix. */
function suffixPower(suffix: string): { power10: number; power2: number } | undefined {
  const decimal = DECIMAL_SUFFIX[suffix];
  if (decimal !== undefined) return { power10: decimal, power2: 0 };
  const binary = BINARY_SUFFIX[suffix];
  if (binary !== undefined) return { power10: 0, power2: binary };
  if (suffix.length > 1 && (suffix[0] === 'e' || suffix[0] === 'E')) {
    // strconv.ParseInt(s, 10, 64): an optional sign and at least one digit, within int64.
    const exponent = suffix.slice(1);
    if (!/^[+-]?\d+$/.test(exponent)) return undefined;
    const parsed = BigInt(exponent);
    if (parsed > INT64_MAX || parsed < -INT64_MAX - 1n) return undefined;
    // Clamped, not truncated like Go (see above): anything this far out is "huge" or "fraction".
    const clamped =
      parsed > 1_000_000_000n ? 1_000_000_000 : parsed < -1_000_000_000n ? -1_000_000_000 : Number(parsed);
    return { power10: clamped, power2: 0 };
  }
  return undefined;
}

/** Go's parseQuantityString: sign, digits before and after the point, and the suffix text. */
function scan(text: string): { negative: boolean; whole: string; fraction: string; suffix: string } | undefined {
  let pos = 0;
  let negative = false;
  if (text[0] === '-' || text[0] === '+') {
    negative = text[0] === '-';
    pos = 1;
  }
  while (text[pos] === '0') pos += 1;
  if (pos >= text.length) return { negative, whole: '', fraction: '', suffix: '' };
  const wholeStart = pos;
  while (isDigit(text[pos])) pos += 1;
  const whole = text.slice(wholeStart, pos);
  let fraction = '';
  if (text[pos] === '.') {
    pos += 1;
    const fractionStart = pos;
    while (isDigit(text[pos])) pos += 1;
    fraction = text.slice(fractionStart, pos);
  }
  const suffixStart = pos;
  while (pos < text.length && SUFFIX_LETTERS.includes(text[pos] ?? '')) pos += 1;
  if (text[pos] === '-' || text[pos] === '+') pos += 1;
  while (isDigit(text[pos])) pos += 1;
  if (pos < text.length) return undefined;
  return { negative, whole, fraction, suffix: text.slice(suffixStart) };
}

/** A quantity as kube-apiserver decodes it from JSON (a string, or a plain JSON number). */
export function readQuantity(value: unknown): QuantityValue {
  let text: string;
  // Padding is trimmed, but not megabytes of it.
  if (typeof value === 'string') text = value.length > MAX_TEXT * 16 ? '' : trimGoSpace(value);
  else if (typeof value === 'number' && Number.isFinite(value)) text = String(value);
  else return MALFORMED;
  if (text === '' || text.length > MAX_TEXT) return MALFORMED;

  const scanned = scan(text);
  if (scanned === undefined) return MALFORMED;
  const power = suffixPower(scanned.suffix);
  if (power === undefined) return MALFORMED;
  const digits = `${scanned.whole}${scanned.fraction}`.replace(/^0+/, '');
  if (digits === '') return { kind: 'integer', value: 0n };
  const { negative } = scanned;

  // value = digits × 10^power10 × 2^power2, with power10 counting the fraction digits.
  const power10 = power.power10 - scanned.fraction.length;
  if (power10 >= 0) {
    if (power10 + digits.length > HUGE_DIGITS) return { kind: 'huge', negative };
    const magnitude = (BigInt(digits) * 10n ** BigInt(power10)) << BigInt(power.power2);
    return { kind: 'integer', value: negative ? -magnitude : magnitude };
  }
  // A tiny value (far more fraction than digits) is rounded up to 1n: a fraction, whatever it is.
  if (-power10 > digits.length + HUGE_DIGITS) return { kind: 'fraction', negative };
  const scaled = BigInt(digits) << BigInt(power.power2);
  // Go keeps nano precision and rounds finer values away from zero.
  const nanoPower = power10 + 9;
  const nanos =
    nanoPower >= 0
      ? scaled * 10n ** BigInt(nanoPower)
      : (scaled + 10n ** BigInt(-nanoPower) - 1n) / 10n ** BigInt(-nanoPower);
  if (nanos % NANO !== 0n) return { kind: 'fraction', negative };
  const magnitude = nanos / NANO;
  if (magnitude.toString().length > HUGE_DIGITS) return { kind: 'huge', negative };
  return { kind: 'integer', value: negative ? -magnitude : magnitude };
}

/**
 * The exact integer a quantity denotes, or undefined when it is not one (fractional value,
 * garbage, outside int64, or not a string/number), like Go's `Quantity.AsInt64`.
 */
export function integerQuantity(value: unknown): bigint | undefined {
  const read = readQuantity(value);
  if (read.kind !== 'integer' || read.value > INT64_MAX || read.value < -INT64_MAX - 1n) return undefined;
  return read.value;
}

export const INT32_MAX = 2 ** 31 - 1;

/** The quantity as a JS number when it is an integer within int32, else undefined. */
export function int32Quantity(value: unknown): number | undefined {
  const integer = integerQuantity(value);
  if (integer === undefined || integer > BigInt(INT32_MAX) || integer < -BigInt(INT32_MAX) - 1n) return undefined;
  return Number(integer);
}
