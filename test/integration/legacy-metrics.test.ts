import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { simulatedGpuNode } from '../../src/local/simulated-gpu-node.js';
import type { RunningServer } from '../../src/serve/start-server.js';
import { eventually, notYet, testCluster, uniqueName } from '../support/test-cluster.js';
import { startTestServer } from '../support/test-server.js';

describe('LEGACY_METRICS on a serve process (real apiserver)', function () {
  let server: RunningServer | undefined;
  const certDir = mkdtempSync(join(tmpdir(), 'legacy-metrics-certs-'));

  after(async () => {
    await server?.stop();
    rmSync(certDir, { recursive: true, force: true });
  });

  it("false: /metrics has HAMi's hami_* families for a node's GPUs and none of the legacy names", async () => {
    const { core, controlPlane } = testCluster();
    const node = uniqueName('legacy-metrics');
    await core.createNode({ body: simulatedGpuNode({ name: node, gpus: 2 }) });
    ({ server } = await startTestServer(controlPlane, certDir, { LEGACY_METRICS: 'false' }));
    const url = `http://127.0.0.1:${server.metricsPort}/metrics`;
    const text = await eventually(
      `the GPUs of ${node} in the scrape`,
      async () => {
        const scraped = await (await fetch(url)).text();
        return scraped.includes(`hami_gpu_memory_limit_bytes{zone="vGPU",node="${node}"`)
          ? scraped
          : notYet('not yet in the scrape');
      },
      20_000,
      100,
    );
    expect(text).not.to.match(/^# TYPE (GPUDevice\w+|nodeGPU\w+|vGPU\w+Allocated|QuotaUsed) gauge$/m);
    expect(text).not.to.include('GPUDeviceMemoryLimit{');
  });
});
