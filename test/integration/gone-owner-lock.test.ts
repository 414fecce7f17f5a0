import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api, V1MicroTime, type CoreV1Api } from '@kubernetes/client-node';
import { expect } from 'chai';
import type { RunningServer } from '../../src/serve/start-server.js';
import { NODE_LEASE_NAMESPACE } from '../../src/lock/kube-kubelet-evidence-api.js';
import { createGpuNode, createPod, readLock, setLock } from '../support/lock-helpers.js';
import { eventually, notYet, testCluster, uniqueName } from '../support/test-cluster.js';
import { startTestServer } from '../support/test-server.js';

/**
 * The lock of a pod that vanished while bound and waiting for Allocate (force-deleted before the
 * node's kubelet admitted it) stays until that kubelet is past the pod: kubelet still admits it from
 * the event it queued and calls Allocate, and HAMi's plugin serves whichever pod the lock names then
 * (found on a real kubelet: the next pod's allocation was consumed by the dead one). Here the real
 * kube-apiserver and the real `serve` wiring; the kubelet's traces (its node Lease, its Event about
 * the pod) are written by the test as kubelet writes them. On real kubelets: test/e2e/real-seed-scenario.test.ts.
 */
describe('lock of an owner gone before Allocate (real kube-apiserver, serve wiring)', function () {
  this.timeout(90_000);
  let server: RunningServer | undefined;
  let certDir: string | undefined;

  beforeEach(async () => {
    const { controlPlane } = testCluster();
    certDir = mkdtempSync(join(tmpdir(), 'gone-owner-certs-'));
    // The pod watch alone: no sweep can free the lock behind the test's back.
    ({ server } = await startTestServer(controlPlane, certDir, { SWEEP_ENABLED: 'false' }));
  });

  afterEach(async () => {
    await server?.stop();
    if (certDir !== undefined) rmSync(certDir, { recursive: true, force: true });
  });

  async function createKubeletLease(node: string): Promise<void> {
    const coordination = testCluster().kubeConfig.makeApiClient(CoordinationV1Api);
    await coordination.createNamespacedLease({
      namespace: NODE_LEASE_NAMESPACE,
      body: {
        metadata: { name: node },
        spec: { holderIdentity: node, leaseDurationSeconds: 40, renewTime: new V1MicroTime() },
      },
    });
  }

  async function renewKubeletLease(node: string): Promise<void> {
    const coordination = testCluster().kubeConfig.makeApiClient(CoordinationV1Api);
    const lease = await coordination.readNamespacedLease({ namespace: NODE_LEASE_NAMESPACE, name: node });
    await coordination.replaceNamespacedLease({
      namespace: NODE_LEASE_NAMESPACE,
      name: node,
      body: { ...lease, spec: { ...lease.spec, renewTime: new V1MicroTime() } },
    });
  }

  /** A pod bound to `node`, bind-phase allocating, holding its lock, as our bind leaves it; returns its uid. */
  async function boundAwaitingAllocation(
    core: CoreV1Api,
    namespace: string,
    node: string,
    name: string,
  ): Promise<string> {
    await createPod(core, namespace, name, { nodeName: node, bindPhase: 'allocating', gpus: 1 });
    await setLock(core, node, `${new Date().toISOString().replace(/\.\d+Z$/, 'Z')},${namespace},${name}`);
    await eventually(
      'the store to see the lock and the bound pod',
      () =>
        Promise.resolve(
          server?.cache.lockOf(node) !== undefined && server.cache.pod(namespace, name)?.spec?.nodeName === node
            ? true
            : notYet('not yet'),
        ),
      10_000,
      20,
    );
    return (await core.readNamespacedPod({ namespace, name })).metadata?.uid ?? '';
  }

  async function forceDelete(core: CoreV1Api, namespace: string, name: string): Promise<void> {
    await core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 });
    await eventually(
      'the store to see the pod gone',
      () => Promise.resolve(server?.cache.pod(namespace, name) === undefined ? true : notYet('still there')),
      10_000,
      20,
    );
  }

  /** The lock stays for `ms` (sampled every 100 ms). */
  async function lockStays(core: CoreV1Api, node: string, ms: number, why: string): Promise<void> {
    const until = Date.now() + ms;
    while (Date.now() < until) {
      expect(await readLock(core, node), why).to.be.a('string');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  const lockGone = (core: CoreV1Api, node: string, timeoutMs: number) =>
    eventually(
      'the lock to be released',
      async () => ((await readLock(core, node)) === undefined ? true : notYet('still locked')),
      timeoutMs,
      50,
    );

  it("stays until the node's kubelet records an Event about that pod (its Allocate refused), then goes within a second", async () => {
    const { core, namespace } = testCluster();
    const node = await createGpuNode(core);
    await createKubeletLease(node);
    const uid = await boundAwaitingAllocation(core, namespace, node, 'victim');
    await forceDelete(core, namespace, 'victim');
    await lockStays(core, node, 3_000, 'kubelet may still admit the dead pod: the lock must keep naming it');

    // An Event about another incarnation, or from another node's kubelet, proves nothing.
    const event = (name: string, podUid: string, host: string) => ({
      metadata: { name: uniqueName(name) },
      involvedObject: { kind: 'Pod', apiVersion: 'v1', namespace, name: 'victim', uid: podUid },
      reason: 'UnexpectedAdmissionError',
      type: 'Warning',
      message: 'Allocate failed due to rpc error: pods "victim" not found, which is unexpected',
      source: { component: 'kubelet', host },
      firstTimestamp: new Date() as never,
      lastTimestamp: new Date() as never,
      count: 1,
    });
    await core.createNamespacedEvent({ namespace, body: event('other-uid', 'another-uid', node) });
    await core.createNamespacedEvent({ namespace, body: event('other-node', uid, 'another-node') });
    await lockStays(core, node, 1_500, 'only the Event of this node about this incarnation counts');

    await core.createNamespacedEvent({ namespace, body: event('rejected', uid, node) });
    const reported = Date.now();
    await lockGone(core, node, 5_000);
    process.stdout.write(`      kubelet Event -> lock released: ${Date.now() - reported} ms\n`);
  });

  it('stays until the kubelet renews its Lease after the pod is gone and the margin passes without such an Event', async () => {
    const { core, namespace } = testCluster();
    const node = await createGpuNode(core);
    await createKubeletLease(node);
    await boundAwaitingAllocation(core, namespace, node, 'victim');
    await forceDelete(core, namespace, 'victim');
    await lockStays(core, node, 2_500, 'no renewal since the pod went: kubelet may be frozen');
    await renewKubeletLease(node);
    const renewed = Date.now();
    await lockStays(core, node, 2_000, 'kubelet gets the margin to drain the event it queued');
    await lockGone(core, node, 15_000);
    const waited = Date.now() - renewed;
    process.stdout.write(`      Lease renewal -> lock released: ${waited} ms\n`);
    expect(waited, 'at least the 5 s margin').to.be.at.least(4_900);
  });

  it("a replica started after the pod went decides from the apiserver's records: a Lease written well after the lock, and the margin since, free it with no renewal seen by itself", async () => {
    const { core, controlPlane } = testCluster();
    const node = await createGpuNode(core);
    await createKubeletLease(node);
    // The owner's last state is nowhere: no process saw it go.
    await setLock(
      core,
      node,
      `${new Date().toISOString().replace(/\.\d+Z$/, 'Z')},${testCluster().namespace},gone-before-start`,
    );
    await server?.stop();
    server = undefined;
    // More than the 5 s margin (and a second of managedFields rounding) after the lock's write.
    await new Promise((resolve) => setTimeout(resolve, 7_500));
    await renewKubeletLease(node);
    const renewed = Date.now();
    ({ server } = await startTestServer(controlPlane, certDir ?? '', {
      SWEEP_ENABLED: 'true',
      SWEEP_SCHEDULE: '* * * * * *',
    }));
    const started = Date.now();
    await lockStays(
      core,
      node,
      Math.max(0, renewed + 3_500 - Date.now()),
      'kubelet gets the margin after that renewal',
    );
    // Without the apiserver's records, this process would wait for a renewal of its own (10 s) plus the margin.
    await lockGone(core, node, 6_000);
    process.stdout.write(
      `      fresh replica: start -> lock released ${Date.now() - started} ms; Lease renewal -> released ${Date.now() - renewed} ms\n`,
    );
    expect(Date.now() - renewed, 'at least the 5 s margin after the renewal').to.be.at.least(4_900);
  });

  it('goes at once on a node with no kubelet Lease (no kubelet ever ran there), and for a pod deleted before it was bound', async () => {
    const { core, namespace } = testCluster();
    const simulated = await createGpuNode(core);
    await boundAwaitingAllocation(core, namespace, simulated, 'on-simulated');
    await forceDelete(core, namespace, 'on-simulated');
    await lockGone(core, simulated, 5_000);

    const real = await createGpuNode(core);
    await createKubeletLease(real);
    await createPod(core, namespace, 'never-bound', { gpus: 1 });
    await setLock(core, real, `${new Date().toISOString().replace(/\.\d+Z$/, 'Z')},${namespace},never-bound`);
    await eventually(
      'the store to see the lock',
      () => Promise.resolve(server?.cache.lockOf(real) !== undefined ? true : notYet('no lock yet')),
      10_000,
      20,
    );
    await forceDelete(core, namespace, 'never-bound');
    await lockGone(core, real, 5_000);
  });
});
