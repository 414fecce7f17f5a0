import { expect } from 'chai';
import {
  isLockOwnedBy,
  LockParseError,
  MemoryApiError,
  MemoryPluginApi,
  NodeLockReleaseError,
  parseNodeLock,
  releaseNodeLock,
} from '../../src/hami-plugin/index.js';

const timing = { sleep: () => Promise.resolve(), random: () => 0.5 };
const podA = { namespace: 'ns', name: 'pod-a' };

function patches(api: MemoryPluginApi): number {
  return api.calls.filter((call) => call.startsWith('patchNodeLock')).length;
}

describe('HAMi stand-in: node lock as the device plugin sees it (§1.1, §1.5)', () => {
  describe('parseNodeLock', () => {
    it('reads the current format and the legacy bare timestamp', () => {
      expect(parseNodeLock('2026-08-01T06:00:00Z,ns,pod-a')).to.deep.include({
        format: 'current',
        namespace: 'ns',
        name: 'pod-a',
      });
      const legacy = parseNodeLock('2026-07-03T15:35:10+08:00');
      expect(legacy.format).to.equal('legacy');
      expect(legacy.time.toISOString()).to.equal('2026-07-03T07:35:10.000Z');
    });

    it('refuses what HAMi refuses, with its messages', () => {
      expect(() => parseNodeLock('lock')).to.throw(LockParseError, 'parsing time "lock"');
      expect(() => parseNodeLock('2026-08-01T06:00:00Z,ns')).to.throw(
        LockParseError,
        'malformed lock annotation: expected 3 parts, got 2 from 2026-08-01T06:00:00Z,ns',
      );
      expect(() => parseNodeLock('2026-08-01T06:00:00Z,ns,a,b')).to.throw(LockParseError, 'expected 3 parts, got 4');
      expect(() => parseNodeLock('yesterday,ns,pod-a')).to.throw(LockParseError);
    });
  });

  it("owner test is HAMi's suffix match: a re-stamp of the same name is owned, a longer name is not", () => {
    expect(isLockOwnedBy('2026-08-01T06:00:00Z,ns,pod-a', podA)).to.equal(true);
    expect(isLockOwnedBy('2026-08-01T06:00:09Z,ns,pod-a', podA)).to.equal(true);
    expect(isLockOwnedBy('2026-08-01T06:00:00Z,ns,pod-ab', podA)).to.equal(false);
    expect(isLockOwnedBy('2026-08-01T06:00:00Z,ns,x-pod-a', podA)).to.equal(false);
    expect(isLockOwnedBy('2026-08-01T06:00:00Z', podA)).to.equal(false);
  });

  describe('releaseNodeLock with the owner check on (nodelock_test.go cases 3, 4, 5, 10)', () => {
    let api: MemoryPluginApi;
    beforeEach(() => {
      api = new MemoryPluginApi();
      api.addNode('n');
    });

    it('no lock: nothing to do; the node missing is an error', async () => {
      expect(await releaseNodeLock(api, 'n', podA, timing)).to.equal('not-locked');
      const error: unknown = await releaseNodeLock(api, 'missing', podA, timing).catch((caught: unknown) => caught);
      expect(error).to.be.instanceOf(MemoryApiError);
    });

    it("keeps another pod's lock silently; removes its own and a legacy one", async () => {
      api.setLock('n', '2026-08-01T06:00:00Z,ns,pod-b');
      expect(await releaseNodeLock(api, 'n', podA, timing)).to.equal('not-owner');
      expect(api.lock('n')).to.equal('2026-08-01T06:00:00Z,ns,pod-b');
      api.setLock('n', '2026-08-01T06:00:00Z,ns,pod-a');
      expect(await releaseNodeLock(api, 'n', podA, timing)).to.equal('released');
      expect(api.lock('n')).to.equal(undefined);
      api.setLock('n', '2026-07-03T15:35:10+08:00');
      expect(await releaseNodeLock(api, 'n', podA, timing)).to.equal('released');
      expect(api.lock('n')).to.equal(undefined);
    });

    it('after a 409, keeps the lock pod-b took meanwhile (1 patch)', async () => {
      api.setLock('n', '2026-08-01T06:00:00Z,ns,pod-a');
      api.before = (call) => {
        if (call === 'patchNodeLock' && patches(api) === 1) api.setLock('n', '2026-08-01T06:00:01Z,ns,pod-b');
      };
      expect(await releaseNodeLock(api, 'n', podA, timing)).to.equal('not-owner');
      expect(api.lock('n')).to.equal('2026-08-01T06:00:01Z,ns,pod-b');
      expect(patches(api)).to.equal(1);
    });

    it('after a 409, keeps a legacy lock that was replaced by another legacy value (1 patch)', async () => {
      api.setLock('n', '2026-08-01T06:00:00Z');
      api.before = (call) => {
        if (call === 'patchNodeLock' && patches(api) === 1) api.setLock('n', '2026-08-01T06:00:01Z');
      };
      expect(await releaseNodeLock(api, 'n', podA, timing)).to.equal('replaced');
      expect(api.lock('n')).to.equal('2026-08-01T06:00:01Z');
      expect(patches(api)).to.equal(1);
    });

    it("after a 409, releases the same pod's re-stamped lock on the second patch", async () => {
      api.setLock('n', '2026-08-01T13:00:00Z,ns,pod-a');
      api.before = (call) => {
        if (call === 'patchNodeLock' && patches(api) === 1) api.setLock('n', '2026-08-01T13:00:01Z,ns,pod-a');
      };
      expect(await releaseNodeLock(api, 'n', podA, timing)).to.equal('released');
      expect(api.lock('n')).to.equal(undefined);
      expect(patches(api)).to.equal(2);
    });

    it("gives up after 5 attempts with HAMi's message, sleeping the doubling backoff between them", async () => {
      api.setLock('n', '2026-08-01T06:00:00Z,ns,pod-a');
      api.before = (call) => {
        if (call === 'patchNodeLock') throw new MemoryApiError(500, 'etcd down');
      };
      const sleeps: number[] = [];
      const error: unknown = await releaseNodeLock(api, 'n', podA, {
        sleep: (ms) => {
          sleeps.push(ms);
          return Promise.resolve();
        },
        random: () => 0,
      }).catch((caught: unknown) => caught);
      expect(error).to.be.instanceOf(NodeLockReleaseError);
      expect((error as Error).message).to.equal(
        'failed to release node lock (node=n, retry strategy={Duration:100ms Factor:2 Jitter:0.5 Steps:5 Cap:0s}): HTTP 500: etcd down',
      );
      expect(patches(api)).to.equal(5);
      expect(sleeps).to.deep.equal([100, 200, 400, 800]);
    });
  });
});
