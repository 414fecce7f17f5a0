/**
 * What a MutatingWebhookConfiguration looks like to the caBundle watch: the typed objects of a LIST
 * and the raw JSON of watch events both fit it (caBundle is base64 in both).
 */
export interface WebhookConfigurationView {
  metadata?: { name?: string; resourceVersion?: string };
  webhooks?: { name: string; clientConfig?: { caBundle?: string } }[];
}

/** The caBundle field's value for a PEM bundle: the PEM text, base64-encoded. */
export function caBundleFieldOf(caBundlePem: string): string {
  return Buffer.from(caBundlePem, 'utf8').toString('base64');
}

/**
 * The webhooks of `configuration` whose caBundle is not `wantedPem` (missing or empty counts as
 * different), in order. Empty when every webhook has it: nothing to re-inject.
 */
export function driftedWebhooks(configuration: WebhookConfigurationView, wantedPem: string): string[] {
  const wanted = caBundleFieldOf(wantedPem);
  return (configuration.webhooks ?? [])
    .filter((webhook) => (webhook.clientConfig?.caBundle ?? '') !== wanted)
    .map((webhook) => webhook.name);
}
