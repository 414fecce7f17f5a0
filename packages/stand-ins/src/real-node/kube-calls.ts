import { Observable, type ConfigurationOptions, type RequestContext } from '@kubernetes/client-node';

/** The HTTP status of a failed client-node call (ApiException's code), if it has one. */
function statusOf(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

export const isConflict = (error: unknown): boolean => statusOf(error) === 409;
export const isNotFound = (error: unknown): boolean => statusOf(error) === 404;

/** Call options that abort the call on `signal`, keeping `base`'s (e.g. a Content-Type header). */
export function withSignal(signal: AbortSignal, base?: ConfigurationOptions): ConfigurationOptions {
  const pre = (context: RequestContext) => {
    context.setSignal(signal);
    return new Observable(Promise.resolve(context));
  };
  const abortOn = { pre, post: <T>(context: T) => new Observable(Promise.resolve(context)) };
  return { ...base, middleware: [...(base?.middleware ?? []), abortOn], middlewareMergeStrategy: 'append' };
}
