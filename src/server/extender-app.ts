import type { Express, NextFunction, Request, RequestHandler, Response } from 'express';
import { jsonPieces } from '../base/time-slices.js';
import { listenerApp, notFound, readFailure } from './app-shell.js';
import { readBody } from './request-body.js';
import { requestSignal } from './request-signal.js';
import {
  type ExtenderHandlers,
  filterResult,
  parseBindingArgs,
  type Parsed,
  parseFilterArgs,
} from '../extender/protocol.js';

export interface ExtenderAppDeps {
  handlers: ExtenderHandlers;
  readiness: () => { ready: boolean; reasons: string[] };
  bodyLimitBytes?: number;
  onBadRequest?: (path: string, message: string) => void;
  /** Runs before every route, health checks included (the client-certificate check of serve-command). */
  guard?: RequestHandler;
  /** When filter's and prioritize's signal aborts if kube-scheduler has not given up first (its httpTimeout). */
  answerTimeoutMs?: number;
  /** When bind's signal aborts (BIND_TIMEOUT; default answerTimeoutMs). */
  bindTimeoutMs?: number;
  /** Told where each well-formed call's time went (vgpu_warden_extender_request_seconds). */
  onServed?: (verb: ExtenderVerb, phases: ExtenderPhases) => void;
  /** For the phase timings; default performance.now. */
  clock?: () => number;
}

export type ExtenderVerb = 'filter' | 'prioritize' | 'bind';

/**
 * Where one extender call's time went, in ms: reading the body after the headers came, decoding and
 * validating the JSON (for filter and prioritize, mostly the node names), the handler, and encoding
 * the answer and handing it to the socket (not the socket's flush, whose callback waits its turn
 * in the event loop).
 */
export interface ExtenderPhases {
  read: number;
  decode: number;
  handle: number;
  answer: number;
}

/** kube-scheduler's httpTimeout for the extender (scheduler-config.ts): it waits no longer for an answer. */
const SCHEDULER_HTTP_TIMEOUT_MS = 30_000;

/** Filter args carry a name per node: 16 MiB is about 500,000 node names. */
const DEFAULT_BODY_LIMIT = 16 * 1024 * 1024;
/** Answers are written in pieces of about this many characters. */
const WRITE_CHUNK = 64 * 1024;

function decode(req: Request): unknown {
  const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
  if (body.length === 0) throw new Error('empty request body');
  return JSON.parse(body.toString('utf8'));
}

/**
 * The extender's HTTP adapter: PascalCase JSON in and out. Logical failures and malformed bodies are
 * answered with HTTP 200 and `Error` (kube-scheduler treats any other status as a transport error);
 * prioritize has no Error field, so a bad request there gets HTTP 400, which kube-scheduler logs
 * and ignores.
 */
export function createExtenderApp(deps: ExtenderAppDeps): Express {
  const limit = deps.bodyLimitBytes ?? DEFAULT_BODY_LIMIT;
  // listenerApp sends no ETag, which would hash every answer (megabytes for a large filter) on the event loop.
  const app = listenerApp({
    bodyLimit: limit,
    readiness: deps.readiness,
    ...(deps.guard === undefined ? {} : { guard: deps.guard }),
  });
  const raw = readBody(limit);
  const clock = deps.clock ?? (() => performance.now());
  // Before the body is read: the read phase starts once the headers are in.
  const arrival: RequestHandler = (_req, res, next) => {
    res.locals.arrivedAt = clock();
    next();
  };
  const send = (res: Response, status: number, body: unknown) => {
    res.status(status).type('application/json').send(JSON.stringify(body));
  };
  // Filter and prioritize answers grow with the node list: encoded and written in slices, so that
  // neither the encoding nor the TLS write of megabytes holds the event loop in one block.
  const sendLarge = async (res: Response, status: number, body: unknown) => {
    res.status(status).type('application/json');
    let pending = '';
    for await (const piece of jsonPieces(body)) {
      pending += piece;
      if (pending.length >= WRITE_CHUNK) {
        res.write(pending);
        pending = '';
      }
    }
    // A short answer written at once gets a Content-Length; a long one went out chunked.
    res.end(pending);
  };

  const answerTimeoutMs = deps.answerTimeoutMs ?? SCHEDULER_HTTP_TIMEOUT_MS;
  /**
   * One extender verb: decode and validate, then call the handler with the request's signal;
   * `invalid` and `failed` say how a bad request and a handler crash are answered on that path.
   */
  const verb = <T>(
    path: string,
    parse: (body: unknown) => Parsed<T>,
    handle: (args: T, signal: AbortSignal) => Promise<unknown>,
    answers: { invalid: (message: string) => [number, unknown]; failed: (message: string) => [number, unknown] },
    timeoutMs = answerTimeoutMs,
  ) => {
    const { invalid, failed } = answers;
    const name = path.slice(1) as ExtenderVerb;
    app.post(path, arrival, raw, async (req, res) => {
      const read = clock();
      let parsed: Parsed<T>;
      try {
        parsed = parse(decode(req));
      } catch (error) {
        parsed = { ok: false, error: `malformed request: ${(error as Error).message}` };
      }
      if (!parsed.ok) {
        deps.onBadRequest?.(path, parsed.error);
        send(res, ...invalid(parsed.error));
        return;
      }
      const decoded = clock();
      let handled: number | undefined;
      const request = requestSignal(res, timeoutMs);
      try {
        const answer = await handle(parsed.value, request.signal);
        handled = clock();
        await sendLarge(res, 200, answer);
      } catch (error) {
        handled ??= clock();
        send(res, ...failed(`${name} failed: ${(error as Error).message}`));
      } finally {
        request.done();
      }
      const arrived = res.locals.arrivedAt as number;
      const phases = {
        read: read - arrived,
        decode: decoded - read,
        handle: handled - decoded,
        answer: clock() - handled,
      };
      deps.onServed?.(name, phases);
    });
  };
  const filterAnswers = (m: string): [number, unknown] => [200, filterResult.error(m)];
  const bindAnswers = (m: string): [number, unknown] => [200, { Error: m }];
  verb('/filter', parseFilterArgs, (args, signal) => deps.handlers.filter(args, signal), {
    invalid: filterAnswers,
    failed: filterAnswers,
  });
  verb('/prioritize', parseFilterArgs, (args, signal) => deps.handlers.prioritize(args, signal), {
    invalid: (m) => [400, { Error: m }],
    failed: (m) => [500, { Error: m }],
  });
  verb(
    '/bind',
    parseBindingArgs,
    (args, signal) => deps.handlers.bind(args, signal),
    { invalid: bindAnswers, failed: bindAnswers },
    deps.bindTimeoutMs ?? answerTimeoutMs,
  );

  app.use(notFound);
  // Refusals of the body reader are HTTP errors (413, 415, 400): kube-scheduler never sends such a
  // request, and an Error field would claim the arguments were read.
  app.use((error: unknown, req: Request, res: Response, _next: NextFunction) => {
    const { status, message } = readFailure(error);
    deps.onBadRequest?.(req.path, message);
    if (res.headersSent) return;
    send(res, status, req.path === '/filter' ? filterResult.error(message) : { Error: message });
  });
  return app;
}
