import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { RequestListener, Server as HttpServer } from 'node:http';

export interface HttpsListenerOptions {
  host: string;
  port: number;
  certPem: string;
  keyPem: string;
  /**
   * Mutual TLS: when set, a client must present a certificate that chains to one of these CAs, or
   * the TLS handshake fails before any HTTP is read. (Who the client is, is the app's to check.)
   */
  clientCaPem?: string;
  /** Idle keep-alive connections live this long (apiserver and kube-scheduler reuse connections). */
  keepAliveTimeoutMs?: number;
  /** A client must send complete headers within this time (slowloris guard). */
  headersTimeoutMs?: number;
}

/**
 * Applies the shared connection timeouts and listens; resolves once bound, rejects on a bind error
 * (port in use, bad address). Used by the TLS listeners and the plain-HTTP metrics listener.
 */
export async function listenWithTimeouts(
  server: HttpServer | Server,
  options: { host: string; port: number; keepAliveTimeoutMs?: number; headersTimeoutMs?: number },
): Promise<void> {
  server.keepAliveTimeout = options.keepAliveTimeoutMs ?? 90_000;
  server.headersTimeout = options.headersTimeoutMs ?? 32_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** A TLS listener whose certificate (and client CAs) can be swapped without a restart (hot reload). */
export class HttpsListener {
  private constructor(readonly server: Server, readonly requiresClientCertificate: boolean) {}

  static async start(app: RequestListener, options: HttpsListenerOptions): Promise<HttpsListener> {
    const clientAuth = options.clientCaPem !== undefined;
    const server = createServer({
      cert: options.certPem,
      key: options.keyPem,
      ...(clientAuth ? { ca: options.clientCaPem, requestCert: true, rejectUnauthorized: true } : {}),
    }, app);
    await listenWithTimeouts(server, options);
    return new HttpsListener(server, clientAuth);
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get listening(): boolean {
    return this.server.listening;
  }

  /**
   * New connections get the new certificate (and, with client authentication, trust the new client
   * CAs); established ones keep theirs until they close.
   */
  updateCertificate(certPem: string, keyPem: string, clientCaPem?: string): void {
    // A context without CAs would refuse every client: a listener that demands client certificates
    // must always be given them.
    if (this.requiresClientCertificate && clientCaPem === undefined) {
      throw new TypeError('this listener requires client certificates: updateCertificate needs the client CAs');
    }
    this.server.setSecureContext({ cert: certPem, key: keyPem, ...(clientCaPem === undefined ? {} : { ca: clientCaPem }) });
  }

  async close(): Promise<void> {
    if (!this.server.listening) return;
    await new Promise<void>((resolve) => {
      this.server.close(() => { resolve(); });
      this.server.closeIdleConnections();
    });
  }
}
