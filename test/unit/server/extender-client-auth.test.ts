import { expect } from 'chai';
import type { BindingArgs } from '../../../src/extender/protocol.js';
import type { TLSSocket } from 'node:tls';
import { clientIdentityProblem, requireClientIdentity } from '../../../src/server/client-identity.js';
import { createExtenderApp } from '../../../src/server/extender-app.js';
import { HttpsListener } from '../../../src/server/https-listener.js';
import {
  createCertificateAuthority,
  issueCertificate,
  type CertificateAuthority,
} from '../../../src/tls/certificates.js';
import { CLIENT_AUTH_OID, SCHEDULER_CLIENT_COMMON_NAME, SERVER_AUTH_OID } from '../../../src/tls/client-cert-policy.js';
import { mtlsRequest, type ClientCredentials, type MtlsAnswer } from '../../support/mtls-request.js';

const bindBody = JSON.stringify({ PodName: 'p', PodNamespace: 'ns', PodUID: 'u', Node: 'n1' });

describe('extender listener with client authentication (mutual TLS)', function () {
  this.timeout(30_000);
  let ca: CertificateAuthority;
  let serving: ClientCredentials;
  let scheduler: ClientCredentials;
  let listener: HttpsListener;
  const bound: BindingArgs[] = [];
  const refusals: string[] = [];

  before(async () => {
    ca = createCertificateAuthority({ commonName: 'vgpu-warden-ca test', validityDays: 30 });
    serving = issueCertificate(ca, {
      commonName: 'vgpu-warden',
      subjectAltNames: ['127.0.0.1'],
      usage: 'server',
      validityDays: 30,
    });
    scheduler = issueCertificate(ca, { commonName: SCHEDULER_CLIENT_COMMON_NAME, usage: 'client', validityDays: 30 });
    const app = createExtenderApp({
      handlers: {
        filter: () => Promise.reject(new Error('not in this test')),
        prioritize: () => Promise.reject(new Error('not in this test')),
        bind: (args) => {
          bound.push(args);
          return Promise.resolve({ Error: '' });
        },
      },
      readiness: () => ({ ready: true, reasons: [] }),
      guard: requireClientIdentity({ commonName: SCHEDULER_CLIENT_COMMON_NAME }, (problem) => refusals.push(problem)),
    });
    listener = await HttpsListener.start(app, {
      host: '127.0.0.1',
      port: 0,
      certPem: serving.certPem,
      keyPem: serving.keyPem,
      clientCaPem: ca.certPem,
    });
  });
  after(async () => {
    await listener.close();
  });
  beforeEach(() => {
    bound.length = 0;
    refusals.length = 0;
  });

  const bind = (client: ClientCredentials | undefined): Promise<MtlsAnswer> =>
    mtlsRequest({
      host: '127.0.0.1',
      port: listener.port,
      path: '/bind',
      caPem: ca.certPem,
      body: bindBody,
      ...(client ? { client } : {}),
    });

  it('binds for the client certificate vgpu-warden issued to kube-scheduler', async () => {
    expect(await bind(scheduler)).to.deep.equal({ status: 200, body: '{"Error":""}' });
    expect(bound.map((args) => args.podName)).to.deep.equal(['p']);
  });

  it('refuses a connection without a client certificate at TLS, before any HTTP', async () => {
    const answer = await bind(undefined);
    expect(answer)
      .to.have.property('refused')
      .that.matches(/certificate required|ECONNRESET|socket hang up/i);
    expect(bound).to.deep.equal([]);
  });

  it('refuses a certificate from another CA at TLS, even with the right CN and purpose', async () => {
    const foreignCa = createCertificateAuthority({ commonName: 'someone else', validityDays: 30 });
    const forged = issueCertificate(foreignCa, {
      commonName: SCHEDULER_CLIENT_COMMON_NAME,
      usage: 'client',
      validityDays: 30,
    });
    expect(await bind(forged)).to.have.property('refused');
    expect(bound).to.deep.equal([]);
  });

  it('refuses our own serving certificate replayed as a client certificate (same CA, serverAuth only)', async () => {
    const answer = await bind(serving);
    // OpenSSL already refuses its purpose at TLS; were it let through, the app answers 403.
    if ('status' in answer) expect(answer.status).to.equal(403);
    else expect(answer.refused).to.match(/unsupported certificate|certificate|ECONNRESET|socket hang up/i);
    expect(bound).to.deep.equal([]);
  });

  it('answers 403 to a client certificate of our CA with another CN, and never reaches bind', async () => {
    const other = issueCertificate(ca, { commonName: 'not-the-scheduler', usage: 'client', validityDays: 30 });
    const answer = await bind(other);
    expect(answer).to.deep.include({ status: 403 });
    expect((answer as { body: string }).body).to.equal(
      'client certificate refused: CN not-the-scheduler is not vgpu-warden-scheduler',
    );
    expect(refusals).to.deep.equal(['CN not-the-scheduler is not vgpu-warden-scheduler']);
    expect(bound).to.deep.equal([]);
  });

  it('guards the health endpoints too', async () => {
    expect(
      await mtlsRequest({ host: '127.0.0.1', port: listener.port, path: '/readyz', caPem: ca.certPem }),
    ).to.have.property('refused');
    expect(
      await mtlsRequest({
        host: '127.0.0.1',
        port: listener.port,
        path: '/readyz',
        caPem: ca.certPem,
        client: scheduler,
      }),
    ).to.deep.equal({ status: 200, body: 'ok' });
  });

  it('follows a CA rotation: trusts the CAs it is given, without a restart', async () => {
    const newCa = createCertificateAuthority({ commonName: 'vgpu-warden-ca rotated', validityDays: 30 });
    const newServing = issueCertificate(newCa, {
      commonName: 'vgpu-warden',
      subjectAltNames: ['127.0.0.1'],
      usage: 'server',
      validityDays: 30,
    });
    const newScheduler = issueCertificate(newCa, {
      commonName: SCHEDULER_CLIENT_COMMON_NAME,
      usage: 'client',
      validityDays: 30,
    });
    const both = `${newCa.certPem}${ca.certPem}`;
    try {
      listener.updateCertificate(newServing.certPem, newServing.keyPem, both);
      for (const client of [scheduler, newScheduler]) {
        expect(
          await mtlsRequest({
            host: '127.0.0.1',
            port: listener.port,
            path: '/bind',
            caPem: both,
            body: bindBody,
            client,
          }),
        ).to.deep.include({ status: 200 });
      }
      listener.updateCertificate(newServing.certPem, newServing.keyPem, newCa.certPem);
      expect(
        await mtlsRequest({
          host: '127.0.0.1',
          port: listener.port,
          path: '/bind',
          caPem: both,
          body: bindBody,
          client: scheduler,
        }),
      ).to.have.property('refused');
      expect(bound).to.have.length(2);
      expect(() => {
        listener.updateCertificate(newServing.certPem, newServing.keyPem);
      }).to.throw(TypeError, 'needs the client CAs');
    } finally {
      listener.updateCertificate(serving.certPem, serving.keyPem, ca.certPem);
    }
  });
});

describe('clientIdentityProblem (the check behind the TLS layer)', () => {
  /** What a TLS socket reports once OpenSSL has verified the chain. */
  const socket = (authorized: boolean, cert: Record<string, unknown>) =>
    ({
      authorized,
      authorizationError: authorized ? null : 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
      getPeerCertificate: () => cert,
    }) as unknown as TLSSocket;
  const rule = { commonName: SCHEDULER_CLIENT_COMMON_NAME };

  it('accepts only a verified certificate for client authentication with the expected CN', () => {
    expect(
      clientIdentityProblem(
        socket(true, { subject: { CN: 'vgpu-warden-scheduler' }, ext_key_usage: [CLIENT_AUTH_OID] }),
        rule,
      ),
    ).to.equal(undefined);
    expect(clientIdentityProblem(socket(false, {}), rule)).to.equal(
      'no verified client certificate (UNABLE_TO_VERIFY_LEAF_SIGNATURE)',
    );
    expect(clientIdentityProblem(socket(true, {}), rule)).to.equal('no client certificate presented');
    // Even if the TLS layer let a serving certificate of our CA through, its purpose gives it away.
    expect(
      clientIdentityProblem(
        socket(true, { subject: { CN: 'vgpu-warden-scheduler' }, ext_key_usage: [SERVER_AUTH_OID] }),
        rule,
      ),
    ).to.equal('the certificate of CN vgpu-warden-scheduler is not for client authentication');
    expect(clientIdentityProblem(socket(true, { subject: { CN: 'vgpu-warden-scheduler' } }), rule)).to.include(
      'not for client authentication',
    );
    expect(
      clientIdentityProblem(
        socket(true, { subject: { CN: ['a', 'vgpu-warden-scheduler'] }, ext_key_usage: [CLIENT_AUTH_OID] }),
        rule,
      ),
    ).to.equal('CN ["a","vgpu-warden-scheduler"] is not vgpu-warden-scheduler');
    expect(clientIdentityProblem(socket(true, { subject: {}, ext_key_usage: [CLIENT_AUTH_OID] }), rule)).to.equal(
      'CN null is not vgpu-warden-scheduler',
    );
  });
});
