import { once } from 'node:events';
import { createServer } from 'node:http';
import {
  closeServer,
  DEFAULT_CLOSE_GRACE_MS,
  listenWithLimits,
  serverOptions,
  type ListenerLimits,
} from './https-listener.js';
import type { AddressInfo } from 'node:net';
import type { Express, NextFunction, Request, Response } from 'express';
import { describeError } from '../base/errors.js';
import { listenerApp, notFound } from './app-shell.js';
import { RequestBodyError } from './request-body.js';

/** What the metrics listener needs of WardenMetrics. */
export interface MetricsSource {
  readonly contentType: string;
  /** The exposition in pieces; whatever can fail runs before the first piece. */
  exposition(): AsyncIterable<string>;
}

export interface MetricsAppDeps {
  metrics: MetricsSource;
  /** Told when a scrape fails (it is answered 500), for logs. */
  onError?: (message: string) => void;
  /** The process's readiness, answered on GET /readyz like the other listeners (404 without it). */
  readiness?: () => { ready: boolean; reasons: string[] };
}

/**
 * Writes the pieces as the connection takes them (a piece, then wait for 'drain' when the socket
 * buffer is full), so a large exposition is never held whole. A scraper that goes away ends it.
 */
async function streamPieces(
  res: Response,
  first: IteratorResult<string>,
  pieces: AsyncIterator<string>,
): Promise<void> {
  const gone = new AbortController();
  const onClose = () => {
    gone.abort();
  };
  res.once('close', onClose);
  try {
    for (let next = first; next.done !== true; next = await pieces.next()) {
      if (gone.signal.aborted) break;
      if (!res.write(next.value)) await once(res, 'drain', { signal: gone.signal }).catch(() => undefined);
    }
    if (!gone.signal.aborted) res.end();
  } finally {
    res.off('close', onClose);
    await pieces.return?.();
  }
}

/** GET /metrics (Prometheus text exposition), GET /healthz and, given a readiness, GET /readyz; nothing else. */
export function createMetricsApp(deps: MetricsAppDeps): Express {
  // Nothing here reads a body: one declared or compressed is refused before it is sent.
  const app = listenerApp({ bodyLimit: 0, ...(deps.readiness === undefined ? {} : { readiness: deps.readiness }) });
  app.get('/metrics', async (_req: Request, res: Response) => {
    const pieces = deps.metrics.exposition()[Symbol.asyncIterator]();
    let first: IteratorResult<string>;
    try {
      first = await pieces.next();
    } catch (error) {
      const message = describeError(error);
      deps.onError?.(message);
      res.status(500).type('text/plain').send(`could not collect metrics: ${message}`);
      return;
    }
    // res.type() would rewrite the exposition format's content type; set it as prom-client names it.
    res.status(200).setHeader('Content-Type', deps.metrics.contentType);
    try {
      await streamPieces(res, first, pieces);
    } catch (error) {
      // The status is out: a scraper can only be told by a cut answer.
      deps.onError?.(describeError(error));
      res.destroy();
    }
  });
  app.use(notFound);
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    if (error instanceof RequestBodyError) {
      if (!res.headersSent) res.status(error.status).type('text/plain').send(error.message);
      return;
    }
    deps.onError?.(describeError(error));
    if (!res.headersSent) res.status(500).type('text/plain').send('internal error');
  });
  return app;
}

export interface MetricsListenerOptions extends MetricsAppDeps, ListenerLimits {
  host: string;
  /** 0 picks a free port (tests). */
  port: number;
}

/** Prometheus (and a person with curl) keep a connection or two each. */
const METRICS_MAX_CONNECTIONS = 64;

export interface MetricsListener {
  readonly port: number;
  readonly listening: boolean;
  /** Stops accepting; a scrape in progress gets up to `forceAfterMs` to finish. */
  close(forceAfterMs?: number): Promise<void>;
}

/**
 * The metrics listener on plain HTTP: Prometheus scrapes pod IPs without TLS by default, and the
 * exposition holds nothing secret (node names, counts, durations).
 */
export async function startMetricsListener(options: MetricsListenerOptions): Promise<MetricsListener> {
  const limits: ListenerLimits = { ...options, maxConnections: options.maxConnections ?? METRICS_MAX_CONNECTIONS };
  // Same timeouts as the TLS listeners: Prometheus keeps its scrape connections alive.
  const server = createServer(serverOptions(limits), createMetricsApp(options));
  await listenWithLimits(server, { ...limits, host: options.host, port: options.port });
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    get listening() {
      return server.listening;
    },
    close: (forceAfterMs: number = DEFAULT_CLOSE_GRACE_MS) => closeServer(server, forceAfterMs),
  };
}
