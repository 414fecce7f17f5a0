import { expect } from 'chai';
import { escapePointerSegment } from '../../../src/admission/json-patch.js';
import { mutatePodOnCreate, type PodMutationConfig } from '../../../src/admission/pod-mutation.js';
import { applyJsonPatch } from '../../support/apply-json-patch.js';

const CONFIG: PodMutationConfig = {
  schedulerName: 'hami-scheduler',
  overwriteDefaultScheduler: true,
  defaultGpuCount: 1,
};

type Resources = { limits?: Record<string, string>; requests?: Record<string, string> };
interface PodSpecLike {
  schedulerName?: string;
  nodeName?: string;
  containers: Record<string, unknown>[];
  initContainers?: Record<string, unknown>[];
}
interface PodLike {
  metadata?: Record<string, unknown>;
  spec: PodSpecLike;
}

function pod(
  containers: Record<string, unknown>[],
  extra: Partial<PodSpecLike> = {},
  metadata: Record<string, unknown> = {},
): PodLike {
  return {
    metadata: { name: 'p', namespace: 'ns', ...metadata },
    spec: { schedulerName: 'default-scheduler', containers, ...extra },
  };
}

const ctr = (name: string, resources?: Resources, more: Record<string, unknown> = {}) => ({
  name,
  image: 'cuda',
  ...(resources ? { resources } : {}),
  ...more,
});

function mutated(input: PodLike, config = CONFIG): { result: PodLike; warnings: string[] } {
  const decision = mutatePodOnCreate(input, config);
  if (decision.kind !== 'patch') throw new Error(`expected a patch, got ${JSON.stringify(decision)}`);
  return { result: applyJsonPatch(input, decision.ops), warnings: decision.warnings };
}

const limitsOf = (p: PodLike, index = 0, list: 'containers' | 'initContainers' = 'containers') =>
  ((p.spec[list]?.[index]?.resources ?? {}) as Resources).limits;

describe('pod mutation on CREATE (HAMi NVIDIA rules)', () => {
  describe('GPU resources', () => {
    const table: { title: string; resources: Resources; limits: Record<string, string> }[] = [
      {
        title: 'a bare count becomes exclusive (gpucores 100)',
        resources: { limits: { 'nvidia.com/gpu': '1' } },
        limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpucores': '100' },
      },
      {
        title: 'count with gpumem keeps cores unset (shared)',
        resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '3000' } },
        limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '3000' },
      },
      {
        title: 'count with 100 % memory is exclusive',
        resources: { limits: { 'nvidia.com/gpu': '2', 'nvidia.com/gpumem-percentage': '100' } },
        limits: { 'nvidia.com/gpu': '2', 'nvidia.com/gpumem-percentage': '100', 'nvidia.com/gpucores': '100' },
      },
      {
        title: 'count with 50 % memory is shared',
        resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem-percentage': '50' } },
        limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem-percentage': '50' },
      },
      {
        title: 'explicit cores are kept',
        resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpucores': '30' } },
        limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpucores': '30' },
      },
      {
        title: 'only gpumem gets the default count',
        resources: { limits: { 'nvidia.com/gpumem': '2048' } },
        limits: { 'nvidia.com/gpumem': '2048', 'nvidia.com/gpu': '1' },
      },
      {
        title: 'only gpumem-percentage gets the default count',
        resources: { limits: { 'nvidia.com/gpumem-percentage': '25' } },
        limits: { 'nvidia.com/gpumem-percentage': '25', 'nvidia.com/gpu': '1' },
      },
      {
        title: 'only gpucores gets the default count and no extra cores',
        resources: { limits: { 'nvidia.com/gpucores': '50' } },
        limits: { 'nvidia.com/gpucores': '50', 'nvidia.com/gpu': '1' },
      },
      {
        title: 'a count given in requests is honoured',
        resources: { requests: { 'nvidia.com/gpu': '1' }, limits: { cpu: '1' } },
        limits: { cpu: '1', 'nvidia.com/gpucores': '100' },
      },
    ];
    for (const { title, resources, limits } of table) {
      it(title, () => {
        const { result } = mutated(pod([ctr('main', resources)]));
        expect(limitsOf(result)).to.deep.equal(limits);
        expect(result.spec.schedulerName).to.equal('hami-scheduler');
      });
    }

    it('creates resources and limits when the container has none to add to', () => {
      const input = pod([
        ctr('main', { limits: { 'nvidia.com/gpu': '1' } }),
        ctr('sidecar', { requests: { cpu: '1' } }),
      ]);
      input.spec.containers[1] = ctr('sidecar', undefined);
      input.spec.containers.push(ctr('third', { requests: { 'nvidia.com/gpu': '1' } }));
      const { result } = mutated(input);
      expect(limitsOf(result, 2)).to.deep.equal({ 'nvidia.com/gpucores': '100' });
      expect(result.spec.containers[1]).to.not.have.property('resources');
    });

    it('mutates init containers too, and puts their ops first', () => {
      const input = pod([ctr('main', { limits: { cpu: '1' } })], {
        initContainers: [ctr('warmup', { limits: { 'nvidia.com/gpumem': '1000' } })],
      });
      const decision = mutatePodOnCreate(input, CONFIG);
      expect(decision.kind).to.equal('patch');
      if (decision.kind !== 'patch') return;
      expect(decision.ops[0]?.path).to.match(/^\/spec\/initContainers\/0\//);
      expect(limitsOf(applyJsonPatch(input, decision.ops), 0, 'initContainers')).to.deep.equal({
        'nvidia.com/gpumem': '1000',
        'nvidia.com/gpu': '1',
      });
    });

    it('does not default a count when defaulting is off, and then the pod is not a GPU pod', () => {
      expect(
        mutatePodOnCreate(pod([ctr('main', { limits: { 'nvidia.com/gpumem': '2048' } })]), {
          ...CONFIG,
          defaultGpuCount: 0,
        }).kind,
      ).to.equal('skip');
    });

    it('explains every default it adds in a warning', () => {
      const { warnings } = mutated(
        pod([
          ctr('main', { limits: { 'nvidia.com/gpumem': '2048' } }),
          ctr('b', { limits: { 'nvidia.com/gpu': '1' } }),
        ]),
      );
      expect(warnings).to.have.length(2);
      expect(warnings[0]).to.include('container main').and.include('nvidia.com/gpu set to 1');
      expect(warnings[1]).to.include('container b').and.include('gpucores set to 100');
    });
  });

  describe('validation', () => {
    const percentages: [string, string][] = [
      ['101', ''],
      ['-1', ''],
      ['50.5', 'not a whole number; '],
      ['abc', 'not a Kubernetes quantity; '],
      ['1k', ''],
    ];
    for (const [value, why] of percentages) {
      it(`denies gpumem-percentage ${value} with HAMi's message, the value quoted`, () => {
        const decision = mutatePodOnCreate(
          pod([ctr('main', { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem-percentage': value } })]),
          CONFIG,
        );
        expect(decision).to.deep.equal({
          kind: 'deny',
          code: 400,
          message: `invalid nvidia.com/gpumem-percentage value "${value}" in container main: ${why}must be an integer between 0 and 100`,
        });
      });
    }

    it('denies gpucores outside 0..100', () => {
      expect(
        mutatePodOnCreate(
          pod([ctr('main', { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpucores': '150' } })]),
          CONFIG,
        ),
      ).to.deep.include({ kind: 'deny', code: 400 });
    });

    // What kube-apiserver refuses anyway, and what it admits but no card holds: denied with 400,
    // never patched into a pod that HAMi would then bind without a GPU.
    const unreadable: [Resources, string][] = [
      [
        { limits: { 'nvidia.com/gpu': 'abc' } },
        'invalid nvidia.com/gpu value "abc" in container main: not a Kubernetes quantity; must be an integer between 0 and 2147483647',
      ],
      [
        { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '-1' } },
        'invalid nvidia.com/gpumem value "-1" in container main: must be an integer between 0 and 2147483647',
      ],
      [
        { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1500m' } },
        'invalid nvidia.com/gpumem value "1500m" in container main: not a whole number; must be an integer between 0 and 2147483647',
      ],
      [
        { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '3Gi' } },
        'invalid nvidia.com/gpumem value "3Gi" in container main: must be an integer between 0 and 2147483647',
      ],
      [
        { limits: { 'nvidia.com/gpumem': '99999999999' } },
        'invalid nvidia.com/gpumem value "99999999999" in container main: must be an integer between 0 and 2147483647',
      ],
      [
        { limits: { 'nvidia.com/gpu': '2147483648' } },
        'invalid nvidia.com/gpu value "2147483648" in container main: must be an integer between 0 and 2147483647',
      ],
      [
        { requests: { 'nvidia.com/gpu': '1', 'nvidia.com/gpucores': '-5' } },
        'invalid nvidia.com/gpucores value "-5" in container main (requests): must be an integer between 0 and 100',
      ],
    ];
    for (const [resources, message] of unreadable) {
      it(`denies ${JSON.stringify(resources)} with 400, naming container and resource`, () => {
        expect(mutatePodOnCreate(pod([ctr('main', resources)]), CONFIG)).to.deep.equal({
          kind: 'deny',
          code: 400,
          message,
        });
      });
    }

    it('bounds gpumem by the memoryFactor it is multiplied by', () => {
      const config = { ...CONFIG, requestDefaults: { defaultMemoryMiB: 0, defaultCores: 0, memoryFactor: 1024 } };
      expect(
        mutatePodOnCreate(
          pod([ctr('main', { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '2097151' } })]),
          config,
        ).kind,
      ).to.equal('patch');
      expect(
        mutatePodOnCreate(
          pod([ctr('main', { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '2097152' } })]),
          config,
        ),
      ).to.deep.include({ kind: 'deny', code: 400 });
    });

    it('reads the forms kube-apiserver canonicalises to', () => {
      const { result } = mutated(
        pod([
          ctr('main', {
            limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem-percentage': '1e2', 'nvidia.com/priority': '1' },
          }),
        ]),
      );
      expect(limitsOf(result)).to.deep.include({ 'nvidia.com/gpucores': '100' });
      expect(mutated(pod([ctr('main', { limits: { 'nvidia.com/gpumem': '3k' } })])).result.spec.schedulerName).to.equal(
        'hami-scheduler',
      );
    });

    it('names the first unreadable share of a pod and counts the others, init containers first', () => {
      const decision = mutatePodOnCreate(
        pod(
          Array.from({ length: 1000 }, (_, index) => ctr(`c${index}`, { limits: { 'nvidia.com/gpu': 'x' } })),
          { initContainers: [ctr('prep', { limits: { 'nvidia.com/gpucores': '101' } })] },
        ),
        CONFIG,
      );
      expect(decision).to.deep.equal({
        kind: 'deny',
        code: 400,
        message:
          'invalid nvidia.com/gpucores value "101" in init container prep: must be an integer between 0 and 100 (and 1000 more)',
      });
    });

    it('clips names and values the pod author wrote', () => {
      const huge = 'n'.repeat(8 * 1024 * 1024);
      const decisions = [
        mutatePodOnCreate(pod([ctr(huge, { limits: { 'nvidia.com/gpu': huge } })]), CONFIG),
        mutatePodOnCreate(
          pod([ctr(huge, { limits: { 'nvidia.com/gpu': '1' } }, { securityContext: { privileged: true } })]),
          CONFIG,
        ),
        mutatePodOnCreate(pod([ctr('main', { limits: { 'nvidia.com/gpu': '1' } })], { nodeName: huge }), CONFIG),
        mutatePodOnCreate(pod([ctr('main', { limits: { 'nvidia.com/gpu': '1' } })], { schedulerName: huge }), CONFIG),
        mutatePodOnCreate(
          pod(
            [ctr('main', { limits: { 'nvidia.com/gpu': '1' } })],
            {},
            {
              annotations: Object.fromEntries(
                Array.from({ length: 1000 }, (_, index) => [`hami.io/vgpu-${index}${huge.slice(0, 10_000)}`, '']),
              ),
            },
          ),
          CONFIG,
        ),
        mutatePodOnCreate(
          pod([ctr('main', { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/priority': huge } })]),
          CONFIG,
        ),
      ];
      for (const decision of decisions) {
        const text = decision.kind === 'deny' ? decision.message : decision.kind === 'skip' ? decision.reason : '';
        expect(text).to.have.length.within(1, 600);
      }
      expect(decisions[4]).to.deep.include({ kind: 'deny', code: 403 });
      expect(decisions[4]?.kind === 'deny' && decisions[4].message).to.include('and 995 more');
    });

    it('turns nvidia.com/priority into its decimal value and refuses one that is not a whole number', () => {
      const { result } = mutated(pod([ctr('a', { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/priority': '1k' } })]));
      expect(result.spec.containers[0]?.env).to.deep.equal([{ name: 'CUDA_TASK_PRIORITY', value: '1000' }]);
      expect(
        mutatePodOnCreate(pod([ctr('a', { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/priority': '-1' } })]), CONFIG),
      ).to.deep.equal({
        kind: 'deny',
        code: 400,
        message: 'invalid nvidia.com/priority value "-1" in container a: must be an integer between 0 and 2147483647',
      });
    });

    it('denies a GPU pod with a privileged container, naming it (even a non-GPU sidecar)', () => {
      const decision = mutatePodOnCreate(
        pod([
          ctr('main', { limits: { 'nvidia.com/gpu': '1' } }),
          ctr('helper', undefined, { securityContext: { privileged: true } }),
        ]),
        CONFIG,
      );
      expect(decision).to.deep.equal({
        kind: 'deny',
        code: 403,
        message: 'container helper is privileged; privileged containers cannot share GPUs',
      });
    });

    it('allows a privileged non-GPU pod untouched', () => {
      expect(
        mutatePodOnCreate(pod([ctr('main', undefined, { securityContext: { privileged: true } })]), CONFIG).kind,
      ).to.equal('skip');
    });

    it('denies a GPU pod with spec.nodeName preset', () => {
      expect(
        mutatePodOnCreate(pod([ctr('main', { limits: { 'nvidia.com/gpu': '1' } })], { nodeName: 'n1' }), CONFIG),
      ).to.deep.include({ kind: 'deny', code: 403 });
    });

    for (const key of [
      'hami.io/vgpu-devices-to-allocate',
      'hami.io/vgpu-node',
      'hami.io/bind-phase',
      'hami.io/bind-time',
      'hami.io/mutex.lock',
    ]) {
      it(`denies a pod arriving with the scheduler-owned annotation ${key}`, () => {
        const decision = mutatePodOnCreate(
          pod([ctr('main', { limits: { 'nvidia.com/gpu': '1' } })], {}, { annotations: { [key]: 'forged' } }),
          CONFIG,
        );
        expect(decision.kind).to.equal('deny');
        expect(decision.kind === 'deny' && decision.message).to.include(key);
      });
    }

    it('allows other hami.io annotations such as use-gpuuuid', () => {
      expect(
        mutatePodOnCreate(
          pod(
            [ctr('main', { limits: { 'nvidia.com/gpu': '1' } })],
            {},
            { annotations: { 'nvidia.com/use-gpuuuid': 'GPU-1', 'hami.io/gpu-scheduler-policy': 'spread' } },
          ),
          CONFIG,
        ).kind,
      ).to.equal('patch');
    });

    it('denies a pod without containers and an object that is not a pod', () => {
      expect(mutatePodOnCreate(pod([]), CONFIG)).to.deep.include({ kind: 'deny', message: 'pod has no containers' });
      expect(mutatePodOnCreate('nonsense', CONFIG)).to.deep.include({ kind: 'deny', code: 400 });
      expect(mutatePodOnCreate({ spec: null }, CONFIG)).to.deep.include({ kind: 'deny', code: 400 });
    });
  });

  describe('priority and scheduler', () => {
    it('adds CUDA_TASK_PRIORITY from nvidia.com/priority, creating env when absent and appending otherwise', () => {
      const input = pod([
        ctr('a', { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/priority': '1' } }),
        ctr(
          'b',
          { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/priority': '0' } },
          { env: [{ name: 'X', value: '1' }] },
        ),
      ]);
      const { result } = mutated(input);
      expect(result.spec.containers[0]?.env).to.deep.equal([{ name: 'CUDA_TASK_PRIORITY', value: '1' }]);
      expect(result.spec.containers[1]?.env).to.deep.equal([
        { name: 'X', value: '1' },
        { name: 'CUDA_TASK_PRIORITY', value: '0' },
      ]);
    });

    it('keeps a CUDA_TASK_PRIORITY the user set', () => {
      const { result } = mutated(
        pod([
          ctr(
            'a',
            { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/priority': '1' } },
            { env: [{ name: 'CUDA_TASK_PRIORITY', value: '0' }] },
          ),
        ]),
      );
      expect(result.spec.containers[0]?.env).to.deep.equal([{ name: 'CUDA_TASK_PRIORITY', value: '0' }]);
    });

    it('overwrites default-scheduler by default, and leaves it when overwrite is off', () => {
      expect(mutated(pod([ctr('a', { limits: { 'nvidia.com/gpu': '1' } })])).result.spec.schedulerName).to.equal(
        'hami-scheduler',
      );
      expect(
        mutatePodOnCreate(pod([ctr('a', { limits: { 'nvidia.com/gpu': '1' } })]), {
          ...CONFIG,
          overwriteDefaultScheduler: false,
        }).kind,
      ).to.equal('skip');
    });

    it('leaves pods that target another scheduler alone', () => {
      const decision = mutatePodOnCreate(
        pod([ctr('a', { limits: { 'nvidia.com/gpu': '1' } })], { schedulerName: 'volcano' }),
        CONFIG,
      );
      expect(decision).to.deep.equal({
        kind: 'skip',
        reason: 'pod already has different scheduler assigned (volcano)',
      });
    });

    it('re-processes pods that already name our scheduler, adding schedulerName when absent', () => {
      const ours = pod([ctr('a', { limits: { 'nvidia.com/gpu': '1' } })], { schedulerName: 'hami-scheduler' });
      const decision = mutatePodOnCreate(ours, CONFIG);
      expect(decision.kind === 'patch' && decision.ops.some((op) => op.path === '/spec/schedulerName')).to.equal(false);
      const unnamed: PodLike = { spec: { containers: [ctr('a', { limits: { 'nvidia.com/gpu': '1' } })] } };
      expect(mutated(unnamed).result.spec.schedulerName).to.equal('hami-scheduler');
    });

    it('gives a pod label hami.io/webhook=ignore no effect: forged annotations are denied, GPU pods mutated', () => {
      const optOut = { labels: { 'hami.io/webhook': 'ignore' } };
      const forged = mutatePodOnCreate(
        pod(
          [ctr('a', { limits: { 'nvidia.com/gpu': '1' } })],
          {},
          { ...optOut, annotations: { 'hami.io/bind-phase': 'x' } },
        ),
        CONFIG,
      );
      expect(forged).to.deep.include({ kind: 'deny', code: 403 });
      const gpu = mutated(pod([ctr('a', { limits: { 'nvidia.com/gpu': '1' } })], {}, optOut));
      expect(gpu.result.spec.schedulerName).to.equal('hami-scheduler');
      expect(gpu.result.metadata?.labels).to.deep.equal(optOut.labels);
    });

    it('allows non-GPU pods with no patch', () => {
      expect(mutatePodOnCreate(pod([ctr('web', { limits: { cpu: '1', memory: '1Gi' } })]), CONFIG)).to.deep.equal({
        kind: 'skip',
        reason: 'pod requests no GPU',
      });
      expect(mutatePodOnCreate(pod([ctr('web', { limits: { 'nvidia.com/gpu': '0' } })]), CONFIG).kind).to.equal('skip');
    });
  });

  it('escapes ~ and / in JSON Pointer segments', () => {
    expect(escapePointerSegment('nvidia.com/gpu')).to.equal('nvidia.com~1gpu');
    expect(escapePointerSegment('a~b/c')).to.equal('a~0b~1c');
    const decision = mutatePodOnCreate(pod([ctr('a', { limits: { 'nvidia.com/gpu': '1' } })]), CONFIG);
    expect(decision.kind === 'patch' && decision.ops[0]?.path).to.equal(
      '/spec/containers/0/resources/limits/nvidia.com~1gpucores',
    );
  });
});
