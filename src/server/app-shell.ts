import express, { type Request, type RequestHandler, type Response } from 'express';
import { describeError } from '../base/errors.js';
import { bodyHeaderGuard, RequestBodyError } from './request-body.js';

/** What /readyz reports: ready, or the reasons why not. */
type Readiness = () => { ready: boolean; reasons: string[] };

/**
 * What every listener's express app starts with: no X-Powered-By, no ETag (it would hash every
 * answer on the event loop, and no client of ours revalidates), `guard` before every route when
 * given, the body header guard at `bodyLimit` bytes, GET /healthz (alive) and, given a readiness,
 * GET /readyz (503 with the reasons when not ready).
 */
export function listenerApp(options: {
  bodyLimit: number;
  guard?: RequestHandler;
  readiness?: Readiness;
}): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  if (options.guard !== undefined) app.use(options.guard);
  app.use(bodyHeaderGuard(options.bodyLimit));
  app.get('/healthz', (_req, res) => {
    res.type('text/plain').send('ok');
  });
  const readiness = options.readiness;
  if (readiness !== undefined) {
    app.get('/readyz', (_req, res) => {
      const { ready, reasons } = readiness();
      res
        .status(ready ? 200 : 503)
        .type('text/plain')
        .send(ready ? 'ok' : `not ready: ${reasons.join('; ')}`);
    });
  }
  return app;
}

/** The answer to any route an app does not have (mounted after them all). */
export function notFound(_req: Request, res: Response): void {
  res.status(404).type('text/plain').send('not found');
}

/**
 * The HTTP status and message of an error passed on to an app's error handler while a body is
 * read: a refusal of the body reader (413, 415, 400) as it says, anything else 500.
 */
export function readFailure(error: unknown): { status: number; message: string } {
  if (error instanceof RequestBodyError) return { status: error.status, message: error.message };
  return { status: 500, message: `could not read the request: ${describeError(error)}` };
}
