import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { eventMatching } from '../support/pod-waits.js';
import {
  boundPod,
  expectOwnGpus,
  podGone,
  podNamed,
  RealGpuNodes,
  realGpuPod,
  runningPod,
} from '../support/real-gpu-nodes.js';
import { eventually, notYet, sharedControlPlane, testCluster } from '../support/test-cluster.js';

/**
 * HAMi's namespace GPU quota (limits.nvidia.com/gpumem) on a real node, where the parts the
 * simulated suite (gpu-quota.test.ts) cannot show depend on kubelet: a pod's share of the quota is
 * given back when kubelet reports the pod ended (its container exited: Succeeded), and not while a
 * pod deleted gracefully is still terminating (kubelet still runs its container, which still holds
 * the GPU). Each pod that runs prints exactly the GPUs of its own allocation.
 */
const QUOTA_MIB = 3000;
const LIMITS = { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '2000', 'nvidia.com/gpucores': '10' };

/** A GPU pod whose container runs `script` after printing its environment. */
function podRunning(name: string, group: string, script: string, extra: Partial<V1Pod['spec']> = {}): V1Pod {
  const body = realGpuPod(name, group, LIMITS);
  const [container] = body.spec?.containers ?? [];
  if (body.spec === undefined || container === undefined) throw new Error('realGpuPod has no container');
  container.command = ['sh', '-c', `env | sort; ${script}`];
  Object.assign(body.spec, extra);
  return body;
}

describe("namespace GPU quota on a real node: kubelet gives a pod's share back when its container has ended, not before", function () {
  this.timeout(240_000);
  let cluster: RealGpuNodes;

  before(async function () {
    this.timeout(180_000);
    cluster = new RealGpuNodes(sharedControlPlane(), { nodes: 1, gpusPerNode: 2 });
    await cluster.start();
  });

  after(async function () {
    this.timeout(120_000);
    await cluster.stop();
  });

  it('a pod over the quota waits while the pod ahead runs or terminates, and runs with its own GPUs once kubelet has ended that pod', async () => {
    const { core, namespace } = testCluster();
    await core.createNamespacedResourceQuota({
      namespace,
      body: { metadata: { name: 'gpu-quota' }, spec: { hard: { 'limits.nvidia.com/gpumem': String(QUOTA_MIB) } } },
    });
    await eventually(
      'the extender to read the quota',
      () =>
        Promise.resolve(
          cluster.server?.cache.quotaBudget(namespace) !== undefined
            ? true
            : notYet(`no quota budget for ${namespace} in the store`),
        ),
      10_000,
      50,
    );
    const overQuota = new RegExp(`limits\\.nvidia\\.com/gpumem 2000 used \\+ 2000 requested > ${QUOTA_MIB}`);

    // A job: its container ends by itself a few seconds after it started.
    await core.createNamespacedPod({
      namespace,
      body: podRunning('job', cluster.group, 'sleep 4; exit 0', { restartPolicy: 'Never' }),
    });
    await expectOwnGpus(await runningPod('job'));
    await core.createNamespacedPod({
      namespace,
      body: podRunning('next', cluster.group, 'trap "sleep 5; exit 0" TERM; sleep 3600 & wait', {
        terminationGracePeriodSeconds: 20,
      }),
    });
    await eventMatching(namespace, 'next', overQuota);
    const jobRunning = await podNamed('job');
    expect(jobRunning?.status?.phase, 'next waits while job still runs').to.equal('Running');
    expect((await podNamed('next'))?.spec?.nodeName).to.equal(undefined);
    const succeeded = await eventually(
      'kubelet to report job Succeeded',
      async () => {
        const found = await podNamed('job');
        return found?.status?.phase === 'Succeeded' ? Date.now() : notYet(`phase ${found?.status?.phase ?? 'gone'}`);
      },
      30_000,
      50,
    );
    const next = await runningPod('next', 60_000);
    process.stdout.write(
      `        job Succeeded -> next Running: ${Date.now() - succeeded} ms (kube-scheduler retries a quota refusal on its backoff)\n`,
    );
    await expectOwnGpus(next);

    // A graceful delete: kubelet sends TERM, and the container takes 5 s to stop; its GPU share
    // stays counted until kubelet is done.
    await core.deleteNamespacedPod({ namespace, name: 'next' });
    await core.createNamespacedPod({ namespace, body: podRunning('third', cluster.group, 'sleep 3600') });
    await eventMatching(namespace, 'third', overQuota);
    const terminating = await podNamed('next');
    expect(terminating?.metadata?.deletionTimestamp, 'third was refused while next was terminating').to.not.equal(
      undefined,
    );
    expect((await podNamed('third'))?.spec?.nodeName).to.equal(undefined);
    await podGone('next');
    const gone = Date.now();
    await boundPod('third', 60_000);
    const third = await runningPod('third', 60_000);
    process.stdout.write(
      `        next gone (kubelet stopped its container) -> third Running: ${Date.now() - gone} ms\n`,
    );
    await expectOwnGpus(third);
    for (const name of ['job', 'third'])
      await core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 }).catch(() => undefined);
    await podGone('third');
  });
});
