import { isDnsLabel } from '../base/k8s-names.js';
import { canonicalHostOrUndefined } from '../base/net-hosts.js';
import { ServingNameError } from './tls-errors.js';

export interface ServingNamesRequest {
  serviceName: string;
  namespace: string;
  /** Extra DNS names or IP addresses (e.g. a node IP, an ingress host); `*.` wildcards are allowed. */
  extraHosts: readonly string[];
}

function checkLabel(what: string, value: string): void {
  if (!isDnsLabel(value)) {
    throw new ServingNameError(
      `invalid ${what} ${JSON.stringify(value)}: expected a DNS-1123 label such as vgpu-warden`,
    );
  }
}

function checkedHost(raw: string): string {
  const host = canonicalHostOrUndefined(raw);
  if (host === undefined)
    throw new ServingNameError(`invalid host ${JSON.stringify(raw)}: expected a DNS name or an IP address`);
  return host;
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
