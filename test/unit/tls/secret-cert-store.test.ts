import { expect } from 'chai';
import type { CertBundle } from '../../../src/tls/cert-bundle.js';
import { bundleFromSecretData, secretDataOf } from '../../../src/tls/secret-cert-store.js';

const b64 = (text: string): string => Buffer.from(text).toString('base64');

// The API side of SecretCertStore (create races, resourceVersion conflicts) is proven against a real
// apiserver in test/integration/cert-secret-store.test.ts; this is its pure Secret codec.
describe('SecretCertStore data', () => {
  const bundle: CertBundle = {
    caCertPem: 'ca cert\n',
    caKeyPem: 'ca key\n',
    certPem: 'leaf cert\n',
    keyPem: 'leaf key\n',
  };

  it('writes the kubernetes.io/tls keys plus ca.crt and ca.key, base64-encoded', () => {
    expect(secretDataOf(bundle)).to.deep.equal({
      'tls.crt': b64('leaf cert\n'),
      'tls.key': b64('leaf key\n'),
      'ca.crt': b64('ca cert\n'),
      'ca.key': b64('ca key\n'),
    });
  });

  it('adds ca-previous.crt only while there is a previous CA', () => {
    expect(secretDataOf({ ...bundle, previousCaCertPem: 'old\n' })).to.include({ 'ca-previous.crt': b64('old\n') });
    expect(secretDataOf({ ...bundle, previousCaCertPem: '' })).to.not.have.property('ca-previous.crt');
  });

  it('reads back what it wrote', () => {
    const rotated = { ...bundle, previousCaCertPem: 'old\n' };
    expect(bundleFromSecretData(secretDataOf(rotated))).to.deep.equal(rotated);
    expect(bundleFromSecretData(secretDataOf(bundle))).to.deep.equal(bundle);
  });

  it('reads absent keys as empty, so a placeholder Secret is renewed rather than rejected', () => {
    expect(bundleFromSecretData(undefined)).to.deep.equal({ caCertPem: '', caKeyPem: '', certPem: '', keyPem: '' });
    expect(bundleFromSecretData({ 'tls.crt': '', 'tls.key': b64('k'), other: b64('x') })).to.deep.equal({
      caCertPem: '',
      caKeyPem: '',
      certPem: '',
      keyPem: 'k',
    });
  });
});
