import { mutatePodOnCreate, type PodMutationConfig } from '../admission/pod-mutation.js';
import type { JsonPatchOp } from '../admission/json-patch.js';
import { clip, LABEL_CHARS } from '../base/user-text.js';
import { MESSAGE_CHARS, VALUE_CHARS, type WebhookReport } from './explanation.js';
import { isSchedulerOwnedAnnotation } from '../hami/wire.js';
import { isRecord } from '../base/json.js';

type Json = Record<string, unknown>;

/**
 * The pod as it was at CREATE, as far as the webhook's rules can tell: without what bind adds
 * later (the scheduler-owned annotations and spec.nodeName), which the webhook would refuse on a
 * CREATE but which a bound pod rightly carries.
 */
function asCreated(pod: Json): Json {
  const metadata = isRecord(pod.metadata) ? pod.metadata : {};
  const annotations = isRecord(metadata.annotations) ? metadata.annotations : {};
  const kept = Object.fromEntries(Object.entries(annotations).filter(([key]) => !isSchedulerOwnedAnnotation(key)));
  const spec = isRecord(pod.spec) ? { ...pod.spec, nodeName: undefined } : pod.spec;
  return { ...pod, metadata: { ...metadata, annotations: kept }, spec };
}

/** `spec/containers/0/resources/limits/nvidia.com/gpucores: "100"` for one JSON-patch op. */
function describeOp(op: JsonPatchOp): string {
  const path = op.path
    .slice(1)
    .split('/')
    .map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'))
    .join('/');
  // JSON.stringify gives undefined (not a string) for an absent value, whatever its type says.
  const value = JSON.stringify(op.value) as string | undefined;
  return `${clip(path, MESSAGE_CHARS)}: ${clip(value ?? '', VALUE_CHARS)}`;
}

/**
 * Whether the webhook mutated the pod, judged after the fact by running the webhook's own CREATE
 * decision on the pod again. The webhook leaves no mark of its own, so "applied" means the pod is
 * exactly as the webhook leaves one (its author may have written the same values); "not-applied"
 * lists what it would still add (the webhook was down with failurePolicy Ignore, or the namespace
 * opted out); "would-deny" means such a pod never passed the webhook.
 */
export function webhookReport(pod: unknown, config: PodMutationConfig, limit: number): WebhookReport {
  if (!isRecord(pod)) return { state: 'would-deny', detail: 'not a Pod', missing: [] };
  const decision = mutatePodOnCreate(asCreated(pod), config);
  switch (decision.kind) {
    case 'skip':
      return {
        state: 'skipped',
        detail: `the webhook leaves it alone: ${clip(decision.reason, MESSAGE_CHARS)}`,
        missing: [],
      };
    case 'deny':
      return {
        state: 'would-deny',
        detail:
          'the webhook refuses such a pod, so it was created without it: ' + clip(decision.message, MESSAGE_CHARS),
        missing: [],
      };
    case 'patch': {
      if (decision.ops.length === 0) {
        return {
          state: 'applied',
          detail:
            `as the webhook leaves a GPU pod: schedulerName ${clip(config.schedulerName, LABEL_CHARS)}, ` +
            `nothing left to add`,
          missing: [],
        };
      }
      const missing = decision.ops.slice(0, limit).map(describeOp);
      if (decision.ops.length > limit) missing.push(`and ${decision.ops.length - limit} more`);
      return {
        state: 'not-applied',
        detail:
          'the webhook did not mutate it (down with failurePolicy Ignore, or the namespace opted out); it would ' +
          'still set:',
        missing,
      };
    }
  }
}
