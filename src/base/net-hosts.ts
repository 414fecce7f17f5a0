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
  return mapped !== null && Number.parseInt(mapped[1] ?? '', 16) >> 8 === 127;
}

const WILDCARD_HOSTS = new Set(['', '0.0.0.0', '::', '::0']);
const LOCALHOST_ADDRESSES = new Set(['localhost', '127.0.0.1', '::1']);

/**
 * Whether two listen addresses can collide on one port. Conservative: a wildcard collides with
 * everything (on Linux `::` is dual-stack), `localhost` with what it resolves to.
 */
export function listenAddressesOverlap(a: string, b: string): boolean {
  const bare = (host: string) => (host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host).toLowerCase();
  const [x, y] = [bare(a), bare(b)];
  if (x === y || WILDCARD_HOSTS.has(x) || WILDCARD_HOSTS.has(y)) return true;
  return (x === 'localhost' && LOCALHOST_ADDRESSES.has(y)) || (y === 'localhost' && LOCALHOST_ADDRESSES.has(x));
}

const DNS_NAME = /^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * One spelling per host, so names from config and names parsed back from a certificate compare
 * equal: DNS names lower-cased (they are case-insensitive), IPv6 in the compressed lower-case form
 * (OpenSSL prints them expanded, "0:0:0:0:0:0:0:1"). IPv4 is left as is: isIP already refuses
 * the ambiguous forms with leading zeros.
 */
export function canonicalHost(host: string): string {
  if (isIP(host) === 6) return new URL(`http://[${host}]/`).hostname.slice(1, -1);
  return isIP(host) === 4 ? host : host.toLowerCase();
}

/**
 * A certificate host (a DNS name, `*.` wildcards allowed, or an IP address) in its canonical
 * spelling, or undefined when it is neither. An all-digit last label is no DNS name but a mistyped
 * IP ("010.0.0.1", "10.0.0.300").
 */
export function canonicalHostOrUndefined(raw: string): string | undefined {
  const host = raw.trim();
  if (isIP(host) !== 0) return canonicalHost(host);
  const lowered = host.toLowerCase();
  if (lowered.length > 253 || !DNS_NAME.test(lowered) || /(^|\.)\d+$/.test(lowered)) return undefined;
  return lowered;
}
