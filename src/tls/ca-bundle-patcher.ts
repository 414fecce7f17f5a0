import type { AdmissionregistrationV1Api } from '@kubernetes/client-node';
import { apiStatusOf, httpStatusOf, isNotFound } from '../kube/errors.js';
import { caBundleFieldOf } from './ca-bundle-drift.js';
import { CaBundlePatchError } from './tls-errors.js';

export interface CaBundlePatcherOptions {
  api: AdmissionregistrationV1Api;
  /** metadata.name of the MutatingWebhookConfiguration. */
  configurationName: string;
  /** Read-compare-replace rounds before giving up when others keep writing the configuration. */
  attempts?: number;
}

export type CaBundlePatchResult =
  | { outcome: 'updated'; configurationName: string; webhooks: string[]; resourceVersion: string }
  | { outcome: 'unchanged'; configurationName: string; resourceVersion: string }
  | { outcome: 'not-found'; configurationName: string };

/**
 * Keeps `webhooks[*].clientConfig.caBundle` of one MutatingWebhookConfiguration equal to the
 * keeper's caBundle. Writes only when some webhook differs (a steady state costs one GET), with the
 * resourceVersion that was read: a concurrent edit (Helm, another replica) gives 409 and a fresh
 * round. A missing configuration is returned, not thrown: it may not be installed yet, and serving
 * must not depend on it.
 */
export class CaBundlePatcher {
  constructor(private readonly options: CaBundlePatcherOptions) {}

  async apply(caBundlePem: string): Promise<CaBundlePatchResult> {
    const { api, configurationName: name } = this.options;
    const wanted = caBundleFieldOf(caBundlePem);
    const attempts = this.options.attempts ?? 5;
    for (let attempt = 1; ; attempt++) {
      let configuration;
      try {
        configuration = await api.readMutatingWebhookConfiguration({ name });
      } catch (error) {
        if (isNotFound(error)) return { outcome: 'not-found', configurationName: name };
        throw this.failure('read', error);
      }
      const stale = (configuration.webhooks ?? []).filter((webhook) => webhook.clientConfig.caBundle !== wanted);
      const resourceVersion = configuration.metadata?.resourceVersion ?? '';
      if (stale.length === 0) return { outcome: 'unchanged', configurationName: name, resourceVersion };
      for (const webhook of stale) webhook.clientConfig.caBundle = wanted;
      try {
        const updated = await api.replaceMutatingWebhookConfiguration({ name, body: configuration });
        return {
          outcome: 'updated',
          configurationName: name,
          webhooks: stale.map((webhook) => webhook.name),
          resourceVersion: updated.metadata?.resourceVersion ?? '',
        };
      } catch (error) {
        const status = httpStatusOf(error);
        if ((status === 409 || status === 404) && attempt < attempts) continue;
        if (status === 404) return { outcome: 'not-found', configurationName: name };
        throw this.failure('update', error);
      }
    }
  }

  private failure(verb: string, error: unknown): CaBundlePatchError {
    const status = httpStatusOf(error);
    const detail = apiStatusOf(error)?.message ?? (error instanceof Error ? error.message : String(error));
    const http = status === undefined ? '' : ` (HTTP ${status})`;
    return new CaBundlePatchError(
      `cannot ${verb} MutatingWebhookConfiguration ${this.options.configurationName}${http}: ${detail}`,
      { cause: error },
    );
  }
}
