import { expect } from 'chai';
import {
  budgetKey,
  namespaceUseOf,
  quotaExceeded,
  quotaLimits,
  RESOURCE_QUOTA_NOT_FIT,
  tightestLimits,
  type QuotaBudget,
} from '../../../src/devices/gpu-quota.js';

const quota = (name: string, hard: Record<string, unknown>) => ({
  metadata: { name, namespace: 'team-a' },
  spec: { hard },
});

describe('devices: namespace GPU quota (HAMi pkg/device/quota.go)', () => {
  describe('quotaLimits', () => {
    it('reads limits.nvidia.com/gpumem, gpucores and gpu, in canonical quantity form, and ignores every other key', () => {
      const { limits, problems } = quotaLimits(
        quota('gpu', {
          'limits.nvidia.com/gpumem': '8k',
          'limits.nvidia.com/gpucores': '150',
          'limits.nvidia.com/gpu': '2',
          'requests.nvidia.com/gpu': '4',
          'limits.cpu': '8',
          pods: '10',
        }),
        1,
      );
      expect(problems).to.deep.equal([]);
      expect(limits).to.have.deep.members([
        { quota: 'gpu', field: 'memoryMiB', limit: 8000 },
        { quota: 'gpu', field: 'cores', limit: 150 },
        { quota: 'gpu', field: 'gpus', limit: 2 },
      ]);
    });

    it('scales the memory limit by memoryFactor above 1, as requests are, and only memory', () => {
      const { limits } = quotaLimits(
        quota('gpu', { 'limits.nvidia.com/gpumem': '100', 'limits.nvidia.com/gpucores': '100' }),
        4,
      );
      expect(limits).to.have.deep.members([
        { quota: 'gpu', field: 'memoryMiB', limit: 400 },
        { quota: 'gpu', field: 'cores', limit: 100 },
      ]);
    });

    it('ignores a value that is not a whole number and says which, clipped', () => {
      const { limits, problems } = quotaLimits(
        quota('gpu', { 'limits.nvidia.com/gpumem': '1500m', 'limits.nvidia.com/gpu': 'x'.repeat(5000) }),
        1,
      );
      expect(limits).to.deep.equal([]);
      expect(problems).to.have.length(2);
      expect(problems[0]).to.equal(
        'ResourceQuota team-a/gpu: limits.nvidia.com/gpumem 1500m is not a whole number; ignored',
      );
      expect(problems[1]?.length).to.be.below(200);
    });

    it('keeps an explicit 0 (it blocks) and clamps a limit no int32 request can reach', () => {
      const { limits } = quotaLimits(
        quota('gpu', { 'limits.nvidia.com/gpu': '0', 'limits.nvidia.com/gpumem': '9E' }),
        1,
      );
      expect(limits).to.have.deep.members([
        { quota: 'gpu', field: 'gpus', limit: 0 },
        { quota: 'gpu', field: 'memoryMiB', limit: Number.MAX_SAFE_INTEGER },
      ]);
    });
  });

  describe('quotaExceeded', () => {
    const budget = (used: QuotaBudget['used'], limits: QuotaBudget['limits']): QuotaBudget => ({
      namespace: 'team-a',
      used,
      limits,
    });

    it('allows up to the limit and names the quota, key and numbers past it', () => {
      const b = budget({ gpus: 1, memoryMiB: 6000, cores: 0 }, [
        { quota: 'gpu-quota', field: 'memoryMiB', limit: 8000 },
      ]);
      expect(quotaExceeded(b, { gpus: 1, memoryMiB: 2000, cores: 0 })).to.equal(undefined);
      expect(quotaExceeded(b, { gpus: 1, memoryMiB: 2001, cores: 0 })).to.equal(
        'ResourceQuota team-a/gpu-quota: limits.nvidia.com/gpumem 6000 used + 2001 requested > 8000',
      );
    });

    it('enforces every ResourceQuota of the namespace, not just the last one seen (HAMi keeps one)', () => {
      const b = budget({ gpus: 0, memoryMiB: 0, cores: 0 }, [
        { quota: 'loose', field: 'gpus', limit: 8 },
        { quota: 'tight', field: 'gpus', limit: 1 },
      ]);
      expect(quotaExceeded(b, { gpus: 2, memoryMiB: 0, cores: 0 })).to.match(
        /^ResourceQuota team-a\/tight: limits\.nvidia\.com\/gpu 0 used \+ 2 requested > 1$/,
      );
    });

    it('blocks on an explicit 0, but never refuses a resource the pod does not add to', () => {
      const b = budget({ gpus: 3, memoryMiB: 0, cores: 500 }, [{ quota: 'q', field: 'cores', limit: 0 }]);
      expect(quotaExceeded(b, { gpus: 1, memoryMiB: 100, cores: 1 })).to.contain(
        'limits.nvidia.com/gpucores 500 used + 1 requested > 0',
      );
      expect(quotaExceeded(b, { gpus: 1, memoryMiB: 100, cores: 0 })).to.equal(undefined);
    });
  });

  it('namespaceUseOf sums shares, memory and cores over the GPUs', () => {
    expect(
      namespaceUseOf(
        new Map([
          ['a', { slots: 2, memoryMiB: 3000, cores: 20 }],
          ['b', { slots: 1, memoryMiB: 1000, cores: 0 }],
        ]),
      ),
    ).to.deep.equal({ gpus: 3, memoryMiB: 4000, cores: 20 });
  });

  it('tightestLimits keeps the smallest limit per resource', () => {
    const tightest = tightestLimits([
      { quota: 'a', field: 'gpus', limit: 4 },
      { quota: 'b', field: 'gpus', limit: 2 },
      { quota: 'a', field: 'cores', limit: 50 },
    ]);
    expect([...tightest.entries()]).to.deep.equal([
      ['gpus', { quota: 'b', field: 'gpus', limit: 2 }],
      ['cores', { quota: 'a', field: 'cores', limit: 50 }],
    ]);
  });

  it("tightestLimits with the namespace's use keeps the limit with the least room left, a scoped limit against its own use", () => {
    const used = { gpus: 0, memoryMiB: 7000, cores: 0 };
    const scoped = {
      quota: 'high',
      field: 'memoryMiB' as const,
      limit: 4000,
      used: { gpus: 0, memoryMiB: 1000, cores: 0 },
    };
    const whole = { quota: 'all', field: 'memoryMiB' as const, limit: 8000 };
    expect(tightestLimits([scoped, whole], used).get('memoryMiB')).to.equal(whole);
    expect(tightestLimits([scoped, whole]).get('memoryMiB'), 'without the use: the smallest limit').to.equal(scoped);
    expect(
      tightestLimits([whole, { ...whole, quota: 'small', limit: 7500 }], { ...used, memoryMiB: 0 }).get('memoryMiB')
        ?.quota,
    ).to.equal('small');
  });

  it('budgetKey changes with the use and the limits, and is empty without a quota', () => {
    const base: QuotaBudget = {
      namespace: 'n',
      used: { gpus: 1, memoryMiB: 10, cores: 0 },
      limits: [{ quota: 'q', field: 'gpus', limit: 2 }],
    };
    expect(budgetKey(undefined)).to.equal('');
    expect(budgetKey(base)).to.not.equal(budgetKey({ ...base, used: { gpus: 2, memoryMiB: 10, cores: 0 } }));
    expect(budgetKey(base)).to.not.equal(budgetKey({ ...base, limits: [{ quota: 'q', field: 'gpus', limit: 3 }] }));
    expect(RESOURCE_QUOTA_NOT_FIT).to.equal('ResourceQuotaNotFit');
  });
});
