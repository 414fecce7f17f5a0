import {
  Observable,
  type ConfigurationOptions,
  type ObservableMiddleware,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';

export type CallOptions = ConfigurationOptions;

/**
 * Options for one client-node call that abort it with `signal` (a bind's deadline reaches every API
 * call it makes this way). Other options (e.g. a Content-Type header) are kept.
 */
export function withSignal(signal: AbortSignal | undefined, base?: CallOptions): CallOptions | undefined {
  if (signal === undefined) return base;
  const abortOn: ObservableMiddleware = {
    pre: (context: RequestContext) => {
      context.setSignal(signal);
      return new Observable(Promise.resolve(context));
    },
    post: (context: ResponseContext) => new Observable(Promise.resolve(context)),
  };
  return { ...base, middleware: [...(base?.middleware ?? []), abortOn], middlewareMergeStrategy: 'append' };
}

/** `signal` (when given) or `timeoutMs`, whichever ends first: one API call's bound. */
export function boundedSignal(signal: AbortSignal | undefined, timeoutMs: number): AbortSignal {
  const timeout = AbortSignal.timeout(timeoutMs);
  return signal === undefined ? timeout : AbortSignal.any([signal, timeout]);
}
