/**
 * resourceVersion comparisons. Opaque by the API contract; every etcd-backed apiserver hands out
 * increasing integers from one counter shared by all resources, and anything else compares as
 * "no" so that no shortcut is ever taken on versions we cannot read.
 */

/** Is resourceVersion `candidate` newer than `current`? */
export function isNewerVersion(candidate: string | undefined, current: string | undefined): boolean {
  if (candidate === undefined || current === undefined || !/^\d+$/.test(candidate) || !/^\d+$/.test(current))
    return false;
  return BigInt(candidate) > BigInt(current);
}

/** Is resourceVersion `candidate` at least `floor`? */
export function isAtLeastVersion(candidate: string | undefined, floor: string | undefined): boolean {
  if (candidate === undefined || floor === undefined || !/^\d+$/.test(candidate) || !/^\d+$/.test(floor)) return false;
  return BigInt(candidate) >= BigInt(floor);
}
