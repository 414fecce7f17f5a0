import { PatchStrategy, setHeaderOptions, type CoreV1Api } from '@kubernetes/client-node';
import { withSignal } from '../kube/call-options.js';
import { type RefusedPod } from './refusal-requeue.js';
import { REQUEUE_ANNOTATION } from '../hami/wire.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
/** A nudge is best-effort: kube-scheduler's own retries remain when it does not land in time. */
const NUDGE_TIMEOUT_MS = 5_000;

/**
 * RefusalRequeue's write: the requeue annotation with the time, on exactly this incarnation (the
 * uid in the patch is a precondition: another pod of that name gets a 409, not an update). A
 * repeated or lost write changes nothing but the time.
 */
export function podRequeueWriter(core: CoreV1Api, clock: () => number = Date.now): (pod: RefusedPod) => Promise<void> {
  return async (pod) => {
    await core.patchNamespacedPod(
      {
        name: pod.name,
        namespace: pod.namespace,
        body: { metadata: { uid: pod.uid, annotations: { [REQUEUE_ANNOTATION]: new Date(clock()).toISOString() } } },
      },
      withSignal(AbortSignal.timeout(NUDGE_TIMEOUT_MS), mergePatch),
    );
  };
}
