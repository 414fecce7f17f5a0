import { request } from 'node:https';
import { networkInterfaces } from 'node:os';

export interface ClientCredentials {
  certPem: string;
  keyPem: string;
}

export type MtlsAnswer = { status: number; body: string } | { refused: string };

/**
 * One HTTPS POST (or GET without a body) on a fresh connection, presenting `client` if given and
 * trusting `caPem`. A TLS-level refusal (no certificate, wrong CA, wrong purpose) resolves as
 * `refused` with the error, so tests can tell it from an HTTP answer.
 */
export function mtlsRequest(options: {
  host: string;
  port: number;
  path: string;
  caPem: string;
  client?: ClientCredentials;
  body?: string;
  servername?: string;
}): Promise<MtlsAnswer> {
  return new Promise((done) => {
    const req = request(
      {
        host: options.host,
        port: options.port,
        path: options.path,
        method: options.body === undefined ? 'GET' : 'POST',
        ca: options.caPem,
        agent: false,
        ...(options.servername === undefined ? {} : { servername: options.servername }),
        ...(options.client ? { cert: options.client.certPem, key: options.client.keyPem } : {}),
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => {
          body += chunk.toString();
        });
        res.on('end', () => {
          done({ status: res.statusCode ?? 0, body });
        });
        res.on('error', (error) => {
          done({ refused: error.message });
        });
      },
    );
    req.on('error', (error: NodeJS.ErrnoException) => {
      done({ refused: `${error.code ?? ''} ${error.message}`.trim() });
    });
    req.end(options.body);
  });
}

/**
 * This machine's first non-loopback IPv4 address, to reach a listener bound to 0.0.0.0 the way
 * another host would; 127.0.0.1 when there is none (the TLS checks are the same).
 */
export function nonLoopbackAddress(): string {
  const found = Object.values(networkInterfaces())
    .flat()
    .find((entry) => entry !== undefined && entry.family === 'IPv4' && !entry.internal);
  return found?.address ?? '127.0.0.1';
}
