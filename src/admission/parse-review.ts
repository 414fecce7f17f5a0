import { quoted } from '../base/user-text.js';
import { ADMISSION_VERSIONS, type AdmissionRequest, type AdmissionVersion } from './admission-types.js';
import { isRecord } from '../base/json.js';

/**
 * Validates an incoming AdmissionReview before anything decides on it (the order follows
 * controller-runtime: content type, empty body, JSON, review version and kind, request, uid).
 * Never throws. A failure carries the HTTP status to answer with: 200 when a uid can be echoed
 * (the apiserver then reads `allowed:false` and the status), 400 when there is none.
 */
export type ParsedReview =
  | { ok: true; version: AdmissionVersion; request: AdmissionRequest }
  | { ok: false; httpStatus: number; version: AdmissionVersion; uid?: string; code: number; message: string };

const DEFAULT_VERSION: AdmissionVersion = 'admission.k8s.io/v1';

export function mediaTypeOf(contentType: string | undefined): string | undefined {
  return contentType?.split(';')[0]?.trim().toLowerCase();
}

export function parseAdmissionReview(body: Buffer | undefined, contentType: string | undefined): ParsedReview {
  const fail = (
    code: number,
    message: string,
    uid?: string,
    version: AdmissionVersion = DEFAULT_VERSION,
  ): ParsedReview => ({
    ok: false,
    httpStatus: uid === undefined ? (code === 413 ? 413 : 400) : 200,
    version,
    code,
    message,
    ...(uid === undefined ? {} : { uid }),
  });

  const mediaType = mediaTypeOf(contentType);
  if (mediaType !== 'application/json') {
    return fail(
      415,
      `Content-Type must be application/json, got ${contentType === undefined ? 'none' : quoted(contentType)}`,
    );
  }
  if (body === undefined || body.length === 0) return fail(400, 'request body is empty');

  let decoded: unknown;
  try {
    decoded = JSON.parse(body.toString('utf8'));
  } catch (error) {
    return fail(400, `request body is not valid JSON: ${(error as Error).message}`);
  }
  if (!isRecord(decoded)) return fail(400, 'request body is not a JSON object');

  const request = decoded.request;
  const uid = isRecord(request) && typeof request.uid === 'string' && request.uid !== '' ? request.uid : undefined;
  const version = ADMISSION_VERSIONS.find((known) => known === decoded.apiVersion);
  if (version === undefined) {
    return fail(
      400,
      `unsupported AdmissionReview apiVersion ${quoted(decoded.apiVersion)}; ` +
        `expected ${ADMISSION_VERSIONS.join(' or ')}`,
      uid,
    );
  }
  if (decoded.kind !== 'AdmissionReview') {
    return fail(400, `expected kind AdmissionReview, got ${quoted(decoded.kind)}`, uid, version);
  }
  if (!isRecord(request)) return fail(400, 'AdmissionReview has no request', undefined, version);
  if (uid === undefined) return fail(400, 'AdmissionReview request has no uid', undefined, version);
  if (typeof request.operation !== 'string' || request.operation === '') {
    return fail(400, 'AdmissionReview request has no operation', uid, version);
  }
  return { ok: true, version, request: request as unknown as AdmissionRequest };
}
