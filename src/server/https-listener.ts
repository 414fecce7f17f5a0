import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { RequestListener, Server as HttpServer, ServerOptions } from 'node:http';

/**
 * Connection limits shared by the webhook, extender and metrics listeners (ARCHITECTURE §7).
 * kube-apiserver gives the webhook 10 s (timeoutSeconds) and kube-scheduler the extender 30 s
 * (httpTimeout), but both send a whole request at once on a fast network: a request still
 * arriving after 15 s is stalled or dribbled on purpose, and holds a connection for nothing.
 */
export interface ListenerLimits {
  /** Idle keep-alive connections live this long (apiserver and kube-scheduler reuse connections). */
  keepAliveTimeoutMs?: number;
  /** A client must send complete headers within this time (slowloris guard). */
  headersTimeoutMs?: number;
  /** ...and the whole request, body included, within this time. Answering may take longer (bind). */
  requestTimeoutMs?: number;
  /** How often the two timeouts above are checked; a request is cut at most this late. */
  timeoutCheckIntervalMs?: number;
  /** A TLS handshake (or a connection that never starts one) is cut after this time. */
  handshakeTimeoutMs?: number;
  /** Connections open at once, idle ones included; more are closed as they arrive. */
  maxConnections?: number;
}

export const LISTENER_DEFAULTS: Readonly<Required<ListenerLimits>> = Object.freeze({
  keepAliveTimeoutMs: 90_000,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 15_000,
  timeoutCheckIntervalMs: 1000,
  handshakeTimeoutMs: 10_000,
  // kube-apiserver opens a connection per concurrent review and kube-scheduler one per concurrent
  // bind (each may wait up to BIND_TIMEOUT): hundreds at the most in a large cluster. 512 keeps
  // memory bounded (each connection may hold a body up to the limit while it is read).
  maxConnections: 512,
});

/** The defaults, overridden by every limit that is set (an explicit undefined keeps the default). */
function mergeLimits(limits: ListenerLimits): Required<ListenerLimits> {
  const merged = { ...LISTENER_DEFAULTS };
  for (const key of Object.keys(merged) as (keyof ListenerLimits)[]) {
    const value = limits[key];
    if (value !== undefined) merged[key] = value;
  }
  return merged;
}

/** Node's server options for these limits (the timeout checker is set up when listening starts). */
export function serverOptions(limits: ListenerLimits = {}): ServerOptions & { handshakeTimeout: number } {
  const merged = mergeLimits(limits);
  return {
    keepAliveTimeout: merged.keepAliveTimeoutMs,
    // Node requires headersTimeout <= requestTimeout.
    headersTimeout: Math.min(merged.headersTimeoutMs, merged.requestTimeoutMs),
    requestTimeout: merged.requestTimeoutMs,
    connectionsCheckingInterval: merged.timeoutCheckIntervalMs,
    handshakeTimeout: merged.handshakeTimeoutMs,
  };
}

export interface HttpsListenerOptions extends ListenerLimits {
  host: string;
  port: number;
  certPem: string;
  keyPem: string;
  /**
   * Mutual TLS: when set, a client must present a certificate that chains to one of these CAs, or
   * the TLS handshake fails before any HTTP is read. (Who the client is, is the app's to check.)
   */
  clientCaPem?: string;
}

/**
 * Applies the connection limits and listens; resolves once bound, rejects on a bind error (port in
 * use, bad address). The server must have been created with serverOptions(limits). Used by the
 * TLS listeners and the plain-HTTP metrics listener.
 */
export async function listenWithLimits(
  server: HttpServer | Server,
  options: { host: string; port: number } & ListenerLimits,
): Promise<void> {
  const merged = mergeLimits(options);
  // Set again: keepAliveTimeout is not a constructor option on every Node version.
  server.keepAliveTimeout = merged.keepAliveTimeoutMs;
  server.maxConnections = merged.maxConnections;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** How often a closing server looks again for connections that turned idle (a keep-alive between requests). */
const IDLE_SWEEP_MS = 100;

/**
 * Stops accepting connections at once, closes idle ones (also those that turn idle after their
 * answer), lets requests in progress finish, and after `forceAfterMs` cuts whatever is still open.
 * Resolves once the server has closed. Shared by the TLS listeners and the metrics listener.
 */
export async function closeServer(server: HttpServer | Server, forceAfterMs: number): Promise<void> {
  if (!server.listening) return;
  await new Promise<void>((resolve) => {
    const sweep = setInterval(() => {
      server.closeIdleConnections();
    }, IDLE_SWEEP_MS);
    const force = setTimeout(
      () => {
        server.closeAllConnections();
      },
      Math.max(0, forceAfterMs),
    );
    server.close(() => {
      clearInterval(sweep);
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
}

/** Requests in progress get this long to finish when a listener closes without a bound of its own. */
export const DEFAULT_CLOSE_GRACE_MS = 25_000;

/** A TLS listener whose certificate (and client CAs) can be swapped without a restart (hot reload). */
export class HttpsListener {
  private constructor(
    readonly server: Server,
    readonly requiresClientCertificate: boolean,
  ) {}

  static async start(app: RequestListener, options: HttpsListenerOptions): Promise<HttpsListener> {
    const clientAuth = options.clientCaPem !== undefined;
    const server = createServer(
      {
        ...serverOptions(options),
        cert: options.certPem,
        key: options.keyPem,
        ...(clientAuth ? { ca: options.clientCaPem, requestCert: true, rejectUnauthorized: true } : {}),
      },
      app,
    );
    await listenWithLimits(server, options);
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
    this.server.setSecureContext({
      cert: certPem,
      key: keyPem,
      ...(clientCaPem === undefined ? {} : { ca: clientCaPem }),
    });
  }

  /** Stops accepting, lets requests in progress finish for up to `forceAfterMs`, then cuts them. */
  async close(forceAfterMs: number = DEFAULT_CLOSE_GRACE_MS): Promise<void> {
    await closeServer(this.server, forceAfterMs);
  }
}
