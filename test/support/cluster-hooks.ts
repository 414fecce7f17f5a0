import { resolve } from 'node:path';
import { ControlPlane } from '../../src/local/control-plane.js';
import { locateBinaries } from '../../src/local/k8s-binaries.js';
import { ShutdownHooks } from '../../src/local/shutdown-hooks.js';
import { attachControlPlane, cleanUpTestNamespace, createTestNamespace, detachControlPlane } from './test-cluster.js';

/**
 * Mocha root hooks for test/integration and test/e2e: one real control plane per run, stopped at
 * the end and on Ctrl-C; a fresh namespace for every test, emptied of pods when the test ends.
 */
export const mochaHooks = {
  async beforeAll(this: Mocha.Context): Promise<void> {
    this.timeout(180_000);
    const binaries = locateBinaries({ repoRoot: resolve(import.meta.dirname, '..', '..'), env: process.env });
    const plane = await ControlPlane.start({
      binaries,
      shutdownHooks: new ShutdownHooks(process, 20_000, (line) => {
        process.stderr.write(`[control plane] ${line}\n`);
      }),
    });
    attachControlPlane(plane);
  },
  async beforeEach(this: Mocha.Context): Promise<void> {
    await createTestNamespace(this.currentTest?.title ?? 'test');
  },
  async afterEach(this: Mocha.Context): Promise<void> {
    this.timeout(30_000);
    await cleanUpTestNamespace();
  },
  async afterAll(this: Mocha.Context): Promise<void> {
    this.timeout(60_000);
    await detachControlPlane()?.stop();
  },
};
