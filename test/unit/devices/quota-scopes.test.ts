import { expect } from 'chai';
import {
  isBestEffort,
  podMatchesScope,
  quotaScopeRequirements,
  scopesMatchPod,
  type ScopeRequirement,
} from '../../../src/devices/quota-scopes.js';

/** kube-apiserver's podMatchesScopeFunc and generic.Matches (pkg/quota/v1/evaluator/core/pods.go), scope by scope. */

type Json = Record<string, unknown>;

const gpuContainer = (resources: Json = { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '4000' } }): Json => ({
  name: 'app',
  resources,
});
function pod(spec: Json = {}, status?: Json): Json {
  return {
    metadata: { name: 'p', namespace: 'team-a' },
    spec: { containers: [gpuContainer()], ...spec },
    ...(status === undefined ? {} : { status }),
  };
}
const exists = (scopeName: string): ScopeRequirement => ({ scopeName, operator: 'Exists' });
const priority = (operator: string, ...values: string[]): ScopeRequirement => ({
  scopeName: 'PriorityClass',
  operator,
  values,
});

describe('devices: ResourceQuota scopes (kube-apiserver podMatchesScopeFunc)', () => {
  describe('Terminating and NotTerminating: spec.activeDeadlineSeconds', () => {
    const cases: [string, Json, boolean][] = [
      ['no deadline', {}, false],
      ['deadline 0', { activeDeadlineSeconds: 0 }, true],
      ['deadline 600', { activeDeadlineSeconds: 600 }, true],
      ['a negative deadline (refused by validation) is not one', { activeDeadlineSeconds: -1 }, false],
      ['null', { activeDeadlineSeconds: null }, false],
    ];
    for (const [name, spec, terminating] of cases) {
      it(`${name}: Terminating ${terminating}, NotTerminating ${!terminating}`, () => {
        expect(podMatchesScope(exists('Terminating'), pod(spec))).to.equal(terminating);
        expect(podMatchesScope(exists('NotTerminating'), pod(spec))).to.equal(!terminating);
      });
    }
  });

  describe('BestEffort and NotBestEffort: the QoS class, from cpu and memory only', () => {
    it('a GPU pod with no cpu or memory request or limit is BestEffort: GPUs do not count', () => {
      expect(isBestEffort(pod())).to.equal(true);
      expect(podMatchesScope(exists('BestEffort'), pod())).to.equal(true);
      expect(podMatchesScope(exists('NotBestEffort'), pod())).to.equal(false);
    });

    it('any positive cpu or memory, in requests or limits, of any container or init container, makes it NotBestEffort', () => {
      const cases: Json[] = [
        { containers: [gpuContainer({ requests: { cpu: '100m' }, limits: { 'nvidia.com/gpu': '1' } })] },
        { containers: [gpuContainer({ limits: { memory: '1Gi', 'nvidia.com/gpu': '1' } })] },
        {
          containers: [gpuContainer()],
          initContainers: [{ name: 'init', resources: { requests: { memory: '64Mi' } } }],
        },
      ];
      for (const spec of cases) {
        expect(isBestEffort(pod(spec)), JSON.stringify(spec)).to.equal(false);
        expect(podMatchesScope(exists('NotBestEffort'), pod(spec))).to.equal(true);
      }
    });

    it('zero quantities and other resources leave it BestEffort', () => {
      expect(
        isBestEffort(
          pod({
            containers: [
              gpuContainer({
                requests: { cpu: '0', memory: '0Mi', 'ephemeral-storage': '1Gi' },
                limits: { 'nvidia.com/gpu': '1' },
              }),
            ],
          }),
        ),
      ).to.equal(true);
    });

    it('pod-level resources, when the pod has them, decide instead of the containers', () => {
      expect(isBestEffort(pod({ resources: { requests: { cpu: '1' } } }))).to.equal(false);
      expect(isBestEffort(pod({ resources: {}, containers: [gpuContainer({ requests: { cpu: '1' } })] }))).to.equal(
        true,
      );
    });

    it('status.qosClass, which kube-apiserver sets at creation, is read first', () => {
      expect(
        isBestEffort(pod({ containers: [gpuContainer({ requests: { cpu: '1' } })] }, { qosClass: 'BestEffort' })),
      ).to.equal(true);
      expect(isBestEffort(pod({}, { qosClass: 'Burstable' }))).to.equal(false);
      expect(isBestEffort(pod({}, { qosClass: '' }))).to.equal(true);
    });
  });

  describe('PriorityClass: a label selector on PriorityClass=<spec.priorityClassName>', () => {
    const high = pod({ priorityClassName: 'high' });
    const low = pod({ priorityClassName: 'low' });
    const none = pod();
    const cases: [string, ScopeRequirement, boolean, boolean, boolean][] = [
      // requirement, high, low, none
      ['In [high]', priority('In', 'high'), true, false, false],
      ['In [high, low]', priority('In', 'high', 'low'), true, true, false],
      ['NotIn [high]: also a pod without a class', priority('NotIn', 'high'), false, true, true],
      ['Exists', priority('Exists'), true, true, false],
      ['DoesNotExist', priority('DoesNotExist'), false, false, true],
    ];
    for (const [name, requirement, matchesHigh, matchesLow, matchesNone] of cases) {
      it(name, () => {
        expect([high, low, none].map((each) => podMatchesScope(requirement, each))).to.deep.equal([
          matchesHigh,
          matchesLow,
          matchesNone,
        ]);
      });
    }

    it('a selector kube-apiserver cannot parse (refused with an error there) holds the pod: it matches', () => {
      expect(podMatchesScope(priority('In'), none)).to.equal(true);
      expect(podMatchesScope(priority('DoesNotExist', 'high'), high)).to.equal(true);
      expect(podMatchesScope(priority('Gt', '1'), high)).to.equal(true);
      expect(podMatchesScope(priority('NotIn', 'not a label value'), high)).to.equal(true);
      // Exists is answered before any parsing, values or not.
      expect(podMatchesScope(priority('Exists', 'whatever'), none)).to.equal(false);
    });
  });

  describe('CrossNamespacePodAffinity', () => {
    const term = (extra: Json): Json => ({
      topologyKey: 'kubernetes.io/hostname',
      labelSelector: { matchLabels: { app: 'x' } },
      ...extra,
    });
    const cases: [string, Json, boolean][] = [
      ['no affinity', {}, false],
      [
        'a same-namespace pod affinity term',
        { podAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term({})] } },
        false,
      ],
      [
        'required pod affinity naming namespaces',
        { podAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term({ namespaces: ['other'] })] } },
        true,
      ],
      [
        'required pod affinity with an empty namespaceSelector (every namespace)',
        { podAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term({ namespaceSelector: {} })] } },
        true,
      ],
      [
        'preferred pod affinity naming namespaces',
        {
          podAffinity: {
            preferredDuringSchedulingIgnoredDuringExecution: [
              { weight: 1, podAffinityTerm: term({ namespaces: ['other'] }) },
            ],
          },
        },
        true,
      ],
      [
        'required anti-affinity with a namespaceSelector',
        {
          podAntiAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: [term({ namespaceSelector: { matchLabels: { a: 'b' } } })],
          },
        },
        true,
      ],
      [
        'preferred anti-affinity naming namespaces',
        {
          podAntiAffinity: {
            preferredDuringSchedulingIgnoredDuringExecution: [
              { weight: 1, podAffinityTerm: term({ namespaces: ['x'] }) },
            ],
          },
        },
        true,
      ],
      [
        'an empty namespaces list',
        { podAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [term({ namespaces: [] })] } },
        false,
      ],
      [
        'node affinity only',
        { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [] } } },
        false,
      ],
    ];
    for (const [name, affinity, matches] of cases) {
      it(`${name}: ${matches}`, () => {
        expect(podMatchesScope(exists('CrossNamespacePodAffinity'), pod({ affinity }))).to.equal(matches);
      });
    }
  });

  it('a scope pods do not have (VolumeAttributesClass) or none at all matches no pod', () => {
    expect(podMatchesScope(exists('VolumeAttributesClass'), pod())).to.equal(false);
    expect(podMatchesScope({ operator: 'Exists' }, pod())).to.equal(false);
  });

  describe('a quota: spec.scopes as Exists, then scopeSelector, all of them', () => {
    it('reads scopes first, then the selector expressions', () => {
      const quota = {
        spec: {
          hard: {},
          scopes: ['NotTerminating'],
          scopeSelector: { matchExpressions: [{ scopeName: 'PriorityClass', operator: 'In', values: ['high'] }] },
        },
      };
      expect(quotaScopeRequirements(quota)).to.deep.equal([exists('NotTerminating'), priority('In', 'high')]);
      expect(quotaScopeRequirements({ spec: { hard: {} } })).to.deep.equal([]);
    });

    it('counts a pod only when every requirement matches; a quota without scopes counts every pod', () => {
      const requirements = quotaScopeRequirements({
        spec: {
          scopes: ['NotTerminating'],
          scopeSelector: { matchExpressions: [{ scopeName: 'PriorityClass', operator: 'In', values: ['high'] }] },
        },
      });
      expect(scopesMatchPod(requirements, pod({ priorityClassName: 'high' }))).to.equal(true);
      expect(scopesMatchPod(requirements, pod({ priorityClassName: 'high', activeDeadlineSeconds: 60 }))).to.equal(
        false,
      );
      expect(scopesMatchPod(requirements, pod({ priorityClassName: 'low' }))).to.equal(false);
      expect(scopesMatchPod([], pod({ priorityClassName: 'low', activeDeadlineSeconds: 60 }))).to.equal(true);
    });
  });
});
