import { resolve } from 'node:path';
import { loadYaml } from '@kubernetes/client-node';
import { expect } from 'chai';
import {
  GPU_CORES,
  GPU_COUNT,
  GPU_MEMORY,
  GPU_MEMORY_PERCENTAGE,
  isSchedulerOwnedAnnotation,
} from '../../src/hami/wire.js';
import { CONFIG_VARIABLES, policyConfig, shippedPolicies } from '../support/admission-policies.js';
import { applyComponent } from '../support/kustomize-component.js';
import { findObject, loadManifestObjects, MANIFESTS_DIR } from '../support/manifests.js';

const objects = loadManifestObjects();
const { policies, bindings } = shippedPolicies();
const policy = (name: string) => {
  const found = policies.find((candidate) => candidate.metadata?.name === name);
  if (!found) throw new Error(`no ValidatingAdmissionPolicy ${name}`);
  return found;
};
const GPU_RESOURCES = [GPU_COUNT, GPU_MEMORY, GPU_MEMORY_PERCENTAGE, GPU_CORES];

describe('manifests/admission-policies.yaml', () => {
  it('ships the four guards, each bound exactly once, enforcing with Deny over everything its policy matches', () => {
    expect(policies.map((entry) => entry.metadata?.name).sort()).to.deep.equal([
      'vgpu-warden-gpu-pods',
      'vgpu-warden-identity-node-updates',
      'vgpu-warden-identity-pod-updates',
      'vgpu-warden-scheduler-owned-pod-metadata',
    ]);
    expect(bindings.map((binding) => binding.spec.policyName).sort()).to.deep.equal(
      policies.map((entry) => entry.metadata?.name).sort(),
    );
    for (const binding of bindings) {
      expect(binding.spec.validationActions, binding.metadata?.name).to.deep.equal(['Deny']);
      // No params (see the file's header for why) and no narrowing: the whole policy applies.
      expect(binding.spec.paramRef, binding.metadata?.name).to.equal(undefined);
      expect(binding.spec.matchResources, binding.metadata?.name).to.equal(undefined);
    }
  });

  it('fails closed and refuses with a Forbidden reason and a message from every validation', () => {
    for (const entry of policies) {
      const name = entry.metadata?.name ?? '';
      expect(entry.apiVersion, name).to.equal('admissionregistration.k8s.io/v1');
      expect(entry.spec?.failurePolicy, name).to.equal('Fail');
      expect(entry.spec?.paramKind, name).to.equal(undefined);
      for (const validation of entry.spec?.validations ?? []) {
        expect(validation.reason, `${name}: ${validation.expression}`).to.equal('Forbidden');
        expect(validation.message ?? validation.messageExpression, `${name}: ${validation.expression}`).to.be.a(
          'string',
        ).and.not.empty;
      }
    }
  });

  it('starts every policy with the same configuration variables, so one kustomize patch configures them all', () => {
    const first = policies[0]!.spec?.variables?.slice(0, CONFIG_VARIABLES.length);
    for (const entry of policies) {
      const head = entry.spec?.variables?.slice(0, CONFIG_VARIABLES.length);
      expect(
        head?.map((variable) => variable.name),
        entry.metadata?.name,
      ).to.deep.equal([...CONFIG_VARIABLES]);
      expect(head, entry.metadata?.name).to.deep.equal(first);
    }
    expect(policyConfig(policies[0]!)).to.deep.equal({
      wardenUsers: ['system:serviceaccount:vgpu-warden:vgpu-warden'],
      // HAMi's chart: ServiceAccount <fullname>-device-plugin, installed as release "hami" in kube-system.
      devicePluginUsers: ['system:serviceaccount:kube-system:hami-device-plugin'],
      schedulerName: 'hami-scheduler',
    });
  });

  it('names the ServiceAccount vgpu-warden serve runs as and the scheduler profile of the shipped kube-scheduler', () => {
    const config = policyConfig(policies[0]!);
    const deployment = findObject(objects, 'Deployment', 'vgpu-warden');
    const namespace = deployment.metadata?.namespace ?? '';
    expect(config.wardenUsers).to.include(
      `system:serviceaccount:${namespace}:${deployment.spec?.template.spec?.serviceAccountName ?? 'default'}`,
    );
    const schedulerConfig = findObject(objects, 'ConfigMap', 'vgpu-warden-scheduler-config');
    const profiles = loadYaml<{ profiles: { schedulerName: string }[] }>(
      schedulerConfig.data?.['config.yaml'] ?? '',
    ).profiles;
    expect(profiles.map((profile) => profile.schedulerName)).to.deep.equal([config.schedulerName]);
    const env =
      deployment.spec?.template.spec?.containers.find((container) => container.name === 'vgpu-warden')?.env ?? [];
    expect(env.find((variable) => variable.name === 'SCHEDULER_NAME')?.value ?? 'hami-scheduler').to.equal(
      config.schedulerName,
    );
  });

  it('treats as GPU pods what the webhook and the extender do, and guards the annotations the webhook guards', () => {
    const gpuPods = policy('vgpu-warden-gpu-pods');
    const detection =
      gpuPods.spec?.matchConditions?.find((condition) => condition.name === 'requests-gpu-shares')?.expression ?? '';
    const bounds = gpuPods.spec?.variables?.find((variable) => variable.name === 'shareBounds')?.expression ?? '';
    const webhook = findObject(objects, 'MutatingWebhookConfiguration', 'vgpu-warden').webhooks?.find(
      (entry) => entry.name === 'create.pods.vgpu-warden.io',
    );
    const webhookDetection = webhook?.matchConditions?.[0]?.expression ?? '';
    const quoted = (text: string) => [...text.matchAll(/'(nvidia\.com\/[a-z-]+)'/g)].map((match) => match[1]);
    expect(new Set(quoted(detection))).to.deep.equal(new Set(GPU_RESOURCES));
    expect(new Set(quoted(bounds))).to.deep.equal(new Set(GPU_RESOURCES));
    expect(new Set(quoted(webhookDetection))).to.deep.equal(new Set(GPU_RESOURCES));
    const owned =
      policy('vgpu-warden-scheduler-owned-pod-metadata').spec?.variables?.find(
        (variable) => variable.name === 'changedAnnotations',
      )?.expression ?? '';
    const prefixes = [...owned.matchAll(/startsWith\('([^']+)'\)/g)].map((match) => match[1]!);
    expect(new Set(prefixes)).to.deep.equal(new Set(['hami.io/vgpu-', 'hami.io/bind-']));
    for (const prefix of prefixes) expect(isSchedulerOwnedAnnotation(`${prefix}x`), prefix).to.equal(true);
  });

  it('has a Warn component that turns every binding to [Warn, Audit] and changes nothing else', () => {
    const base = objects.map(({ object }) => object);
    const { objects: rendered, matched } = applyComponent(base, resolve(MANIFESTS_DIR, 'components', 'admission-warn'));
    expect(matched).to.deep.equal([bindings.length]);
    rendered.forEach((object, index) => {
      if (object.kind !== 'ValidatingAdmissionPolicyBinding') {
        expect(object, `${object.kind ?? ''} ${object.metadata?.name ?? ''}`).to.deep.equal(base[index]);
        return;
      }
      const { spec, ...rest } = object as { spec: Record<string, unknown> };
      const { spec: baseSpec, ...baseRest } = base[index] as { spec: Record<string, unknown> };
      expect(spec).to.deep.equal({ ...baseSpec, validationActions: ['Warn', 'Audit'] });
      expect(rest).to.deep.equal(baseRest);
    });
  });
});
