import { apiStatusOf, httpStatusOf } from '../kube/errors.js';
import { clip } from '../base/user-text.js';

/**
 * One-line descriptions of failed Kubernetes API calls for logs and /readyz. client-node's
 * ApiException message is a multi-line dump (`HTTP-Code: 404`, `Message:`, `Body:`, `Headers:`):
 * only its status, reason and the Status message are kept. Pure.
 */

/** The condition key every component reports when the apiserver does not answer at all. */
export const APISERVER_UNREACHABLE = 'apiserver unreachable';

/** Longest failure text kept; the apiserver's Status messages are short, a proxy's HTML page is not. */
export const FAILURE_TEXT_CHARS = 300;

function statusOf(link: unknown): number | undefined {
  const status = httpStatusOf(link);
  if (status !== undefined) return status;
  const statusCode = (link as { statusCode?: unknown } | null)?.statusCode;
  return typeof statusCode === 'number' && statusCode >= 100 && statusCode < 600 ? statusCode : undefined;
}

function chain(error: unknown): unknown[] {
  const links: unknown[] = [];
  for (
    let current: unknown = error;
    current !== undefined && current !== null && !links.includes(current) && links.length < 6;
    current = (current as { cause?: unknown }).cause
  ) {
    links.push(current);
  }
  return links;
}

const NETWORK_ERROR_NAMES = new Set([
  'TimeoutError',
  'ConnectTimeoutError',
  'SocketError',
  'HeadersTimeoutError',
  'BodyTimeoutError',
]);

/** A link that says the connection itself failed: fetch's TypeError, a system error code, undici's errors. */
function isNetworkLink(link: unknown): boolean {
  if (!(link instanceof Error)) return false;
  const code = (link as { code?: unknown }).code;
  return (
    link.message === 'fetch failed' || NETWORK_ERROR_NAMES.has(link.name) || (typeof code === 'string' && code !== '')
  );
}

/**
 * True when the call got no answer at all (refused, reset, DNS, TLS, timeout): no link of the chain
 * carries an HTTP status, and one says the connection failed.
 */
export function isUnreachable(error: unknown): boolean {
  const links = chain(error);
  return links.every((link) => statusOf(link) === undefined) && links.some(isNetworkLink);
}

function linkText(link: unknown): { text: string; last: boolean } {
  const status = httpStatusOf(link);
  if (status !== undefined) {
    const answer = apiStatusOf(link);
    const reason = answer?.reason === undefined || answer.reason === '' ? '' : ` ${answer.reason}`;
    const message = answer?.message === undefined || answer.message === '' ? '' : `: ${answer.message}`;
    // Nothing below an API error adds to what the apiserver said.
    return { text: `HTTP ${status}${reason}${message}`, last: true };
  }
  if (link instanceof Error) return { text: link.message.split('\n')[0] ?? '', last: false };
  if (typeof link === 'string') return { text: link, last: true };
  // JSON.stringify answers undefined for a function or a symbol, whatever its declared type says.
  const json: unknown = JSON.stringify(link);
  return { text: typeof json === 'string' ? json : typeof link, last: true };
}

/** The error and its causes on one clipped line, e.g. `fetch failed: connect ECONNREFUSED 127.0.0.1:6443`. */
export function failureText(error: unknown, max: number = FAILURE_TEXT_CHARS): string {
  const parts: string[] = [];
  for (const link of chain(error)) {
    const { text, last } = linkText(link);
    const trimmed = text.replace(/\s+/g, ' ').trim();
    if (trimmed !== '' && !parts.some((part) => part.includes(trimmed))) parts.push(trimmed);
    if (last) break;
  }
  return clip(parts.join(': ') || 'unknown error', max);
}

/**
 * The condition a failed call stands for: the apiserver not answering is one condition for every
 * component; anything else is the component's own (`what` names it, e.g. "pods list").
 */
export function apiCondition(what: string, error: unknown): { condition: string; message: string } {
  const text = failureText(error);
  if (isUnreachable(error))
    return { condition: APISERVER_UNREACHABLE, message: `${APISERVER_UNREACHABLE} (${what}): ${text}` };
  return { condition: `${what} failing`, message: `${what} failing: ${text}` };
}
