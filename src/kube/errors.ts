import { ApiException } from '@kubernetes/client-node';

/** HTTP status of a failed Kubernetes API call, or undefined when it never got an answer. */
export function httpStatusOf(error: unknown): number | undefined {
  if (error instanceof ApiException) return error.code;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' && code >= 100 && code < 600 ? code : undefined;
}

/** 409: an RV-guarded write lost the race (or the object already exists). */
export const isConflict = (error: unknown): boolean => httpStatusOf(error) === 409;

/** 404: the object (or its namespace) does not exist. */
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

/**
 * Whether a failed call may succeed if simply tried again: no answer at all (refused, reset, timed
 * out) or 408, 429, 5xx, anywhere along the `cause` chain. 401, 403, 404, 422 and the like are
 * definite: retrying will not fix a missing right or object.
 */
const LOCAL_FILE_ERRORS = new Set([
  'EACCES',
  'EPERM',
  'EROFS',
  'ENOENT',
  'ENOTDIR',
  'EISDIR',
  'ENOSPC',
  'EEXIST',
  'ENAMETOOLONG',
]);

export function isTransientApiError(error: unknown): boolean {
  const seen = new Set<unknown>();
  let status: number | undefined;
  for (
    let current: unknown = error;
    current !== undefined && current !== null && !seen.has(current);
    current = (current as { cause?: unknown }).cause
  ) {
    seen.add(current);
    // A local file that cannot be written (an unwritable CERT_DIR) stays so: retrying only delays
    // the one clear line, and the log would blame the apiserver (found building the image).
    if (LOCAL_FILE_ERRORS.has(String((current as { code?: unknown }).code))) return false;
    status ??= httpStatusOf(current);
  }
  return status === undefined || status === 408 || status === 429 || status >= 500;
}
