import type { RequestHandler } from 'express';
import type { TLSSocket } from 'node:tls';
import { CLIENT_AUTH_OID } from '../tls/client-cert-policy.js';

export interface ClientIdentityRule {
  /** The only subject CN served, e.g. vgpu-warden-scheduler. */
  commonName: string;
}

/**
 * Why the client certificate on this connection is not the one to serve, or undefined when it is.
 * The TLS layer already checked the chain against our CA; this adds who the client is: a
 * certificate for client authentication (so our own serving certificate, issued by the same CA,
 * cannot be replayed as a client's) with the expected CN.
 */
export function clientIdentityProblem(socket: TLSSocket, rule: ClientIdentityRule): string | undefined {
  if (!socket.authorized) return `no verified client certificate (${String(socket.authorizationError)})`;
  const cert = socket.getPeerCertificate();
  if (Object.keys(cert).length === 0) return 'no client certificate presented';
  // Node gives a repeated attribute as an array, and no key when there is none (its types say string).
  const raw: unknown = cert.subject.CN;
  const commonName = typeof raw === 'string' ? raw : JSON.stringify(raw ?? null);
  const usages = cert.ext_key_usage ?? [];
  if (!usages.includes(CLIENT_AUTH_OID)) return `the certificate of CN ${commonName} is not for client authentication`;
  if (commonName !== rule.commonName) return `CN ${commonName} is not ${rule.commonName}`;
  return undefined;
}

/**
 * Express middleware serving only the client `rule` names: 401 without a verified certificate
 * (possible only when the listener does not demand one at TLS), 403 for another identity. The
 * request goes no further, so no handler ever sees it.
 */
export function requireClientIdentity(rule: ClientIdentityRule, onRefused?: (problem: string) => void): RequestHandler {
  return (req, res, next) => {
    const socket = req.socket as TLSSocket;
    const problem = clientIdentityProblem(socket, rule);
    if (problem === undefined) {
      next();
      return;
    }
    onRefused?.(problem);
    res
      .status(socket.authorized ? 403 : 401)
      .type('text/plain')
      .send(`client certificate refused: ${problem}`);
  };
}
