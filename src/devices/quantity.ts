/**
 * The integer value of a Kubernetes resource quantity, the way Go's `Quantity.AsInt64` sees it. Pure.
 *
 * Needed because the apiserver canonicalises quantities: a pod created with `nvidia.com/gpumem: 3000`
 * reads back as `"3k"`, and `1024` written as `1Ki` stays `"1Ki"`. Reading only plain digits would
 * silently drop such requests.
 *
 * Grammar (k8s.io/apimachinery resource.Quantity): sign? number suffix, where the number is
 * `digits`, `digits.digits`, `digits.` or `.digits`, and the suffix is a binary SI unit (Ki…Ei), a
 * decimal SI unit (n u m "" k M G T P E) or a decimal exponent (`e3`, `E-2`).
 */
const QUANTITY = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei)|[eE]([+-]?\d+)|(n|u|m|k|M|G|T|P|E))?$/;

const BINARY_POWER: Readonly<Record<string, bigint>> = { Ki: 10n, Mi: 20n, Gi: 30n, Ti: 40n, Pi: 50n, Ei: 60n };
const DECIMAL_POWER: Readonly<Record<string, number>> = { n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

// Anything above int64 is not an integer quantity for Go (AsInt64 fails); beyond 10^30 we stop
// computing at all so a hostile `1e999999999` cannot make us build a huge bigint.
const INT64_MAX = 2n ** 63n - 1n;
const MAX_DECIMAL_EXPONENT = 30;

/**
 * Returns the exact integer a quantity denotes, or undefined when it is not one (fractional value,
 * garbage, outside int64, or not a string/number). Numbers are accepted because raw pod JSON built
 * by hand may carry them; the apiserver itself always writes strings.
 */
export function integerQuantity(value: unknown): bigint | undefined {
  let text: string;
  if (typeof value === 'string') text = value.trim();
  else if (typeof value === 'number' && Number.isSafeInteger(value)) text = String(value);
  else return undefined;
  const match = QUANTITY.exec(text);
  if (!match) return undefined;
  const [, sign = '', number = '', binary, exponent, decimal] = match;
  const [whole = '', fraction = ''] = number.split('.');
  const mantissa = BigInt(`${whole}${fraction}` || '0');
  if (mantissa === 0n) return 0n;

  let power10 = -fraction.length;
  if (exponent !== undefined) power10 += Number(exponent);
  if (decimal !== undefined) power10 += DECIMAL_POWER[decimal] ?? 0;
  if (power10 > MAX_DECIMAL_EXPONENT) return undefined;
  const power2 = binary === undefined ? 0n : (BINARY_POWER[binary] ?? 0n);

  let magnitude = mantissa << power2;
  if (power10 >= 0) {
    magnitude *= 10n ** BigInt(power10);
  } else {
    // A huge negative exponent on a non-zero mantissa can only give a fraction.
    if (-power10 > text.length + 30) return undefined;
    const divisor = 10n ** BigInt(-power10);
    if (magnitude % divisor !== 0n) return undefined;
    magnitude /= divisor;
  }
  if (magnitude > INT64_MAX) return undefined;
  return sign === '-' ? -magnitude : magnitude;
}

export const INT32_MAX = 2 ** 31 - 1;

/** The quantity as a JS number when it is an integer within int32, else undefined. */
export function int32Quantity(value: unknown): number | undefined {
  const integer = integerQuantity(value);
  if (integer === undefined || integer > BigInt(INT32_MAX) || integer < -BigInt(INT32_MAX) - 1n) return undefined;
  return Number(integer);
}
