import { ApiException } from '@kubernetes/client-node';

/** HTTP status of a failed Kubernetes API call, or undefined when it never got an answer. */
export function httpStatusOf(error: unknown): number | undefined {
  if (error instanceof ApiException) return error.code;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' && code >= 100 && code < 600 ? code : undefined;
}

/** 409: an RV-guarded write lost the race (or the object already exists). */
export const isConflict = (error: unknown): boolean => httpStatusOf(error) === 409;

export const isNotFound = (error: unknown): boolean => httpStatusOf(error) === 404;

/** The `reason` and `message` of the Status object the apiserver sent with an error, when it sent one. */
export function apiStatusOf(error: unknown): { reason?: string; message?: string } | undefined {
  if (!(error instanceof ApiException)) return undefined;
  const body: unknown = error.body;
  if (typeof body === 'string') {
    try {
      const parsed = JSON.parse(body) as { reason?: string; message?: string };
      return { reason: parsed.reason, message: parsed.message };
    } catch {
      return { message: body };
    }
  }
  if (body !== null && typeof body === 'object') {
    const status = body as { reason?: string; message?: string };
    return { reason: status.reason, message: status.message };
  }
  return undefined;
}
