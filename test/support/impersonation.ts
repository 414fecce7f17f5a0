import type { KubeConfig, RequestContext } from '@kubernetes/client-node';
import { PooledKubeConfig } from '../../src/kube/client.js';

/** The Impersonate-Group header, which client-node's kubeconfig `as` support does not send. */
class ImpersonatingKubeConfig extends PooledKubeConfig {
  constructor(private readonly group: string | undefined) {
    super();
  }

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    if (this.group !== undefined) context.setHeaderParam('Impersonate-Group', this.group);
  }
}

/**
 * The admin credentials of `admin`, acting as `user` (Impersonate-User). kube-apiserver gives an
 * impersonated ServiceAccount name (`system:serviceaccount:<ns>:<name>`) its groups
 * (system:serviceaccounts, system:serviceaccounts:<ns>) and everyone system:authenticated, so a
 * ServiceAccount is seen exactly as with its own token. `group` adds one group (e.g. system:nodes);
 * then only that group and system:authenticated are set.
 */
export function impersonating(admin: KubeConfig, user: string, group?: string): KubeConfig {
  const cluster = admin.getCurrentCluster();
  const adminUser = admin.getCurrentUser();
  if (!cluster || !adminUser) throw new Error('the admin kubeconfig has no current cluster or user');
  const config = new ImpersonatingKubeConfig(group);
  config.loadFromOptions({
    clusters: [cluster],
    users: [{ ...adminUser, name: 'impersonator', impersonateUser: user }],
    contexts: [{ name: 'impersonated', cluster: cluster.name, user: 'impersonator' }],
    currentContext: 'impersonated',
  });
  return config;
}
