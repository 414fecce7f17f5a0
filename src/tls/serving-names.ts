import { isIP } from 'node:net';
import { ServingNameError } from './tls-errors.js';

export interface ServingNamesRequest {
  serviceName: string;
  namespace: string;
  /** Extra DNS names or IP addresses (e.g. a node IP, an ingress host); `*.` wildcards are allowed. */
  extraHosts: readonly string[];
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
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

function checkLabel(what: string, value: string): void {
  if (value.length > 63 || !DNS_LABEL.test(value)) {
    throw new ServingNameError(`invalid ${what} ${JSON.stringify(value)}: expected a DNS-1123 label such as vgpu-warden`);
  }
}

function checkedHost(raw: string): string {
  const host = raw.trim();
  if (isIP(host) !== 0) return canonicalHost(host);
  const lowered = host.toLowerCase();
  // An all-digit last label is no DNS name but a mistyped IP ("010.0.0.1", "10.0.0.300").
  if (lowered.length > 253 || !DNS_NAME.test(lowered) || /(^|\.)\d+$/.test(lowered)) {
    throw new ServingNameError(`invalid host ${JSON.stringify(raw)}: expected a DNS name or an IP address`);
  }
  return lowered;
}

/**
 * The SANs of the webhook's serving certificate: every name the apiserver may use for the Service
 * (it dials `<svc>.<ns>.svc`; the shorter and longer forms cover other clients), loopback for local
 * runs and tests, then the extra hosts. Duplicates are dropped keeping the first, so the order is
 * stable and the result can be compared with a certificate's SANs.
 */
export function servingNames(request: ServingNamesRequest): string[] {
  checkLabel('service name', request.serviceName);
  checkLabel('namespace', request.namespace);
  const service = request.serviceName;
  const names = [
    service,
    `${service}.${request.namespace}`,
    `${service}.${request.namespace}.svc`,
    `${service}.${request.namespace}.svc.cluster.local`,
    'localhost',
    '127.0.0.1',
    ...request.extraHosts.filter((host) => host.trim() !== '').map(checkedHost),
  ];
  return [...new Set(names)];
}
