import { expect } from 'chai';
import {
  caBundleOf,
  sameBundle,
  sameMaterial,
  servingMaterialOf,
  type CertBundle,
} from '../../../src/tls/cert-bundle.js';

const pem = (label: string, newline = true) =>
  `-----BEGIN CERTIFICATE-----\n${label}\n-----END CERTIFICATE-----${newline ? '\n' : ''}`;

describe('cert bundle', () => {
  const bundle: CertBundle = { caCertPem: pem('ca'), caKeyPem: 'ca-key', certPem: pem('leaf'), keyPem: 'leaf-key' };

  it('serves the leaf and its key with the CA alone as the caBundle (never the leaf)', () => {
    expect(servingMaterialOf(bundle)).to.deep.equal({
      certPem: pem('leaf'),
      keyPem: 'leaf-key',
      caBundlePem: pem('ca'),
    });
  });

  it('puts the previous CA after the current one while a rotation is under way', () => {
    expect(caBundleOf({ ...bundle, previousCaCertPem: pem('old') })).to.equal(pem('ca') + pem('old'));
  });

  it('separates PEMs that lack a final newline, and ignores an empty previous CA', () => {
    expect(caBundleOf({ ...bundle, caCertPem: pem('ca', false), previousCaCertPem: pem('old', false) })).to.equal(
      pem('ca') + pem('old'),
    );
    expect(caBundleOf({ ...bundle, previousCaCertPem: '' })).to.equal(pem('ca'));
  });

  it('compares bundles and materials field by field, an absent previous CA equal to an empty one', () => {
    expect(sameBundle(bundle, { ...bundle })).to.equal(true);
    expect(sameBundle(bundle, { ...bundle, previousCaCertPem: '' })).to.equal(true);
    expect(sameBundle(bundle, { ...bundle, previousCaCertPem: pem('old') })).to.equal(false);
    expect(sameBundle(bundle, { ...bundle, keyPem: 'other' })).to.equal(false);
    const material = servingMaterialOf(bundle);
    expect(sameMaterial(material, { ...material })).to.equal(true);
    expect(sameMaterial(material, { ...material, caBundlePem: pem('ca') + pem('old') })).to.equal(false);
  });
});
