import { KubeConfig } from '@kubernetes/client-node';
import { expect } from 'chai';
import { renderKubeconfig } from '../../../src/local/kubeconfig.js';

describe('kubeconfig', () => {
  it('renders a kubeconfig that client-node loads with server, CA and token', () => {
    const text = renderKubeconfig({
      clusterName: 'c',
      server: 'https://127.0.0.1:6443',
      caPem: 'PEM',
      userName: 'u',
      token: 'secret',
    });
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromString(text);
    expect(kubeConfig.getCurrentCluster()?.server).to.equal('https://127.0.0.1:6443');
    expect(Buffer.from(kubeConfig.getCurrentCluster()?.caData ?? '', 'base64').toString()).to.equal('PEM');
    expect(kubeConfig.getCurrentUser()?.token).to.equal('secret');
  });
});
