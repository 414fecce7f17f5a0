import { HttpMethod, RequestContext } from '@kubernetes/client-node';
import { expect } from 'chai';
import { PooledKubeConfig } from '../../../src/kube/client.js';
import { createCertificateAuthority } from '../../../src/tls/certificates.js';

function configFor(caPem: string): PooledKubeConfig {
  const kubeConfig = new PooledKubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [
      {
        name: 'c',
        server: 'https://127.0.0.1:6443',
        caData: Buffer.from(caPem).toString('base64'),
        skipTLSVerify: false,
      },
    ],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return kubeConfig;
}

async function dispatcherOf(kubeConfig: PooledKubeConfig): Promise<unknown> {
  const context = new RequestContext('https://127.0.0.1:6443/api/v1/nodes', HttpMethod.GET);
  await kubeConfig.applySecurityAuthentication(context);
  return context.getDispatcher();
}

describe('PooledKubeConfig', () => {
  const ca = createCertificateAuthority({ commonName: 'pool-test', validityDays: 1 });

  it('reuses one dispatcher (one set of kept-alive connections) across requests', async () => {
    const kubeConfig = configFor(ca.certPem);
    const first = await dispatcherOf(kubeConfig);
    expect(first).to.not.equal(undefined);
    expect(await dispatcherOf(kubeConfig)).to.equal(first);
    await kubeConfig.close();
  });

  it('starts a new dispatcher when the TLS identity changes', async () => {
    const kubeConfig = configFor(ca.certPem);
    const first = await dispatcherOf(kubeConfig);
    const other = createCertificateAuthority({ commonName: 'pool-test-2', validityDays: 1 });
    kubeConfig.clusters[0] = { ...kubeConfig.clusters[0]!, caData: Buffer.from(other.certPem).toString('base64') };
    expect(await dispatcherOf(kubeConfig)).to.not.equal(first);
    await kubeConfig.close();
  });

  it('still applies the bearer token to every request', async () => {
    const context = new RequestContext('https://127.0.0.1:6443/api', HttpMethod.GET);
    await configFor(ca.certPem).applySecurityAuthentication(context);
    expect(context.getHeaders().Authorization).to.equal('Bearer t');
  });
});
