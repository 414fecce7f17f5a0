import type { V1ValidatingAdmissionPolicy, V1ValidatingAdmissionPolicyBinding } from '@kubernetes/client-node';
import { loadManifestObjects, objectsOfKind } from './manifests.js';

/** The variables every policy of manifests/admission-policies.yaml starts with, in this order. */
export const CONFIG_VARIABLES = ['wardenUsers', 'devicePluginUsers', 'schedulerName'] as const;

export interface PolicyConfig {
  wardenUsers: string[];
  devicePluginUsers: string[];
  schedulerName: string;
}

/** The admission policies and bindings of the kustomize base. */
export function shippedPolicies(): { policies: V1ValidatingAdmissionPolicy[]; bindings: V1ValidatingAdmissionPolicyBinding[] } {
  const objects = loadManifestObjects();
  return { policies: objectsOfKind(objects, 'ValidatingAdmissionPolicy'), bindings: objectsOfKind(objects, 'ValidatingAdmissionPolicyBinding') };
}

const LITERAL = String.raw`'[^'\\]*'`;
const LIST = new RegExp(String.raw`^\[\s*(?:${LITERAL}\s*(?:,\s*${LITERAL}\s*)*)?\]$`);

/**
 * The strings of a CEL configuration variable: a plain string literal or a list of them (what the
 * documented kustomize patch writes). Anything else is refused, so the tests never guess.
 */
export function celStrings(expression: string): string[] {
  const text = expression.trim();
  if (!LIST.test(text) && !new RegExp(`^${LITERAL}$`).test(text)) throw new Error(`not a CEL string literal or list of them: ${expression}`);
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
  if (schedulerName.length !== 1 || expression('schedulerName').trim().startsWith('[')) throw new Error('schedulerName must be one string literal');
  return { wardenUsers: celStrings(expression('wardenUsers')), devicePluginUsers: celStrings(expression('devicePluginUsers')), schedulerName: schedulerName[0]! };
}
