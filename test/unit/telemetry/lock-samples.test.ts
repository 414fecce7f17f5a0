import { expect } from 'chai';
import { BIND_PHASE_ANNOTATION } from '../../../src/hami/wire.js';
import { parseLockValue } from '../../../src/lock/lock-value.js';
import { cachedLockSource, lockSampleOf, type LockedNodeView } from '../../../src/telemetry/lock-samples.js';

const NOW = new Date('2026-11-30T12:00:00Z');
const CONFIG = { bindGraceMs: 60_000, expireMs: 300_000 };

function view(
  locks: Record<string, string>,
  pods: Record<string, { nodeName?: string; bindPhase?: string }>,
): LockedNodeView {
  return {
    lockedNodes: () => Object.keys(locks),
    lockOf: (name) => (locks[name] === undefined ? undefined : { value: parseLockValue(locks[name]) }),
    pod: (namespace, name) => {
      const pod = pods[`${namespace}/${name}`];
      if (pod === undefined) return undefined;
      const annotations: Record<string, string> =
        pod.bindPhase === undefined ? {} : { [BIND_PHASE_ANNOTATION]: pod.bindPhase };
      return {
        metadata: { uid: 'u', annotations },
        spec: pod.nodeName === undefined ? {} : { nodeName: pod.nodeName },
        status: { phase: 'Pending' },
      };
    },
  };
}

describe('lock gauge samples', () => {
  it('classify every locked node from the cache with the lock rules, at the time of the scrape', () => {
    const source = cachedLockSource(
      view(
        {
          'gpu-held': '2026-11-30T11:59:50Z,ns,fresh',
          'gpu-stalled': '2026-11-30T11:50:00Z,ns,waiting',
          'gpu-gone': '2026-11-30T11:58:00Z,ns,missing',
          'gpu-garbage': 'not a lock',
        },
        {
          'ns/fresh': {},
          'ns/waiting': { nodeName: 'gpu-stalled', bindPhase: 'allocating' },
        },
      ),
      CONFIG,
      () => NOW.getTime(),
    );

    expect(source()).to.deep.equal([
      { node: 'gpu-held', ageSeconds: 10, state: 'held' },
      { node: 'gpu-stalled', ageSeconds: 600, state: 'stalled' },
      { node: 'gpu-gone', ageSeconds: 120, state: 'releasable' },
      { node: 'gpu-garbage', ageSeconds: undefined, state: 'releasable' },
    ]);
  });

  it('skip a node whose lock left the cache between the list and the read', () => {
    const base = view({ 'gpu-a': '2026-11-30T11:59:50Z,ns,p' }, {});
    const source = cachedLockSource({ ...base, lockedNodes: () => ['gpu-a', 'gpu-vanished'] }, CONFIG, () =>
      NOW.getTime(),
    );
    expect(source().map((sample) => sample.node)).to.deep.equal(['gpu-a']);
  });

  it('turn an inspection into a sample, and an unlocked node into nothing', () => {
    expect(
      lockSampleOf({
        node: 'gpu-a',
        resourceVersion: '1',
        raw: 'x',
        value: { kind: 'malformed', raw: 'x', problem: 'p' },
        owner: undefined,
        classification: { state: 'releasable', reason: 'malformed', ageMs: undefined },
      }),
    ).to.deep.equal({ node: 'gpu-a', ageSeconds: undefined, state: 'releasable' });
    expect(
      lockSampleOf({
        node: 'gpu-b',
        resourceVersion: '1',
        raw: undefined,
        value: undefined,
        owner: undefined,
        classification: undefined,
      }),
    ).to.equal(undefined);
  });
});
