import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  loadYaml,
  PatchStrategy,
  setHeaderOptions,
  type V1MutatingWebhookConfiguration,
} from '@kubernetes/client-node';
import type { RunningServer } from '../../src/serve/start-server.js';
import { loadKubeConfig } from '../../src/kube/client.js';
import type { ControlPlane } from '../../src/local/control-plane.js';
import { eventually, notYet, uniqueName } from './test-cluster.js';

/**
 * Registers manifests/webhook.yaml against a test server's webhook (url + caBundle, failurePolicy
 * Fail) for `namespace` only (labelled with a fresh selector), and waits until the apiserver calls
 * it; returns a function removing it.
 */
export async function registerFixtureWebhook(
  plane: ControlPlane,
  server: RunningServer | undefined,
  namespace: string,
): Promise<() => Promise<void>> {
  const kubeConfig = loadKubeConfig(plane.kubeconfigPath);
  const admission = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const label = uniqueName('wh');
  const name = `fixture-${label}`;
  const shipped = loadYaml<V1MutatingWebhookConfiguration>(
    readFileSync(resolve(import.meta.dirname, '..', '..', 'manifests', 'webhook.yaml'), 'utf8'),
  );
  const caPem = server?.keeper.current()?.caBundlePem ?? '';
  await admission.createMutatingWebhookConfiguration({
    body: {
      metadata: { name },
      webhooks: (shipped.webhooks ?? []).map((webhook) => ({
        ...webhook,
        failurePolicy: 'Fail',
        clientConfig: {
          url: `https://127.0.0.1:${server?.webhook.port ?? 0}/mutate`,
          caBundle: Buffer.from(caPem).toString('base64'),
        },
        namespaceSelector: { matchLabels: { 'vgpu-warden.test/fixture-webhook': label } },
      })),
    },
  });
  await core.patchNamespace(
    { name: namespace, body: { metadata: { labels: { 'vgpu-warden.test/fixture-webhook': label } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  const probe = {
    metadata: { name: 'probe' },
    spec: { containers: [{ name: 'c', image: 'x', resources: { limits: { 'nvidia.com/gpu': '1' } } }] },
  };
  await eventually(
    'the apiserver to call the fixture webhook',
    async () => {
      const created = await core.createNamespacedPod({ namespace, body: probe, dryRun: 'All' });
      return created.spec?.schedulerName === 'hami-scheduler'
        ? true
        : notYet(
            `a dry-run pod with schedulerName ${created.spec?.schedulerName ?? 'unset'} (the webhook not called yet)`,
          );
    },
    20_000,
    200,
  );
  return async () => {
    await admission.deleteMutatingWebhookConfiguration({ name }).catch(() => undefined);
  };
}
