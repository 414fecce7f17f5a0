import type { ServerResponse } from 'node:http';
import { timeoutSignal } from '../base/abort.js';
import { WardenError } from '../base/errors.js';

/** The client closed the connection before its answer was written: nobody waits for the answer. */
export class ClientGoneError extends WardenError {}

/** The request's own timeout passed before its answer was written. */
export class RequestTimeoutError extends WardenError {}

/**
 * The request's signal for its handler: aborts when the client closes the connection before the
 * answer is complete (kube-scheduler's httpTimeout, the apiserver's webhook timeoutSeconds, a
 * restart), or `timeoutMs` after the request arrived. `done`, once the answer is out, aborts it too:
 * no work started for a request outlives its answer (a DELETE's lock release holding the node's mutex).
 */
export function requestSignal(res: ServerResponse, timeoutMs: number): { signal: AbortSignal; done: () => void } {
  const closed = new AbortController();
  const onClose = (): void => {
    if (!res.writableFinished)
      closed.abort(new ClientGoneError('the client closed the request before it was answered'));
  };
  res.once('close', onClose);
  const deadline = timeoutSignal(
    timeoutMs,
    () => new RequestTimeoutError(`the request was not answered within its ${timeoutMs} ms`),
  );
  return {
    signal: AbortSignal.any([closed.signal, deadline.signal]),
    done: () => {
      deadline.clear();
      res.off('close', onClose);
      closed.abort(new WardenError('the request has been answered'));
    },
  };
}
