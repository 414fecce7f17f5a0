import type { Express, NextFunction, Request, Response } from 'express';
import {
  type AdmissionHandler,
  type AdmissionResponse,
  type AdmissionReviewReply,
  type AdmissionVersion,
  respond,
} from '../admission/admission-types.js';
import { parseAdmissionReview } from '../admission/parse-review.js';
import { listenerApp, notFound, readFailure } from './app-shell.js';
import { readBody } from './request-body.js';
import { requestSignal } from './request-signal.js';

export interface WebhookAppDeps {
  handler: AdmissionHandler;
  /** Readiness beyond "process alive": certificates loaded, caches synced, listener answering. */
  readiness: () => { ready: boolean; reasons: string[] };
  /** Body size cap; the apiserver sends at most ~3 MB objects, twice that with oldObject. */
  bodyLimitBytes?: number;
  /** Called for every request the webhook refuses to decode (bad input), for logs. */
  onBadRequest?: (status: number, message: string) => void;
  /** When a review's signal aborts if the apiserver has not given up first (default: its timeoutSeconds). */
  answerTimeoutMs?: number;
}

const DEFAULT_BODY_LIMIT = 7 * 1024 * 1024;
/** The webhook's timeoutSeconds (manifests/webhook.yaml): the apiserver waits no longer for an answer. */
const WEBHOOK_TIMEOUT_MS = 10_000;

function reply(res: Response, httpStatus: number, version: AdmissionVersion, response: AdmissionResponse): void {
  const body: AdmissionReviewReply = { apiVersion: version, kind: 'AdmissionReview', response };
  res.status(httpStatus).type('application/json').send(JSON.stringify(body));
}

/**
 * The HTTP adapter of the webhook: decode and validate, call the handler, encode. Every answer to
 * /mutate is an AdmissionReview, including malformed input, oversize bodies and handler crashes.
 */
export function createWebhookApp(deps: WebhookAppDeps): Express {
  const limit = deps.bodyLimitBytes ?? DEFAULT_BODY_LIMIT;
  const app = listenerApp({ bodyLimit: limit, readiness: deps.readiness });

  // Raw body for every content type: the Content-Type check is ours, before any decoding.
  app.post('/mutate', readBody(limit), async (req: Request, res: Response) => {
    const body = Buffer.isBuffer(req.body) ? req.body : undefined;
    const parsed = parseAdmissionReview(body, req.headers['content-type']);
    if (!parsed.ok) {
      deps.onBadRequest?.(parsed.httpStatus, parsed.message);
      reply(res, parsed.httpStatus, parsed.version, respond.errored(parsed.uid ?? '', parsed.code, parsed.message));
      return;
    }
    const review = requestSignal(res, deps.answerTimeoutMs ?? WEBHOOK_TIMEOUT_MS);
    let response: AdmissionResponse;
    try {
      response = await deps.handler.handle(parsed.request, review.signal);
    } catch (error) {
      response = respond.errored(parsed.request.uid, 500, `webhook failed: ${(error as Error).message}`);
      // A DELETE must never be refused, not even by our own bug.
      if (parsed.request.operation === 'DELETE') response = respond.allowed(parsed.request.uid);
    }
    reply(res, 200, parsed.version, response);
    review.done();
  });

  app.use(notFound);

  // Errors from the body reader (oversize, compressed, aborted upload) still get a review.
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const { status, message } = readFailure(error);
    deps.onBadRequest?.(status, message);
    if (res.headersSent) return;
    reply(res, status, 'admission.k8s.io/v1', respond.errored('', status, message));
  });
  return app;
}
