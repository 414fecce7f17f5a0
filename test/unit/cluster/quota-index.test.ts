import type { V1Pod, V1ResourceQuota } from '@kubernetes/client-node';
import { expect } from 'chai';
import { budgetKey, NO_NAMESPACE_USE, quotaExceeded, type NamespaceUse } from '../../../src/devices/gpu-quota.js';
import { QuotaIndex, type NamespaceUseOf } from '../../../src/cluster/quota-index.js';

/**
 * A ResourceQuota counts and holds back only the pods its scopes match (kube-apiserver's quota
 * admission): before, every GPU limit of a namespace applied to every pod of it.
 */

function quota(
  name: string,
  hard: Record<string, string>,
  scoping: Partial<NonNullable<V1ResourceQuota['spec']>> = {},
): V1ResourceQuota {
  return { metadata: { name, namespace: 'team-a' }, spec: { hard, ...scoping } };
}

function gpuPod(name: string, spec: Partial<NonNullable<V1Pod['spec']>> = {}): V1Pod {
  return {
    metadata: { name, namespace: 'team-a', uid: name },
    spec: {
      containers: [{ name: 'app', resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '4000' } } }],
      ...spec,
    },
  };
}

const highOnly = {
  scopeSelector: { matchExpressions: [{ scopeName: 'PriorityClass', operator: 'In', values: ['high'] }] },
};

/** The namespace's other GPU pods, each using `memoryMiB`, summed as the state store sums them. */
function usage(pods: readonly [V1Pod, number][]): NamespaceUseOf {
  return (counted) =>
    pods
      .filter(([pod]) => counted === undefined || counted(pod))
      .reduce<NamespaceUse>(
        (sum, [, memoryMiB]) => ({ gpus: sum.gpus + 1, memoryMiB: sum.memoryMiB + memoryMiB, cores: sum.cores }),
        { ...NO_NAMESPACE_USE },
      );
}

function index(...quotas: V1ResourceQuota[]): QuotaIndex {
  const quotaIndex = new QuotaIndex();
  quotaIndex.apply(quotas.map((object) => ({ type: 'add' as const, object })));
  return quotaIndex;
}

describe('cluster: QuotaIndex, with ResourceQuota scopes', () => {
  const running: [V1Pod, number][] = [
    [gpuPod('high-1', { priorityClassName: 'high' }), 6000],
    [gpuPod('low-1', { priorityClassName: 'low' }), 5000],
  ];

  it('a PriorityClass-scoped GPU quota does not limit a pod of another priority class', () => {
    const quotas = index(quota('high-gpu', { 'limits.nvidia.com/gpumem': '8000' }, highOnly));
    expect(quotas.budget('team-a', gpuPod('low-2', { priorityClassName: 'low' }), usage(running))).to.equal(undefined);
    expect(quotas.budget('team-a', gpuPod('plain'), usage(running))).to.equal(undefined);
  });

  it('holds a pod of its class, counting only the pods of that class', () => {
    const quotas = index(quota('high-gpu', { 'limits.nvidia.com/gpumem': '8000' }, highOnly));
    const budget = quotas.budget('team-a', gpuPod('high-2', { priorityClassName: 'high' }), usage(running));
    expect(budget?.limits).to.deep.equal([
      { quota: 'high-gpu', field: 'memoryMiB', limit: 8000, used: { gpus: 1, memoryMiB: 6000, cores: 0 } },
    ]);
    expect(budget?.used).to.deep.equal({ gpus: 2, memoryMiB: 11000, cores: 0 });
    if (budget === undefined) return;
    // 6000 of the high class + 2000 fits 8000, though the namespace as a whole uses 11000.
    expect(quotaExceeded(budget, { gpus: 1, memoryMiB: 2000, cores: 0 })).to.equal(undefined);
    expect(quotaExceeded(budget, { gpus: 1, memoryMiB: 4000, cores: 0 })).to.equal(
      'ResourceQuota team-a/high-gpu: limits.nvidia.com/gpumem 6000 used + 4000 requested > 8000',
    );
  });

  it('an unscoped quota of the same namespace still counts and holds every pod', () => {
    const quotas = index(
      quota('high-gpu', { 'limits.nvidia.com/gpumem': '8000' }, highOnly),
      quota('all-gpu', { 'limits.nvidia.com/gpumem': '12000' }),
    );
    const low = quotas.budget('team-a', gpuPod('low-2', { priorityClassName: 'low' }), usage(running));
    expect(low?.limits).to.deep.equal([{ quota: 'all-gpu', field: 'memoryMiB', limit: 12000 }]);
    if (low === undefined) return;
    expect(quotaExceeded(low, { gpus: 1, memoryMiB: 2000, cores: 0 })).to.contain(
      '11000 used + 2000 requested > 12000',
    );
    const high = quotas.budget('team-a', gpuPod('high-2', { priorityClassName: 'high' }), usage(running));
    expect(high?.limits.map((limit) => limit.quota).sort()).to.deep.equal(['all-gpu', 'high-gpu']);
  });

  it('Terminating, NotTerminating, BestEffort and NotBestEffort scopes pick their pods', () => {
    const quotas = index(
      quota('batch', { 'limits.nvidia.com/gpu': '1' }, { scopes: ['Terminating'] }),
      quota('serving', { 'limits.nvidia.com/gpu': '2' }, { scopes: ['NotTerminating', 'NotBestEffort'] }),
      quota('best-effort', { 'limits.nvidia.com/gpu': '3', pods: '10' }, { scopes: ['BestEffort'] }),
    );
    const names = (spec: Partial<NonNullable<V1Pod['spec']>>): string[] =>
      (quotas.budget('team-a', gpuPod('new', spec), usage([]))?.limits ?? []).map((limit) => limit.quota).sort();
    expect(names({ activeDeadlineSeconds: 3600 })).to.deep.equal(['batch', 'best-effort']);
    expect(names({})).to.deep.equal(['best-effort']);
    expect(
      names({
        containers: [{ name: 'app', resources: { requests: { cpu: '1' }, limits: { 'nvidia.com/gpu': '1' } } }],
      }),
    ).to.deep.equal(['serving']);
  });

  it('the budget key tells apart two scoped uses of one namespace use', () => {
    const quotas = index(quota('high-gpu', { 'limits.nvidia.com/gpumem': '8000' }, highOnly));
    const pod = gpuPod('high-2', { priorityClassName: 'high' });
    const before = quotas.budget('team-a', pod, usage(running));
    const after = quotas.budget(
      'team-a',
      pod,
      usage([
        [gpuPod('high-1', { priorityClassName: 'high' }), 7000],
        [gpuPod('low-1', { priorityClassName: 'low' }), 4000],
      ]),
    );
    expect(before?.used).to.deep.equal(after?.used);
    expect(budgetKey(before)).to.not.equal(budgetKey(after));
  });

  it('limits() still lists every GPU limit of the namespace, scoped or not', () => {
    const quotas = index(
      quota('high-gpu', { 'limits.nvidia.com/gpumem': '8000' }, highOnly),
      quota('all-gpu', { 'limits.nvidia.com/gpu': '4' }),
    );
    expect(
      quotas
        .limits('team-a')
        .map((limit) => limit.quota)
        .sort(),
    ).to.deep.equal(['all-gpu', 'high-gpu']);
  });
});
