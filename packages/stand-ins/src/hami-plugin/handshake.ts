/**
 * The node handshake of HAMi's NVIDIA device plugin, from the wire contract (§4.2), sharing no code
 * with src/. Plugins up to v2.7 patch `hami.io/node-handshake: Reported <Go time.String()>` with
 * their inventory every 30 s; v2.8 and later never write it (kubelet's allocatable nvidia.com/gpu is
 * their liveness signal). HAMi's scheduler writes `Requesting_<YYYY-MM-DD HH:MM:SS>` in its own
 * local time. Pure formatters, for tests that play either side.
 */
export const NODE_HANDSHAKE = 'hami.io/node-handshake';

const two = (value: number): string => String(value).padStart(2, '0');

/** Go's `time.Now().String()` for a UTC clock: `2024-01-23 04:30:04.434037031 +0000 UTC m=+<monotonic>`. */
export function goTimeString(at: Date, monotonicSeconds = 1104711.777756895): string {
  const date = `${at.getUTCFullYear()}-${two(at.getUTCMonth() + 1)}-${two(at.getUTCDate())}`;
  const time = `${two(at.getUTCHours())}:${two(at.getUTCMinutes())}:${two(at.getUTCSeconds())}`;
  const nanos = `${String(at.getUTCMilliseconds()).padStart(3, '0')}000000`;
  return `${date} ${time}.${nanos} +0000 UTC m=+${monotonicSeconds.toFixed(9)}`;
}

/** What a v2.7 plugin writes on each registration. */
export function reportedHandshake(at: Date): string {
  return `Reported ${goTimeString(at)}`;
}

/** What HAMi's scheduler writes: Go's time.DateTime layout in the scheduler's local time. */
export function requestingHandshake(at: Date): string {
  const date = `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())}`;
  return `Requesting_${date} ${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}`;
}
