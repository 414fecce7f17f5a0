import { resolve } from 'node:path';
import { expect } from 'chai';
import { finished, spawnTsx } from '../support/captured-process.js';
import { createGpuNode, createPod, readLock } from '../support/lock-helpers.js';
import { findOverlaps, type CriticalSection } from '../support/lock-overlap.js';
import { testCluster } from '../support/test-cluster.js';

const worker = resolve(import.meta.dirname, '..', 'support', 'fixtures', 'lock-worker.ts');

interface WorkerReport {
  pod: string;
  sections: { node: string; acquiredRv: string; releasedRv: string }[];
  contentions: number;
}

async function runWorker(input: Record<string, unknown>): Promise<WorkerReport> {
  const { code, stdout, stderr } = await finished(
    spawnTsx(worker, [], { env: { ...process.env, LOCK_WORKER: JSON.stringify(input) } }),
  );
  if (code !== 0) throw new Error(`lock worker ${String(input.pod)} exited ${String(code)}: ${stderr}`);
  return JSON.parse(stdout.trim()) as WorkerReport;
}

describe('NodeLocks across two OS processes', function () {
  this.timeout(300_000);

  it('200 acquire/release cycles each on 3 shared nodes never overlap two holders', async () => {
    const { core, namespace, controlPlane } = testCluster();
    const nodes = [await createGpuNode(core), await createGpuNode(core), await createGpuNode(core)];
    await createPod(core, namespace, 'worker-a');
    await createPod(core, namespace, 'worker-b');
    const common = { kubeconfig: controlPlane.kubeconfigPath, namespace, nodes, cycles: 200, holdMs: 3 };

    const reports = await Promise.all([
      runWorker({ ...common, pod: 'worker-a' }),
      runWorker({ ...common, pod: 'worker-b' }),
    ]);

    const sections: CriticalSection[] = reports.flatMap((report) =>
      report.sections.map((section) => ({ holder: report.pod, ...section })),
    );
    expect(reports.map((report) => report.sections.length)).to.deep.equal([200, 200]);
    expect(findOverlaps(sections)).to.deep.equal([]);
    // The workers really competed: at least once one found the other holding a node.
    expect(reports.reduce((sum, report) => sum + report.contentions, 0)).to.be.greaterThan(0);
    for (const node of nodes) expect(await readLock(core, node)).to.equal(undefined);
  });
});
