import type { JsonPatchOp } from './json-patch.js';

export const ADMISSION_VERSIONS = ['admission.k8s.io/v1', 'admission.k8s.io/v1beta1'] as const;
export type AdmissionVersion = (typeof ADMISSION_VERSIONS)[number];

/** The fields of admission.k8s.io AdmissionRequest the webhook reads (v1 and v1beta1 share them). */
export interface AdmissionRequest {
  uid: string;
  kind?: { group?: string; version?: string; kind?: string };
  resource?: { group?: string; version?: string; resource?: string };
  subResource?: string;
  name?: string;
  namespace?: string;
  operation: string;
  object?: unknown;
  oldObject?: unknown;
  dryRun?: boolean;
  /** CreateOptions / UpdateOptions / DeleteOptions of the call (a DELETE's gracePeriodSeconds). */
  options?: unknown;
}

export interface AdmissionStatus {
  code: number;
  reason?: string;
  message: string;
}

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: AdmissionStatus;
  patchType?: 'JSONPatch';
  patch?: string;
  warnings?: string[];
}

export interface AdmissionReviewReply {
  apiVersion: AdmissionVersion;
  kind: 'AdmissionReview';
  response: AdmissionResponse;
}

/** Response constructors in the style of controller-runtime's admission package; uid is always echoed. */
export const respond = {
  allowed(uid: string, message?: string, warnings?: string[]): AdmissionResponse {
    return {
      uid,
      allowed: true,
      ...(message === undefined ? {} : { status: { code: 200, message } }),
      ...(warnings && warnings.length > 0 ? { warnings } : {}),
    };
  },
  denied(uid: string, message: string): AdmissionResponse {
    return { uid, allowed: false, status: { code: 403, reason: 'Forbidden', message } };
  },
  errored(uid: string, code: number, message: string): AdmissionResponse {
    const reason =
      code === 413
        ? 'RequestEntityTooLarge'
        : code === 415
          ? 'UnsupportedMediaType'
          : code >= 500
            ? 'InternalError'
            : 'BadRequest';
    return { uid, allowed: false, status: { code, reason, message } };
  },
  patched(uid: string, ops: readonly JsonPatchOp[], warnings: string[] = []): AdmissionResponse {
    if (ops.length === 0) return respond.allowed(uid, undefined, warnings);
    return {
      uid,
      allowed: true,
      patchType: 'JSONPatch',
      patch: Buffer.from(JSON.stringify(ops)).toString('base64'),
      ...(warnings.length > 0 ? { warnings } : {}),
    };
  },
};

/** `signal` is the review's: it aborts when the apiserver closes the request or its timeout passes. */
export interface AdmissionHandler {
  handle(request: AdmissionRequest, signal: AbortSignal): Promise<AdmissionResponse>;
}
