import { X509Certificate } from 'node:crypto';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createCertificateAuthority, issueCertificate } from '../../../src/tls/certificates.js';
import { httpGet } from '../../support/http-get.js';

describe('tls certificates', () => {
  const ca = createCertificateAuthority({ commonName: 'unit-ca', validityDays: 30 });
  const leaf = issueCertificate(ca, {
    commonName: 'svc.ns.svc',
    subjectAltNames: ['svc', 'svc.ns.svc', 'localhost', '127.0.0.1'],
    usage: 'server',
    validityDays: 30,
  });

  it('makes a CA certificate that is a CA', () => {
    const cert = new X509Certificate(ca.certPem);
    expect(cert.ca).to.equal(true);
    expect(cert.subject).to.include('CN=unit-ca');
  });

  it('issues a leaf signed by the CA with DNS and IP SANs, serverAuth, and not a CA', () => {
    const cert = new X509Certificate(leaf.certPem);
    expect(cert.ca).to.equal(false);
    expect(cert.verify(new X509Certificate(ca.certPem).publicKey)).to.equal(true);
    expect(cert.subjectAltName).to.equal('DNS:svc, DNS:svc.ns.svc, DNS:localhost, IP Address:127.0.0.1');
    expect(cert.keyUsage).to.deep.equal(['1.3.6.1.5.5.7.3.1']);
    expect(cert.checkIP('127.0.0.1')).to.equal('127.0.0.1');
  });

  it('uses positive serial numbers (Go rejects negative ones)', () => {
    for (let i = 0; i < 8; i++) {
      const { certPem } = issueCertificate(ca, { commonName: 'x', usage: 'client', validityDays: 1 });
      const firstByte = parseInt(new X509Certificate(certPem).serialNumber.slice(0, 2), 16);
      expect(firstByte).to.be.lessThan(0x80);
    }
  });

  it('puts clientAuth and the organization into client certificates', () => {
    const client = issueCertificate(ca, {
      commonName: 'admin',
      organization: 'system:masters',
      usage: 'client',
      validityDays: 1,
    });
    const cert = new X509Certificate(client.certPem);
    expect(cert.keyUsage).to.deep.equal(['1.3.6.1.5.5.7.3.2']);
    expect(cert.subject).to.include('O=system:masters');
  });

  it('serves TLS on 127.0.0.1 that a client trusting only the CA accepts', async () => {
    const server = createServer({ cert: leaf.certPem, key: leaf.keyPem }, (_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const { body } = await httpGet(port, '/', { caPem: ca.certPem });
      expect(body).to.equal('ok');
    } finally {
      server.close();
    }
  });
});
