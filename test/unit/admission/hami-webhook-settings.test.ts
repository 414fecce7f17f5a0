import { expect } from 'chai';
import { podMutationConfig } from '../../../src/admission/mutation-config.js';
import {
  mutatePodOnCreate,
  type MutationDecision,
  type PodMutationConfig,
} from '../../../src/admission/pod-mutation.js';
import { loadConfig } from '../../../src/config/load.js';
import { settingsOf } from '../../../src/config/settings.js';
import { applyJsonPatch } from '../../support/apply-json-patch.js';

type Json = Record<string, unknown>;
interface PodLike {
  metadata: Json;
  spec: Json & { containers: Json[]; initContainers?: Json[] };
}

const BASE: PodMutationConfig = {
  schedulerName: 'hami-scheduler',
  overwriteDefaultScheduler: true,
  defaultGpuCount: 1,
};
const GPU = { limits: { 'nvidia.com/gpu': '1' } };

const ctr = (name: string, resources?: Json, env?: Json[]): Json => ({
  name,
  image: 'cuda',
  ...(resources ? { resources } : {}),
  ...(env ? { env } : {}),
});
const pod = (containers: Json[], spec: Json = {}): PodLike => ({
  metadata: { name: 'p', namespace: 'ns' },
  spec: { schedulerName: 'default-scheduler', containers, ...spec },
});

function apply(input: PodLike, config: PodMutationConfig): PodLike {
  const decision = mutatePodOnCreate(input, config);
  if (decision.kind === 'skip') return input;
  if (decision.kind !== 'patch') throw new Error(`expected a patch, got ${JSON.stringify(decision)}`);
  return applyJsonPatch(input, decision.ops);
}

/** Runs the webhook on its own output, as reinvocationPolicy IfNeeded does: it must add nothing. */
function expectIdempotent(input: PodLike, config: PodMutationConfig): PodLike {
  const once = apply(input, config);
  const again: MutationDecision = mutatePodOnCreate(once, config);
  if (again.kind === 'patch') expect(again.ops, 'second call').to.deep.equal([]);
  else expect(again.kind).to.equal('skip');
  return once;
}

const envOf = (container: Json | undefined) => container?.env;

describe("HAMi's webhook settings in the CREATE mutation", () => {
  it("builds the mutation config from the webhook settings with HAMi's defaults", () => {
    const config = podMutationConfig(loadConfig({}, {}, settingsOf(['webhook'])));
    expect(config).to.deep.include({ overwriteEnv: false, runtimeClassName: undefined, gpuCorePolicy: 'default' });
    // With the defaults a GPU pod gets no env and no runtime class, as under HAMi's chart defaults.
    const result = apply(pod([ctr('main', GPU), ctr('sidecar')]), config);
    expect(result.spec.runtimeClassName).to.equal(undefined);
    expect(result.spec.containers.map(envOf)).to.deep.equal([undefined, undefined]);
  });

  describe('overwriteEnv', () => {
    const on: PodMutationConfig = { ...BASE, overwriteEnv: true };

    it('sets NVIDIA_VISIBLE_DEVICES=none on the containers of a GPU pod that request no GPU, init containers included', () => {
      const input = pod([ctr('main', GPU), ctr('sidecar')], { initContainers: [ctr('setup')] });
      const result = expectIdempotent(input, on);
      expect(result.spec.containers[0]?.env).to.equal(undefined);
      expect(result.spec.containers[1]?.env).to.deep.equal([{ name: 'NVIDIA_VISIBLE_DEVICES', value: 'none' }]);
      expect(result.spec.initContainers?.[0]?.env).to.deep.equal([{ name: 'NVIDIA_VISIBLE_DEVICES', value: 'none' }]);
      expect(result.spec.schedulerName).to.equal('hami-scheduler');
    });

    it('patches a pod with no GPU at all only with the env, as HAMi does, leaving its scheduler alone', () => {
      const input = pod([ctr('web', undefined, [{ name: 'A', value: '1' }])]);
      const decision = mutatePodOnCreate(input, on);
      expect(decision).to.deep.equal({
        kind: 'patch',
        warnings: [],
        ops: [
          { op: 'add', path: '/spec/containers/0/env/-', value: { name: 'NVIDIA_VISIBLE_DEVICES', value: 'none' } },
        ],
      });
      expect(expectIdempotent(input, on).spec.schedulerName).to.equal('default-scheduler');
    });

    it("overrides the container's own later value, since the kubelet lets the last entry win", () => {
      const input = pod([
        ctr('main', GPU),
        ctr('sneaky', undefined, [
          { name: 'NVIDIA_VISIBLE_DEVICES', value: 'none' },
          { name: 'NVIDIA_VISIBLE_DEVICES', value: 'all' },
        ]),
      ]);
      const result = expectIdempotent(input, on);
      expect(result.spec.containers[1]?.env).to.deep.equal([
        { name: 'NVIDIA_VISIBLE_DEVICES', value: 'none' },
        { name: 'NVIDIA_VISIBLE_DEVICES', value: 'all' },
        { name: 'NVIDIA_VISIBLE_DEVICES', value: 'none' },
      ]);
    });

    it('adds nothing when off (the default), and never touches pods of another scheduler', () => {
      expect(mutatePodOnCreate(pod([ctr('web')]), BASE)).to.deep.equal({ kind: 'skip', reason: 'pod requests no GPU' });
      expect(apply(pod([ctr('main', GPU), ctr('sidecar')]), BASE).spec.containers[1]?.env).to.equal(undefined);
      expect(mutatePodOnCreate(pod([ctr('web')], { schedulerName: 'volcano' }), on).kind).to.equal('skip');
      expect(mutatePodOnCreate(pod([ctr('main', GPU), ctr('web')], { schedulerName: 'volcano' }), on).kind).to.equal(
        'skip',
      );
    });

    it('counts a container whose GPU count is defaulted from a memory request as a GPU container', () => {
      const result = expectIdempotent(pod([ctr('main', { limits: { 'nvidia.com/gpumem': '1024' } })]), on);
      expect(result.spec.containers[0]?.env).to.equal(undefined);
      const off = expectIdempotent(pod([ctr('main', { limits: { 'nvidia.com/gpumem': '1024' } })]), {
        ...on,
        defaultGpuCount: 0,
      });
      expect(off.spec.containers[0]?.env).to.deep.equal([{ name: 'NVIDIA_VISIBLE_DEVICES', value: 'none' }]);
    });
  });

  describe('runtimeClassName', () => {
    const set: PodMutationConfig = { ...BASE, runtimeClassName: 'nvidia' };

    it('sets spec.runtimeClassName on a GPU pod that names none', () => {
      expect(expectIdempotent(pod([ctr('main', GPU)]), set).spec.runtimeClassName).to.equal('nvidia');
      expect(expectIdempotent(pod([ctr('main', GPU)], { runtimeClassName: null }), set).spec.runtimeClassName).to.equal(
        'nvidia',
      );
    });

    it("keeps the pod's own runtime class, and leaves non-GPU pods and unset or empty settings alone", () => {
      expect(
        expectIdempotent(pod([ctr('main', GPU)], { runtimeClassName: 'kata' }), set).spec.runtimeClassName,
      ).to.equal('kata');
      expect(mutatePodOnCreate(pod([ctr('web')]), set).kind).to.equal('skip');
      expect(expectIdempotent(pod([ctr('main', GPU)]), BASE).spec.runtimeClassName).to.equal(undefined);
      expect(
        expectIdempotent(pod([ctr('main', GPU)]), { ...BASE, runtimeClassName: '' }).spec.runtimeClassName,
      ).to.equal(undefined);
    });
  });

  describe('gpuCorePolicy', () => {
    for (const policy of ['force', 'disable'] as const) {
      it(`writes GPU_CORE_UTILIZATION_POLICY=${policy} into GPU containers only`, () => {
        const input = pod([ctr('main', GPU, [{ name: 'A', value: '1' }]), ctr('sidecar')], {
          initContainers: [ctr('warm', GPU)],
        });
        const result = expectIdempotent(input, { ...BASE, gpuCorePolicy: policy });
        expect(result.spec.containers[0]?.env).to.deep.equal([
          { name: 'A', value: '1' },
          { name: 'GPU_CORE_UTILIZATION_POLICY', value: policy },
        ]);
        expect(result.spec.initContainers?.[0]?.env).to.deep.equal([
          { name: 'GPU_CORE_UTILIZATION_POLICY', value: policy },
        ]);
        expect(result.spec.containers[1]?.env).to.equal(undefined);
      });
    }

    it("writes nothing for HAMi's default policy, and overrides a different value the container set", () => {
      expect(
        expectIdempotent(pod([ctr('main', GPU)]), { ...BASE, gpuCorePolicy: 'default' }).spec.containers[0]?.env,
      ).to.equal(undefined);
      const own = pod([ctr('main', GPU, [{ name: 'GPU_CORE_UTILIZATION_POLICY', value: 'disable' }])]);
      expect(expectIdempotent(own, { ...BASE, gpuCorePolicy: 'force' }).spec.containers[0]?.env).to.deep.equal([
        { name: 'GPU_CORE_UTILIZATION_POLICY', value: 'disable' },
        { name: 'GPU_CORE_UTILIZATION_POLICY', value: 'force' },
      ]);
      const fromSecret = pod([
        ctr('main', GPU, [
          { name: 'GPU_CORE_UTILIZATION_POLICY', value: 'force', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } },
        ]),
      ]);
      // A valueFrom entry is not a literal `force`: ours goes after it.
      expect(apply(fromSecret, { ...BASE, gpuCorePolicy: 'force' }).spec.containers[0]?.env).to.have.length(2);
    });
  });

  it('applies all three together in one idempotent patch', () => {
    const config: PodMutationConfig = {
      ...BASE,
      overwriteEnv: true,
      runtimeClassName: 'nvidia',
      gpuCorePolicy: 'force',
    };
    const input = pod([ctr('main', { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/priority': '1' } }), ctr('log')]);
    const result = expectIdempotent(input, config);
    expect(result.spec.runtimeClassName).to.equal('nvidia');
    expect(result.spec.containers[0]?.env).to.deep.equal([
      { name: 'CUDA_TASK_PRIORITY', value: '1' },
      { name: 'GPU_CORE_UTILIZATION_POLICY', value: 'force' },
    ]);
    expect(result.spec.containers[1]?.env).to.deep.equal([{ name: 'NVIDIA_VISIBLE_DEVICES', value: 'none' }]);
  });
});
