/**
 * A kubeconfig for one cluster and one bearer-token user. JSON is valid YAML, so the same text
 * serves kubectl, kube-scheduler and @kubernetes/client-node.
 */
export interface KubeconfigParams {
  clusterName: string;
  server: string;
  caPem: string;
  userName: string;
  token: string;
}

export function buildKubeconfig(params: KubeconfigParams): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: params.clusterName,
        cluster: { server: params.server, 'certificate-authority-data': Buffer.from(params.caPem).toString('base64') },
      },
    ],
    users: [{ name: params.userName, user: { token: params.token } }],
    contexts: [{ name: params.clusterName, context: { cluster: params.clusterName, user: params.userName } }],
    'current-context': params.clusterName,
  };
}

export function renderKubeconfig(params: KubeconfigParams): string {
  return JSON.stringify(buildKubeconfig(params), null, 2) + '\n';
}
