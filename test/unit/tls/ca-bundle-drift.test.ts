import { expect } from 'chai';
import { caBundleFieldOf, driftedWebhooks, type WebhookConfigurationView } from '../../../src/tls/ca-bundle-drift.js';

const OURS = '-----BEGIN CERTIFICATE-----\nours\n-----END CERTIFICATE-----\n';
const OTHER = '-----BEGIN CERTIFICATE-----\nother\n-----END CERTIFICATE-----\n';

const withBundles = (bundles: string[]): WebhookConfigurationView => ({
  webhooks: bundles.map((pem, index) => ({ name: `hook-${index}`, clientConfig: { caBundle: caBundleFieldOf(pem) } })),
});

describe('driftedWebhooks', () => {
  it('names every webhook whose caBundle is missing, empty or another bundle, and none when all carry ours', () => {
    const view: WebhookConfigurationView = {
      webhooks: [
        { name: 'ours', clientConfig: { caBundle: caBundleFieldOf(OURS) } },
        { name: 'missing', clientConfig: {} },
        { name: 'empty', clientConfig: { caBundle: '' } },
        { name: 'other', clientConfig: { caBundle: caBundleFieldOf(OTHER) } },
        { name: 'no-client-config' },
      ],
    };
    expect(driftedWebhooks(view, OURS)).to.deep.equal(['missing', 'empty', 'other', 'no-client-config']);
    expect(driftedWebhooks(withBundles([OURS, OURS]), OURS)).to.deep.equal([]);
    expect(driftedWebhooks({}, OURS)).to.deep.equal([]);
  });

  it('compares the base64 of the PEM text, as the caBundle field holds it', () => {
    expect(caBundleFieldOf(OURS)).to.equal(Buffer.from(OURS).toString('base64'));
    // The same certificate without its trailing newline is another value of the field.
    expect(driftedWebhooks(withBundles([OURS.trimEnd()]), OURS)).to.deep.equal(['hook-0']);
  });
});
