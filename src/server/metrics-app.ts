import { createServer } from 'node:http';
import { listenWithTimeouts } from './https-listener.js';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import { describeError } from '../errors.js';

/** What the metrics listener needs of WardenMetrics. */
export interface MetricsSource {
  readonly contentType: string;
  text(): Promise<string>;
}

export interface MetricsAppDeps {
  metrics: MetricsSource;
  /** Told when a scrape fails (it is answered 500), for logs. */
  onError?: (message: string) => void;
}

/** GET /metrics (Prometheus text exposition) and GET /healthz; nothing else. */
export function createMetricsApp(deps: MetricsAppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.get('/healthz', (_req, res) => { res.type('text/plain').send('ok'); });
  app.get('/metrics', async (_req: Request, res: Response) => {
    let body: string;
    try {
      body = await deps.metrics.text();
    } catch (error) {
      const message = describeError(error);
      deps.onError?.(message);
      res.status(500).type('text/plain').send(`could not collect metrics: ${message}`);
      return;
    }
    // res.type() would rewrite the exposition format's content type; set it as prom-client names it.
    res.status(200).setHeader('Content-Type', deps.metrics.contentType);
    res.send(body);
  });
  app.use((_req, res) => { res.status(404).type('text/plain').send('not found'); });
  app.use((error: { message?: string }, _req: Request, res: Response, _next: NextFunction) => {
    deps.onError?.(error.message ?? 'unknown error');
    if (!res.headersSent) res.status(500).type('text/plain').send('internal error');
  });
  return app;
}

export interface MetricsListenerOptions extends MetricsAppDeps {
  host: string;
  /** 0 picks a free port (tests). */
  port: number;
  keepAliveTimeoutMs?: number;
  headersTimeoutMs?: number;
}

export interface MetricsListener {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * The metrics listener on plain HTTP: Prometheus scrapes pod IPs without TLS by default, and the
 * exposition holds nothing secret (node names, counts, durations).
 */
export async function startMetricsListener(options: MetricsListenerOptions): Promise<MetricsListener> {
  const server = createServer(createMetricsApp(options));
  // Same timeouts as the TLS listeners: Prometheus keeps its scrape connections alive.
  await listenWithTimeouts(server, options);
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    close: async () => {
      if (!server.listening) return;
      await new Promise<void>((resolve) => {
        server.close(() => { resolve(); });
        server.closeIdleConnections();
      });
    },
  };
}
