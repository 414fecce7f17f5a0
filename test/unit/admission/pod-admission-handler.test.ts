import { expect } from 'chai';
import type { AdmissionRequest } from '../../../src/admission/admission-types.js';
import type { LockReleaser, StoredLocks } from '../../../src/admission/delete-release.js';
import { PodAdmissionHandler, type AdmissionOutcome } from '../../../src/admission/pod-admission-handler.js';
import { isOwnedBy, parseLockValue, type PodRef } from '../../../src/lock/lock-value.js';
import type { ConditionalReleaseResult } from '../../../src/lock/lock-events.js';

/**
 * Records release calls (the pod the DELETE is for, by name and UID); the real NodeLocks is
 * exercised by the integration tests.
 */
class RecordingReleaser implements LockReleaser {
  calls: { node: string; pod: PodRef; uid?: string }[] = [];
  constructor(
    private readonly behaviour: () => Promise<ConditionalReleaseResult> = () =>
      Promise.resolve({ outcome: 'released', node: 'n' }),
  ) {}
  releaseIfReleasable(
    node: string,
    _path: string,
    options: { deleted?: PodRef & { uid: string } },
  ): Promise<ConditionalReleaseResult> {
    const { namespace = '', name = '', uid } = options.deleted ?? {};
    this.calls.push({ node, pod: { namespace, name }, ...(uid === undefined ? {} : { uid }) });
    return this.behaviour();
  }
}

function handlerWith(locks: LockReleaser, deleteTimeoutMs = 1000, storedLocks?: StoredLocks) {
  const outcomes: AdmissionOutcome[] = [];
  const handler = new PodAdmissionHandler({
    mutation: { schedulerName: 'hami-scheduler', overwriteDefaultScheduler: true, defaultGpuCount: 1 },
    locks,
    deleteTimeoutMs,
    ...(storedLocks === undefined ? {} : { storedLocks }),
    onOutcome: (_request, outcome) => outcomes.push(outcome),
  });
  return { handler, outcomes };
}

const gpuPod = {
  metadata: { name: 'p', namespace: 'ns', uid: 'u-p' },
  spec: { containers: [{ name: 'c', resources: { limits: { 'nvidia.com/gpu': '1' } } }] },
};
const deleteRequest = (oldObject: unknown, extra: Partial<AdmissionRequest> = {}): AdmissionRequest => ({
  uid: 'del-1',
  operation: 'DELETE',
  kind: { kind: 'Pod' },
  name: 'p',
  namespace: 'ns',
  oldObject,
  dryRun: false,
  ...extra,
});

describe('PodAdmissionHandler', () => {
  it('patches a GPU pod on CREATE and echoes the uid', async () => {
    const { handler } = handlerWith(new RecordingReleaser());
    const response = await handler.handle({ uid: 'c-1', operation: 'CREATE', kind: { kind: 'Pod' }, object: gpuPod });
    expect(response).to.include({ uid: 'c-1', allowed: true, patchType: 'JSONPatch' });
    const ops = JSON.parse(Buffer.from(response.patch ?? '', 'base64').toString()) as { path: string }[];
    expect(ops.map((op) => op.path)).to.deep.equal([
      '/spec/containers/0/resources/limits/nvidia.com~1gpucores',
      '/spec/schedulerName',
    ]);
  });

  it('answers a denial with 403 Forbidden and a bad value with 400', async () => {
    const { handler } = handlerWith(new RecordingReleaser());
    const privileged = {
      spec: {
        containers: [
          { name: 'c', securityContext: { privileged: true }, resources: { limits: { 'nvidia.com/gpu': '1' } } },
        ],
      },
    };
    expect((await handler.handle({ uid: 'c-2', operation: 'CREATE', object: privileged })).status).to.deep.include({
      code: 403,
      reason: 'Forbidden',
    });
    expect((await handler.handle({ uid: 'c-3', operation: 'CREATE' })).status).to.deep.include({ code: 400 });
  });

  it('releases the lock of a bound pod on DELETE and allows without a patch', async () => {
    const locks = new RecordingReleaser();
    const { handler, outcomes } = handlerWith(locks);
    const response = await handler.handle(deleteRequest({ ...gpuPod, spec: { ...gpuPod.spec, nodeName: 'gpu-1' } }));
    expect(response).to.deep.equal({ uid: 'del-1', allowed: true });
    expect(locks.calls).to.deep.equal([{ node: 'gpu-1', pod: { namespace: 'ns', name: 'p' }, uid: 'u-p' }]);
    expect(outcomes[0]).to.deep.include({ operation: 'DELETE' });
  });

  describe("with the state store's locks", () => {
    const bound = { ...gpuPod, spec: { ...gpuPod.spec, nodeName: 'gpu-1' } };
    const store = (locks: Record<string, string>, watching = true): StoredLocks => ({
      lockHeldBy: (node, pod) => locks[node] !== undefined && isOwnedBy(parseLockValue(locks[node]), pod),
      watching: () => watching,
    });

    it('answers the DELETE of a pod the store shows holding no lock without a release call', async () => {
      const locks = new RecordingReleaser();
      const { handler, outcomes } = handlerWith(
        locks,
        1000,
        store({ 'gpu-1': '2026-12-03T09:00:00Z,ns,another-pod', 'gpu-2': '2026-12-03T09:00:00Z,ns,p' }),
      );
      expect(await handler.handle(deleteRequest(bound))).to.deep.equal({ uid: 'del-1', allowed: true });
      await handler.handle(deleteRequest({ ...gpuPod, spec: { ...gpuPod.spec, nodeName: 'gpu-3' } }));
      expect(locks.calls).to.deep.equal([]);
      expect(outcomes.map((outcome) => (outcome.operation === 'DELETE' ? outcome.outcome : undefined))).to.deep.equal([
        { kind: 'skipped', reason: 'not-holder' },
        { kind: 'skipped', reason: 'not-holder' },
      ]);
    });

    it("releases through NodeLocks when the store shows the pod holding its node's lock", async () => {
      const locks = new RecordingReleaser();
      const { handler } = handlerWith(locks, 1000, store({ 'gpu-1': '2026-12-03T09:00:00Z,ns,p' }));
      await handler.handle(deleteRequest(bound));
      expect(locks.calls).to.deep.equal([{ node: 'gpu-1', pod: { namespace: 'ns', name: 'p' }, uid: 'u-p' }]);
    });

    it('asks the API as before while a watch of the store is down (a lock it does not show may be there)', async () => {
      const locks = new RecordingReleaser();
      const { handler } = handlerWith(locks, 1000, store({}, false));
      await handler.handle(deleteRequest(bound));
      expect(locks.calls).to.deep.equal([{ node: 'gpu-1', pod: { namespace: 'ns', name: 'p' }, uid: 'u-p' }]);
    });
  });

  it('uses hami.io/vgpu-node when the pod is not bound yet', async () => {
    const locks = new RecordingReleaser();
    await handlerWith(locks).handler.handle(
      deleteRequest({
        metadata: { name: 'p', namespace: 'ns', uid: 'u-p', annotations: { 'hami.io/vgpu-node': 'gpu-2' } },
        spec: {},
      }),
    );
    expect(locks.calls.map((call) => call.node)).to.deep.equal(['gpu-2']);
  });

  // Issue #42: a lock names only ns/name; without the pod's UID the webhook cannot tell its lock from
  // another incarnation's, and leaves it to the pod watch and the sweeper.
  it('makes no release call for a DELETE whose old object carries no UID', async () => {
    const locks = new RecordingReleaser();
    const { handler, outcomes } = handlerWith(locks);
    const response = await handler.handle(
      deleteRequest({ metadata: { name: 'p', namespace: 'ns' }, spec: { nodeName: 'gpu-1' } }),
    );
    expect(response).to.deep.equal({ uid: 'del-1', allowed: true });
    expect(locks.calls).to.deep.equal([]);
    expect(outcomes[0]).to.deep.include({ operation: 'DELETE', outcome: { kind: 'skipped', reason: 'no-pod' } });
  });

  it('keeps the lock on DELETE of a pod bound there and awaiting allocation, graceful or not (the pod watch frees it once gone)', async () => {
    const locks = new RecordingReleaser();
    const { handler, outcomes } = handlerWith(locks);
    const awaiting = {
      ...gpuPod,
      metadata: { ...gpuPod.metadata, annotations: { 'hami.io/bind-phase': 'allocating' } },
      spec: { ...gpuPod.spec, nodeName: 'gpu-1' },
    };
    const response = await handler.handle(
      deleteRequest(awaiting, { options: { kind: 'DeleteOptions', gracePeriodSeconds: 30 } }),
    );
    expect(response).to.deep.equal({ uid: 'del-1', allowed: true });
    await handler.handle(deleteRequest(awaiting, { options: { gracePeriodSeconds: 0 } }));
    expect(locks.calls, 'kubelet may still admit it and the plugin find it through the lock').to.deep.equal([]);
    expect(outcomes.map((outcome) => (outcome.operation === 'DELETE' ? outcome.outcome : undefined))).to.deep.equal([
      { kind: 'skipped', reason: 'awaiting-allocation' },
      { kind: 'skipped', reason: 'awaiting-allocation' },
    ]);
    const allocated = {
      ...awaiting,
      metadata: { ...awaiting.metadata, annotations: { 'hami.io/bind-phase': 'success' } },
    };
    await handler.handle(deleteRequest(allocated));
    expect(locks.calls).to.deep.equal([{ node: 'gpu-1', pod: { namespace: 'ns', name: 'p' }, uid: 'u-p' }]);
  });

  it('makes no release call for an unbound pod with no node, nor for a dry run', async () => {
    const locks = new RecordingReleaser();
    const { handler, outcomes } = handlerWith(locks);
    await handler.handle(deleteRequest(gpuPod));
    await handler.handle(deleteRequest({ ...gpuPod, spec: { nodeName: 'gpu-1' } }, { dryRun: true }));
    expect(locks.calls).to.deep.equal([]);
    expect(outcomes).to.deep.equal([
      { operation: 'DELETE', outcome: { kind: 'skipped', reason: 'no-node' } },
      { operation: 'DELETE', outcome: { kind: 'skipped', reason: 'dry-run' } },
    ]);
  });

  it('allows the DELETE when the release fails or hangs past its bound', async () => {
    const failing = handlerWith(new RecordingReleaser(() => Promise.reject(new Error('apiserver down'))));
    expect((await failing.handler.handle(deleteRequest({ ...gpuPod, spec: { nodeName: 'n' } }))).allowed).to.equal(
      true,
    );
    expect(failing.outcomes[0]).to.deep.include({ operation: 'DELETE' });

    const hanging = handlerWith(new RecordingReleaser(() => new Promise(() => undefined)), 50);
    const started = Date.now();
    expect((await hanging.handler.handle(deleteRequest({ ...gpuPod, spec: { nodeName: 'n' } }))).allowed).to.equal(
      true,
    );
    expect(Date.now() - started).to.be.lessThan(1000);
    expect(hanging.outcomes[0]).to.deep.equal({ operation: 'DELETE', outcome: { kind: 'timed-out', node: 'n' } });
  });

  it("ends the release with the review's signal (the apiserver stopped waiting), and still allows the DELETE", async () => {
    let releaseSignal: AbortSignal | undefined;
    const locks: LockReleaser = {
      releaseIfReleasable: (_node, _path, options) => {
        releaseSignal = options.signal;
        // Waiting for the node's mutex or the apiserver: nothing answers.
        return new Promise(() => undefined);
      },
    };
    const { handler, outcomes } = handlerWith(locks, 10_000);
    const review = new AbortController();
    const answering = handler.handle(deleteRequest({ ...gpuPod, spec: { nodeName: 'n' } }), review.signal);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const closedAt = Date.now();
    review.abort(new Error('the apiserver closed the request'));
    expect((await answering).allowed).to.equal(true);
    expect(Date.now() - closedAt).to.be.below(500);
    expect(releaseSignal?.aborted, 'the release no longer runs for a review nobody reads').to.equal(true);
    expect(outcomes).to.deep.equal([{ operation: 'DELETE', outcome: { kind: 'abandoned', node: 'n' } }]);
  });

  it('allows a DELETE with no usable oldObject', async () => {
    const locks = new RecordingReleaser();
    expect((await handlerWith(locks).handler.handle(deleteRequest(null))).allowed).to.equal(true);
    expect(locks.calls).to.deep.equal([]);
  });

  it('allows other operations untouched', async () => {
    const response = await handlerWith(new RecordingReleaser()).handler.handle({
      uid: 'u-1',
      operation: 'UPDATE',
      object: gpuPod,
    });
    expect(response).to.deep.equal({ uid: 'u-1', allowed: true });
  });
});
