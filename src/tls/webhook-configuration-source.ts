import { Watch, type AdmissionregistrationV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { ListWatchSource } from '../cluster/reflector.js';
import { withSignal } from '../kube/call-options.js';
import { kubeListWatchSource, type Watcher } from '../cluster/kube-list-watch.js';
import { pageQuery } from '../cluster/paged-list.js';
import type { WebhookConfigurationView } from './ca-bundle-drift.js';

const PATH = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations';

/**
 * LIST and WATCH of one MutatingWebhookConfiguration, selected with the field selector
 * `metadata.name=<name>`. kube-apiserver authorizes such a list or watch as one on that name, so
 * RBAC can grant them with `resourceNames` (manifests/rbac.yaml): nothing else is readable.
 */
export function webhookConfigurationSource(
  kubeConfig: KubeConfig,
  api: AdmissionregistrationV1Api,
  name: string,
  watcher: Watcher = new Watch(kubeConfig),
): ListWatchSource<WebhookConfigurationView> {
  const fieldSelector = `metadata.name=${name}`;
  const selecting: Watcher = {
    watch: (path, query, onObject, onDone) => watcher.watch(path, { ...query, fieldSelector }, onObject, onDone),
  };
  return kubeListWatchSource<WebhookConfigurationView>(
    kubeConfig,
    PATH,
    (page, signal) => api.listMutatingWebhookConfiguration({ fieldSelector, ...pageQuery(page) }, withSignal(signal)),
    { watcher: selecting },
  );
}
