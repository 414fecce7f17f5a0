import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { WardenError } from '../base/errors.js';
import { quoted } from '../base/user-text.js';

/**
 * Request bodies for the webhook, extender and metrics listeners: uncompressed, bounded, and
 * refused from the headers alone whenever the headers already say the body will not do.
 *
 * Only the identity encoding is accepted. kube-apiserver and kube-scheduler send plain JSON, and a
 * compressed body would cost decompression work (and a zip bomb's worth of memory) for nothing.
 * A refusal made before the body is read closes the connection after the answer (Connection:
 * close), so the rest of the body is never read either.
 */
export class RequestBodyError extends WardenError {
  constructor(
    message: string,
    readonly status: 400 | 413 | 415,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Why the headers alone refuse the body, or undefined when they do not. */
export function bodyHeaderProblem(headers: Request['headers'], limitBytes: number): RequestBodyError | undefined {
  const encoding = headers['content-encoding'];
  if (encoding !== undefined) {
    const codings = encoding
      .split(',')
      .map((coding) => coding.trim().toLowerCase())
      .filter((coding) => coding !== '');
    const unsupported = codings.find((coding) => coding !== 'identity');
    if (unsupported !== undefined) {
      return new RequestBodyError(
        `Content-Encoding ${quoted(unsupported)} is not supported: send the body uncompressed`,
        415,
      );
    }
  }
  // Node's parser has already refused a Content-Length that is not a number.
  const declared = headers['content-length'];
  if (declared !== undefined && Number(declared) > limitBytes) {
    return new RequestBodyError(`request body of ${declared} bytes exceeds the limit of ${limitBytes} bytes`, 413);
  }
  return undefined;
}

function refuse(res: Response, next: NextFunction, error: RequestBodyError): void {
  // The unread rest of the body must not be drained to keep the connection: close it instead.
  res.setHeader('Connection', 'close');
  next(error);
}

/** App-wide: refuses an unsupported encoding (415) or a declared length over the limit (413) at once. */
export function bodyHeaderGuard(limitBytes: number): RequestHandler {
  return (req, res, next) => {
    const hasBody = req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] ?? '0') !== '0';
    const problem = hasBody ? bodyHeaderProblem(req.headers, limitBytes) : undefined;
    if (problem === undefined) next();
    else refuse(res, next, problem);
  };
}

/**
 * Reads the body into `req.body` as one Buffer (empty when there is none). A body that grows past
 * the limit while arriving (chunked, or longer than declared) is refused at that moment (413).
 */
export function readBody(limitBytes: number): RequestHandler {
  return (req, res, next) => {
    const problem = bodyHeaderProblem(req.headers, limitBytes);
    if (problem !== undefined) {
      refuse(res, next, problem);
      return;
    }
    const chunks: Buffer[] = [];
    let received = 0;
    let settled = false;
    const settle = (error?: RequestBodyError): void => {
      if (settled) return;
      settled = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      req.off('error', onError);
      if (error === undefined) {
        (req as Request & { body: Buffer }).body = Buffer.concat(chunks, received);
        next();
      } else {
        chunks.length = 0;
        if (error.status === 413) req.pause();
        refuse(res, next, error);
      }
    };
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      if (received > limitBytes)
        settle(new RequestBodyError(`request body exceeds the limit of ${limitBytes} bytes`, 413));
      else chunks.push(chunk);
    };
    const onEnd = (): void => {
      settle();
    };
    const onClose = (): void => {
      settle(new RequestBodyError('the client went away before sending the whole body', 400));
    };
    const onError = (error: Error): void => {
      settle(new RequestBodyError(`could not read the request body: ${error.message}`, 400, { cause: error }));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('close', onClose);
    req.on('error', onError);
  };
}
