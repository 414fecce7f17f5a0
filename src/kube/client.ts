import { KubeConfig } from '@kubernetes/client-node';

/**
 * Builds the KubeConfig every component gets injected: an explicit kubeconfig file when given,
 * otherwise the in-cluster service account, otherwise ~/.kube/config (client-node's default order).
 */
export function loadKubeConfig(kubeconfigPath: string | undefined): KubeConfig {
  const kubeConfig = new KubeConfig();
  if (kubeconfigPath !== undefined) kubeConfig.loadFromFile(kubeconfigPath);
  else kubeConfig.loadFromDefault();
  return kubeConfig;
}
