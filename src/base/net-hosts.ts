import { isIP } from 'node:net';

/**
 * Whether a listen address reaches this machine only: `localhost`, 127.0.0.0/8, ::1 and
 * IPv4-mapped 127.x (brackets around IPv6 allowed). Every other address, including 0.0.0.0, ::
 * and any other host name, may be reachable from the network.
 */
export function isLoopbackHost(host: string): boolean {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const lowered = bare.toLowerCase();
  if (lowered === 'localhost') return true;
  if (isIP(lowered) === 4) return lowered.split('.')[0] === '127';
  if (isIP(lowered) !== 6) return false;
  // The URL parser writes IPv6 in one canonical form: ::1, and ::ffff:7f00:1 for ::ffff:127.0.0.1.
  const canonical = new URL(`http://[${lowered}]/`).hostname.slice(1, -1);
  if (canonical === '::1') return true;
  const mapped = /^::ffff:([0-9a-f]{1,4}):[0-9a-f]{1,4}$/.exec(canonical);
  return mapped !== null && (Number.parseInt(mapped[1] ?? '', 16) >> 8) === 127;
}
