import type {
  CoreV1Api,
  V1ValidatingAdmissionPolicy,
  V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import { apiStatusOf } from '../../src/kube/errors.js';
import { eventually, notYet } from './eventually.js';
import { loadManifestObjects, objectsOfKind } from './manifests.js';

/** The variables every policy of manifests/admission-policies.yaml starts with, in this order. */
export const CONFIG_VARIABLES = ['wardenUsers', 'devicePluginUsers', 'schedulerName'] as const;

export interface PolicyConfig {
  wardenUsers: string[];
  devicePluginUsers: string[];
  schedulerName: string;
}

/** The admission policies and bindings of the kustomize base. */
export function shippedPolicies(): {
  policies: V1ValidatingAdmissionPolicy[];
  bindings: V1ValidatingAdmissionPolicyBinding[];
} {
  const objects = loadManifestObjects();
  return {
    policies: objectsOfKind(objects, 'ValidatingAdmissionPolicy'),
    bindings: objectsOfKind(objects, 'ValidatingAdmissionPolicyBinding'),
  };
}

const LITERAL = String.raw`'[^'\\]*'`;
const LIST = new RegExp(String.raw`^\[\s*(?:${LITERAL}\s*(?:,\s*${LITERAL}\s*)*)?\]$`);

/**
 * The strings of a CEL configuration variable: a plain string literal or a list of them (what the
 * documented kustomize patch writes). Anything else is refused, so the tests never guess.
 */
export function celStrings(expression: string): string[] {
  const text = expression.trim();
  if (!LIST.test(text) && !new RegExp(`^${LITERAL}$`).test(text))
    throw new Error(`not a CEL string literal or list of them: ${expression}`);
  return [...text.matchAll(/'([^'\\]*)'/g)].map((match) => match[1]!);
}

/** The identities and scheduler name a policy is configured with (its first three variables). */
export function policyConfig(policy: V1ValidatingAdmissionPolicy): PolicyConfig {
  const variables = policy.spec?.variables ?? [];
  const expression = (name: (typeof CONFIG_VARIABLES)[number]): string => {
    const found = variables.find((variable) => variable.name === name);
    if (!found) throw new Error(`policy ${policy.metadata?.name ?? ''} has no variable ${name}`);
    return found.expression;
  };
  const schedulerName = celStrings(expression('schedulerName'));
  if (schedulerName.length !== 1 || expression('schedulerName').trim().startsWith('['))
    throw new Error('schedulerName must be one string literal');
  return {
    wardenUsers: celStrings(expression('wardenUsers')),
    devicePluginUsers: celStrings(expression('devicePluginUsers')),
    schedulerName: schedulerName[0]!,
  };
}

/**
 * Waits until kube-apiserver no longer enforces the shipped policies in `namespace` after their
 * bindings were deleted (an uninstall of the chart in deny mode). Policies and bindings reach its
 * admission through informers, so a delete that returned can still refuse the next test's GPU pod
 * for a while: CI, 2026-12-03, the pod of hami-v210-allocations created right after
 * hami-migration's `helm uninstall --wait` was denied by vgpu-warden-gpu-pods. The probe is a dry
 * run, so nothing is written: a GPU pod naming another scheduler and carrying a scheduler-owned
 * annotation, refused by two of the policies while they are in force.
 */
export async function untilPoliciesLifted(core: CoreV1Api, namespace: string): Promise<void> {
  const probe = {
    metadata: { name: 'policy-lift-probe', annotations: { 'hami.io/bind-phase': 'probe' } },
    spec: {
      schedulerName: 'nobody',
      containers: [{ name: 'gpu', image: 'registry.invalid/none:1', resources: { limits: { 'nvidia.com/gpu': '1' } } }],
    },
  };
  await eventually(
    'the admission policies to be lifted',
    async () => {
      try {
        await core.createNamespacedPod({ namespace, body: probe, dryRun: 'All' });
        return true;
      } catch (error) {
        const message = apiStatusOf(error)?.message ?? '';
        if (message.includes('ValidatingAdmissionPolicy')) return notYet(message.slice(0, 200));
        throw error;
      }
    },
    20_000,
    100,
  );
}
