import { createServer } from 'node:net';
import { expect } from 'chai';
import { StartupError } from '../../../src/lifecycle/lifecycle.js';
import { hostPort, listenFailure } from '../../../src/lifecycle/listen-failure.js';
import { HttpsListener } from '../../../src/server/https-listener.js';
import { createCertificateAuthority, issueCertificate } from '../../../src/tls/certificates.js';

const extender = {
  role: 'the extender',
  host: '127.0.0.1',
  port: 9444,
  hostSetting: 'EXTENDER_HOST',
  portSetting: 'EXTENDER_PORT',
};

describe('listenFailure (the one line for a listener that cannot bind)', () => {
  it('names the address, the listener and the port setting for a taken port (a real EADDRINUSE)', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => {
      holder.listen(0, '127.0.0.1', resolve);
    });
    const port = (holder.address() as { port: number }).port;
    const ca = createCertificateAuthority({ commonName: 'test ca', validityDays: 1 });
    const leaf = issueCertificate(ca, {
      commonName: 'localhost',
      subjectAltNames: ['localhost'],
      usage: 'server',
      validityDays: 1,
    });
    try {
      const error = await HttpsListener.start(() => undefined, {
        host: '127.0.0.1',
        port,
        certPem: leaf.certPem,
        keyPem: leaf.keyPem,
      }).catch((caught: unknown) => caught);
      const failure = listenFailure({ ...extender, port }, error);
      expect(failure).to.be.instanceOf(StartupError);
      expect(failure.message).to.equal(
        `cannot listen on 127.0.0.1:${port} for the extender (EXTENDER_PORT): address already in use`,
      );
      expect(failure.cause).to.equal(error);
    } finally {
      holder.close();
    }
  });

  it('blames the host setting for an address this machine does not have, and both for anything else', () => {
    const notHere = Object.assign(new Error('listen EADDRNOTAVAIL: address not available 10.9.9.9:9444'), {
      code: 'EADDRNOTAVAIL',
    });
    expect(listenFailure({ ...extender, host: '10.9.9.9' }, notHere).message).to.equal(
      'cannot listen on 10.9.9.9:9444 for the extender (EXTENDER_HOST): no such address on this host',
    );
    const odd = new Error('something\nelse');
    expect(listenFailure(extender, odd).message).to.equal(
      'cannot listen on 127.0.0.1:9444 for the extender (EXTENDER_HOST, EXTENDER_PORT): something',
    );
  });

  it('writes IPv6 hosts in brackets and clips a host too long to be real', () => {
    expect(hostPort('::1', 9443)).to.equal('[::1]:9443');
    expect(hostPort('h'.repeat(10_000), 1).length).to.be.below(140);
  });
});
