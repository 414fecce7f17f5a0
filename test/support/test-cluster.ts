import { randomBytes } from 'node:crypto';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { withSignal } from '../../src/kube/call-options.js';
import { loadKubeConfig } from '../../src/kube/client.js';
import type { ControlPlane } from '../../src/local/control-plane.js';

/**
 * What integration and e2e tests see of the per-run control plane: the API clients and the fresh
 * namespace made for the current test. Set by the root hooks in cluster-hooks.ts.
 */
export interface TestCluster {
  controlPlane: ControlPlane;
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  /** Namespace created for the test that is running now. */
  namespace: string;
}

interface ClusterState {
  controlPlane: ControlPlane;
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  namespace: string | undefined;
}

let state: ClusterState | undefined;

export function attachControlPlane(controlPlane: ControlPlane): void {
  const kubeConfig = loadKubeConfig(controlPlane.kubeconfigPath);
  state = { controlPlane, kubeConfig, core: kubeConfig.makeApiClient(CoreV1Api), namespace: undefined };
}

export function detachControlPlane(): ControlPlane | undefined {
  const plane = state?.controlPlane;
  state = undefined;
  return plane;
}

export async function createTestNamespace(title: string): Promise<string> {
  if (!state) throw new Error('no control plane: the cluster root hooks did not run');
  const slug = title
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40)
    .replace(/-+$/, '');
  const name = `t-${slug || 'test'}-${randomBytes(3).toString('hex')}`;
  await state.core.createNamespace({ body: { metadata: { name, labels: { 'vgpu-warden.test/run': 'true' } } } });
  state.namespace = name;
  return name;
}

/**
 * Force-deletes every pod the finished test left in its namespace. Without this a failed (or merely
 * untidy) test's Pending GPU pods waited for the next suite that runs a kube-scheduler for their
 * schedulerName, which then bound them to that suite's nodes: a pod of admission-policies' test took
 * manifests-apply's only GPU node and its lock (no device plugin there to allocate and free it), and
 * manifests-apply's own pod waited out its 45 s (CI, 2026-12-01). The namespace itself stays: this
 * control plane runs no namespace controller, so deleting it would only leave it Terminating.
 * Best effort with its own deadline: a clean-up error never fails the next test, it is printed.
 */
export async function cleanUpTestNamespace(): Promise<void> {
  const namespace = state?.namespace;
  if (!state || namespace === undefined) return;
  try {
    await state.core.deleteCollectionNamespacedPod(
      { namespace, gracePeriodSeconds: 0 },
      withSignal(AbortSignal.timeout(15_000)),
    );
  } catch (error) {
    process.stderr.write(
      `[test cluster] could not delete the pods left in ${namespace}: ${error instanceof Error ? error.message : String(error)}\n`,
    );
  }
}

/** The run's control plane, for suite-level hooks that run before any test namespace exists. */
export function sharedControlPlane(): ControlPlane {
  if (!state) throw new Error('no control plane: the cluster root hooks did not run');
  return state.controlPlane;
}

export function testCluster(): TestCluster {
  if (!state?.namespace) throw new Error('no test namespace: testCluster() is only usable inside a test');
  return {
    controlPlane: state.controlPlane,
    kubeConfig: state.kubeConfig,
    core: state.core,
    namespace: state.namespace,
  };
}

/** A name unique within the run, for cluster-scoped objects such as Nodes. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

export { eventually, notYet, NotYet, wakeOn } from './eventually.js';
