import { respond, type AdmissionRequest, type AdmissionResponse } from './admission-types.js';
import { releaseLockOfDeletedPod, type DeleteOutcome, type LockReleaser, type StoredLocks } from './delete-release.js';
import { mutatePodOnCreate, type MutationDecision, type PodMutationConfig } from './pod-mutation.js';

/** One line of what the handler decided, for logs and metrics (wired by the caller). */
export type AdmissionOutcome =
  | { operation: 'CREATE'; decision: MutationDecision }
  | { operation: 'DELETE'; outcome: DeleteOutcome }
  | { operation: 'OTHER'; name: string };

export interface PodAdmissionDeps {
  mutation: PodMutationConfig;
  locks: LockReleaser;
  /** Upper bound for the lock release on DELETE; keep it well under the webhook's timeoutSeconds. */
  deleteTimeoutMs: number;
  /** The state store's locks: a DELETE of a pod that holds none is answered without an API call. */
  storedLocks?: StoredLocks;
  onOutcome?: (request: AdmissionRequest, outcome: AdmissionOutcome) => void;
}

/**
 * The webhook's single decision point: one validated AdmissionRequest in, one AdmissionResponse
 * out (uid always echoed). CREATE mutates GPU pods; DELETE frees the pod's node lock and is always
 * allowed without a patch; anything else is allowed untouched.
 */
export class PodAdmissionHandler {
  constructor(private readonly deps: PodAdmissionDeps) {}

  /** `signal`: the review's; the DELETE's lock release ends with it (the delete is allowed either way). */
  async handle(request: AdmissionRequest, signal?: AbortSignal): Promise<AdmissionResponse> {
    const isPod = request.kind?.kind === undefined || request.kind.kind === 'Pod';
    if (request.operation === 'CREATE' && isPod && (request.subResource ?? '') === '') {
      const decision = mutatePodOnCreate(request.object, this.deps.mutation);
      this.report(request, { operation: 'CREATE', decision });
      switch (decision.kind) {
        case 'skip':
          return respond.allowed(request.uid);
        case 'deny':
          return decision.code === 403
            ? respond.denied(request.uid, decision.message)
            : respond.errored(request.uid, decision.code, decision.message);
        case 'patch':
          return respond.patched(request.uid, decision.ops, decision.warnings);
      }
    }
    if (request.operation === 'DELETE' && isPod) {
      const outcome = await releaseLockOfDeletedPod(request.oldObject, request, {
        locks: this.deps.locks,
        timeoutMs: this.deps.deleteTimeoutMs,
        ...(this.deps.storedLocks ? { storedLocks: this.deps.storedLocks } : {}),
        ...(signal ? { signal } : {}),
      });
      this.report(request, { operation: 'DELETE', outcome });
      // A DELETE is never denied and never patched: the apiserver rejects patches on DELETE.
      return respond.allowed(request.uid);
    }
    this.report(request, { operation: 'OTHER', name: request.operation });
    return respond.allowed(request.uid);
  }

  private report(request: AdmissionRequest, outcome: AdmissionOutcome): void {
    try {
      this.deps.onOutcome?.(request, outcome);
    } catch {
      // Telemetry never changes an admission answer.
    }
  }
}
