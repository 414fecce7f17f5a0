import { copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { wire, type AllocateRecord, type Admission } from '@vgpu-warden/stand-ins/hami-plugin';
import {
  boundPod,
  expectOwnGpus,
  nodeLock,
  nodeUnlocked,
  podGone,
  podNamed,
  RealGpuNodes,
  realGpuPod,
  runningPod,
} from '../support/real-gpu-nodes.js';
import { eventually, notYet, sharedControlPlane, testCluster } from '../support/test-cluster.js';

/**
 * The seed scenario on real nodes: kubelet with containerd, and the HAMi device-plugin
 * stand-in registered with kubelet over the device-plugin gRPC API, so kubelet's own device manager
 * decides when Allocate is called, and for which pod. The victim is bound while its node's kubelet
 * is frozen (SIGSTOP: slow to admit), then deleted; kubelet resumes right after the delete, with the
 * victim's watch event still queued. Found on a real kubelet with HAMi's plugin v2.10: kubelet then
 * admits the dead victim and calls Allocate for it, and the plugin serves whichever pod the node lock
 * names at that instant. vgpu-warden must keep the lock on the victim until kubelet is past it, so
 * the victim's Allocate fails harmlessly and the replacement runs with its own GPUs.
 *
 * Every Running container's environment (its log) must show exactly the GPUs and limits of its own
 * pod's allocation annotation. Figures are printed: kubelet resumed → lock gone → replacement Running.
 */
const LIMITS = { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '3000', 'nvidia.com/gpucores': '30' };
const RUNS = Number(process.env.REAL_SEED_RUNS ?? 10);

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? Number.NaN;
}

describe('seed scenario on real nodes (kubelet + containerd, device plugin over gRPC)', function () {
  this.timeout(300_000);
  let cluster: RealGpuNodes;
  let node: string;

  before(async function () {
    this.timeout(180_000);
    const started = Date.now();
    cluster = new RealGpuNodes(sharedControlPlane(), { nodes: 1, gpusPerNode: 2 });
    await cluster.start();
    node = cluster.nodeNames[0] ?? '';
    process.stdout.write(
      `      1 real node with 2 mock GPUs, plugin registered, scheduler up: ${Date.now() - started} ms\n`,
    );
  });

  after(async function () {
    this.timeout(120_000);
    await cluster.stop();
  });

  afterEach(function () {
    // A frozen kubelet must never outlive a failed test.
    if (cluster.fleet !== undefined) cluster.node(node).resume();
    if (this.currentTest?.state === 'failed') {
      const kept = join(tmpdir(), `real-seed-kubelet-${Date.now()}.log`);
      copyFileSync(cluster.node(node).logFiles.kubelet, kept);
      process.stdout.write(`${timeline(cluster.plugin.records)}\n      kubelet log: ${kept}\n`);
    }
  });

  function timeline(records: readonly AllocateRecord<Admission>[]): string {
    return records
      .map(
        (record) =>
          `      #${record.seq} ${record.at.toISOString()} ${record.outcome} resolvedTo=${record.resolvedTo?.name ?? '-'} via=${record.via ?? '-'} ${record.error ?? ''}`,
      )
      .join('\n');
  }

  it('a GPU pod runs with exactly its allocation: kubelet called Allocate and the container got that environment', async () => {
    const { core, namespace } = testCluster();
    const times: number[] = [];
    for (let run = 0; run < 3; run++) {
      const name = `plain-${run}`;
      const created = Date.now();
      await core.createNamespacedPod({ namespace, body: realGpuPod(name, cluster.group, LIMITS) });
      const found = await runningPod(name);
      times.push(Date.now() - created);
      expect(found.metadata?.annotations?.[wire.BIND_PHASE]).to.equal('success');
      await expectOwnGpus(found);
      await core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 });
      await podGone(name);
    }
    process.stdout.write(
      `      create -> Running with its GPU env: median ${median(times)} ms, max ${Math.max(...times)} ms (${times.length} runs)\n`,
    );
  });

  for (const variant of ['force', 'graceful'] as const) {
    it(`victim bound while kubelet is frozen, then deleted (${variant}): the lock keeps naming it until kubelet is past it; the replacement runs with its own GPUs (${RUNS} runs)`, async () => {
      const { core, namespace } = testCluster();
      const real = cluster.node(node);
      const toLockGone: number[] = [];
      const toRunning: number[] = [];
      let victimAllocateCalls = 0;
      for (let run = 0; run < RUNS; run++) {
        const victim = `${variant}-victim-${run}`;
        const replacement = `${variant}-replacement-${run}`;
        const recordsBefore = cluster.plugin.records.length;
        real.pause();
        await core.createNamespacedPod({ namespace, body: realGpuPod(victim, cluster.group, LIMITS) });
        const victimPod = await boundPod(victim);
        expect(await nodeLock(core, node), 'the bind leaves the lock on the victim').to.match(
          new RegExp(`,${namespace},${victim}$`),
        );
        await core.deleteNamespacedPod({
          namespace,
          name: victim,
          ...(variant === 'force' ? { gracePeriodSeconds: 0 } : {}),
        });
        await core.createNamespacedPod({ namespace, body: realGpuPod(replacement, cluster.group, LIMITS) });
        // Give the replacement every chance to be bound while kubelet still has the victim queued.
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        expect(await nodeLock(core, node), 'while kubelet may still admit the victim, the lock names it').to.match(
          new RegExp(`,${namespace},${victim}$`),
        );
        expect((await podNamed(replacement))?.spec?.nodeName, 'the replacement waits for the lock').to.equal(undefined);
        real.resume();
        const resumed = Date.now();

        await eventually(
          "the victim's lock to go",
          async () => {
            const lock = await nodeLock(core, node);
            return lock?.endsWith(`,${namespace},${victim}`) === true ? notYet(`lock ${lock}`) : true;
          },
          30_000,
          20,
        );
        toLockGone.push(Date.now() - resumed);
        const replacementPod = await runningPod(replacement);
        toRunning.push(Date.now() - resumed);
        await expectOwnGpus(replacementPod);

        const records = cluster.plugin.records.slice(recordsBefore);
        const victimUid = victimPod.metadata?.uid;
        const allocated = records.filter((record) => record.outcome === 'allocated');
        if (variant === 'force') {
          // kubelet called Allocate for the dead victim (the lock still named it: "not found"), or
          // did not admit it at all.
          victimAllocateCalls += records.filter(
            (record) => record.outcome === 'failed' && (record.error ?? '').includes('not found'),
          ).length;
          expect(
            allocated.map((record) => record.resolvedTo?.name),
            'only the replacement was allocated',
          ).to.deep.equal([replacement]);
        } else {
          // The victim still existed: kubelet admitted it and the plugin served it its own allocation.
          victimAllocateCalls += allocated.filter((record) => record.resolvedTo?.uid === victimUid).length;
          expect(
            allocated.map((record) => record.resolvedTo?.name),
            'the victim got its own devices, then the replacement',
          ).to.deep.equal([victim, replacement]);
        }
        expect((await podNamed(replacement))?.status?.phase).to.equal('Running');
        await core.deleteNamespacedPod({ namespace, name: replacement, gracePeriodSeconds: 0 });
        await podGone(replacement);
        await podGone(victim);
        await nodeUnlocked(core, node);
      }
      process.stdout.write(
        `      ${variant} delete, kubelet resumed 1.5 s later; resume -> lock gone: median ${median(toLockGone)} ms, max ${Math.max(...toLockGone)} ms; -> replacement Running with its GPU env: median ${median(toRunning)} ms, max ${Math.max(...toRunning)} ms (${RUNS} runs; kubelet called Allocate for the victim in ${victimAllocateCalls})\n`,
      );
    });
  }
});
