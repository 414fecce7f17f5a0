import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import { simulatedGpuNode } from '../../src/local/simulated-gpu-node.js';
import type { RunningServer } from '../../src/serve/start-server.js';
import { scrapeMetrics, seriesOf } from '../support/scrape-metrics.js';
import { eventually, notYet, testCluster, uniqueName } from '../support/test-cluster.js';
import { startTestServer } from '../support/test-server.js';

const { version } = JSON.parse(readFileSync(resolve(import.meta.dirname, '..', '..', 'package.json'), 'utf8')) as {
  version: string;
};

/** HAMi's families, current and legacy names: what HAMi's dashboards sum and count. */
const HAMI_FAMILY = /^(hami_\w+|GPUDevice\w+|nodeGPU\w+|vGPU\w+Allocated|QuotaUsed)$/;
/** The cluster-wide gauges of our own that a follower leaves out too. */
const CLUSTER_WIDE = [
  'vgpu_warden_node_locks_held',
  'vgpu_warden_node_lock_age_seconds',
  'vgpu_warden_unreadable_allocations',
];

/** Every family a scrape carries, from its TYPE lines. */
function familiesOf(text: string): string[] {
  return [...text.matchAll(/^# TYPE (\S+) /gm)].map((match) => match[1] ?? '');
}

function leaderGauge(text: string): number | undefined {
  return seriesOf(text, 'vgpu_warden_leader')[0]?.value;
}

/** The series of one node's GPUs in HAMi's per-GPU memory family. */
function gpuSeries(text: string, node: string): number {
  return seriesOf(text, 'hami_gpu_memory_limit_bytes').filter((series) => series.labels.node === node).length;
}

describe('metrics with two serve replicas on one Lease (real apiserver)', function () {
  this.timeout(120_000);
  const certDirs = [mkdtempSync(join(tmpdir(), 'leader-metrics-a-')), mkdtempSync(join(tmpdir(), 'leader-metrics-b-'))];
  const servers: RunningServer[] = [];

  after(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    for (const dir of certDirs) rmSync(dir, { recursive: true, force: true });
  });

  it("HAMi's families come from the leader only (once in total), build_info from both, leader 1 on exactly one; the follower takes them over when the leader stops", async () => {
    const { core, namespace, controlPlane } = testCluster();
    const node = uniqueName('leader-metrics');
    await core.createNode({ body: simulatedGpuNode({ name: node, gpus: 2 }) });
    const shared = { POD_NAMESPACE: namespace, LEASE_NAME: uniqueName('metrics-lease') };
    const { server: first } = await startTestServer(controlPlane, certDirs[0] ?? '', shared);
    servers.push(first);
    await eventually(
      'the first replica to lead',
      () =>
        Promise.resolve(
          first.elector?.isLeader() === true
            ? true
            : notYet(`not leading: ${first.elector?.problem() ?? 'no problem reported'}`),
        ),
      20_000,
      50,
    );
    const { server: second } = await startTestServer(controlPlane, certDirs[1] ?? '', shared);
    servers.push(second);

    // The leader's scrape has the node once its store has it; one scrape of each is then compared.
    await eventually(
      `the GPUs of ${node} in the leader's scrape`,
      async () => {
        const count = gpuSeries(await scrapeMetrics(first.metricsPort), node);
        return count === 2 ? true : notYet(`${count} hami_gpu_memory_limit_bytes series for ${node}`);
      },
      20_000,
      100,
    );
    await second.cache.waitForSync(30_000);
    const [leaderText, followerText] = await Promise.all([
      scrapeMetrics(first.metricsPort),
      scrapeMetrics(second.metricsPort),
    ]);

    expect(second.elector?.isLeader()).to.equal(false);
    expect([leaderGauge(leaderText), leaderGauge(followerText)]).to.deep.equal([1, 0]);
    for (const text of [leaderText, followerText]) {
      expect(seriesOf(text, 'vgpu_warden_build_info')).to.deep.equal([{ labels: { version }, value: 1 }]);
      // Each replica's own process and request metrics stay.
      expect(familiesOf(text)).to.include.members([
        'process_cpu_seconds_total',
        'vgpu_warden_bind_duration_seconds',
        'vgpu_warden_admission_duration_seconds',
        'vgpu_warden_lock_releases_total',
      ]);
    }
    const leaderHami = familiesOf(leaderText).filter((name) => HAMI_FAMILY.test(name));
    expect(leaderHami).to.include.members([
      'hami_gpu_memory_limit_bytes',
      'hami_vgpu_memory_allocated_bytes',
      'hami_resource_quota_used',
      'GPUDeviceMemoryLimit',
    ]);
    expect(
      familiesOf(followerText).filter((name) => HAMI_FAMILY.test(name)),
      'HAMi families on the follower',
    ).to.deep.equal([]);
    for (const name of CLUSTER_WIDE) expect(seriesOf(followerText, name), name).to.deep.equal([]);
    expect(seriesOf(leaderText, 'vgpu_warden_node_locks_held').map((series) => series.labels.state)).to.have.members([
      'held',
      'stalled',
      'releasable',
    ]);
    // What a dashboard's sum() over both replicas sees: each GPU once.
    expect(gpuSeries(leaderText, node) + gpuSeries(followerText, node)).to.equal(2);

    // The leader stops (handing the Lease back, as on SIGTERM): the other replica takes the families over.
    const stopped = Date.now();
    await first.stop();
    const takenOver = await eventually(
      'the second replica to export the families',
      async () => {
        const text = await scrapeMetrics(second.metricsPort);
        return leaderGauge(text) === 1 && gpuSeries(text, node) === 2
          ? text
          : notYet(`leader gauge ${leaderGauge(text) ?? 'absent'}, ${gpuSeries(text, node)} GPU series for ${node}`);
      },
      30_000,
      100,
    );
    const takeoverMs = Date.now() - stopped;
    console.log(
      `        the second replica exported HAMi's families ${takeoverMs} ms after the leader's stop began (Lease handed back; retry period 2 s)`,
    );
    expect(seriesOf(takenOver, 'vgpu_warden_build_info')).to.deep.equal([{ labels: { version }, value: 1 }]);
    for (const name of CLUSTER_WIDE.slice(0, 1)) expect(seriesOf(takenOver, name), name).to.not.deep.equal([]);
    expect(takeoverMs).to.be.below(15_000);
  });
});
