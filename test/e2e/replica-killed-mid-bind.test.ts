import { EventEmitter } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PatchStrategy, setHeaderOptions, type CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { kubeSchedulerConfiguration } from '../../src/extender/scheduler-config.js';
import { loadKubeConfig } from '../../src/kube/client.js';
import type { ControlPlane, SchedulerHandle } from '../../src/local/control-plane.js';
import { locateBinaries } from '../../src/local/k8s-binaries.js';
import { hostProcesses } from '../../src/local/host-processes.js';
import { RealGpuFleet } from '@vgpu-warden/stand-ins/real-gpu-fleet';
import { findFreePorts } from '../../src/local/free-port.js';
import { simulatedGpuNode } from '../../src/local/simulated-gpu-node.js';
import { parseLockValue } from '../../src/lock/lock-value.js';
import { BIND_PHASE_ANNOTATION, NODE_LOCK_ANNOTATION } from '../../src/hami/wire.js';
import { spawnTsx, type CapturedProcess } from '../support/captured-process.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { httpGet } from '../support/http-get.js';
import { HamiDevicePlugin, pluginApiFromCore } from '@vgpu-warden/stand-ins/hami-plugin';
import { KubeletSim } from '../support/kubelet-sim/index.js';
import type { Wake } from '../support/eventually.js';
import { expectOwnGpus, REAL_GROUP_LABEL, realGpuPod } from '../support/real-gpu-nodes.js';
import { eventually, notYet, sharedControlPlane, testCluster, uniqueName, wakeOn } from '../support/test-cluster.js';
import { outputTail, podStory } from '../support/observations.js';

const repoRoot = resolve(import.meta.dirname, '..', '..');
const main = resolve(repoRoot, 'src', 'main.ts');
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** The /readyz status and body (what is not ready yet); status 0 and the error when it did not answer. */
const readyz = (port: number, caPem: string) => httpGet(port, '/readyz', { caPem, noAnswerAsStatus0: true });

/**
 * The real process, SIGKILLed between its lock write and its Binding (the apiserver never answers
 * the Binding: the fault proxy holds it). kube-scheduler sees the bind fail and, with the first node
 * cordoned, places the pod on another node through the restarted process. The first node's lock
 * names a pod now bound elsewhere: it must be free at once, not after BIND_GRACE (60 s) and not only
 * at the next sweep (the sweeper is off here), so pods waiting for that node are not held up.
 *
 * Run on both kinds of node: simulated (the kubelet model calls the plugin as a function) and real
 * (kubelet with containerd, the plugin over gRPC), where the first node's real kubelet must
 * never see the pod and the second's runs it with exactly the GPUs of its allocation.
 */
const LIMITS = { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1000' };

/** Two GPU nodes, the second cordoned, each with a kubelet of the kind under test and the HAMi plugin stand-in. */
interface TwoNodes {
  victim: V1Pod;
  /** Each Allocate answered: node, outcome and the pod served (simulated: also the pod admitted). */
  allocations(): (string | undefined)[][];
  /** Rechecks a wait on the pod when the kubelet takes a step; undefined: polled only. */
  wake: Wake | undefined;
  /** What the victim's container got equals its allocation (real nodes: the simulator runs no container). */
  ranWithOwnGpus?: (pod: V1Pod) => Promise<void>;
  stop(): Promise<void>;
}

async function simulatedNodes(
  plane: ControlPlane,
  core: CoreV1Api,
  [first, second]: readonly [string, string],
  group: string,
): Promise<TwoNodes> {
  // Straight to the apiserver, as a node's kubelet and device plugin are (the proxy is vgpu-warden's).
  const plugin = new HamiDevicePlugin({ api: pluginApiFromCore(core) });
  // The kubelet tells of each step it takes (bound seen, running written): the waits on the pod look again then.
  const kubeletSteps = new EventEmitter();
  const kubelet = new KubeletSim({
    kubeConfig: loadKubeConfig(plane.kubeconfigPath),
    core,
    plugin,
    servesNode: (node) => node === first || node === second,
    onRecord: () => {
      kubeletSteps.emit('record');
    },
  });
  await core.createNode({
    body: simulatedGpuNode({ name: first, gpus: 2, labels: { 'vgpu-warden.test/group': group } }),
  });
  const secondNode = simulatedGpuNode({ name: second, gpus: 2, labels: { 'vgpu-warden.test/group': group } });
  await core.createNode({ body: { ...secondNode, spec: { ...secondNode.spec, unschedulable: true } } });
  await kubelet.start();
  return {
    victim: {
      metadata: { name: 'victim' },
      spec: {
        schedulerName: 'hami-scheduler',
        nodeSelector: { 'vgpu-warden.test/group': group },
        containers: [{ name: 'c', image: 'x', resources: { limits: LIMITS } }],
      },
    },
    allocations: () =>
      plugin.records.map((record) => [record.node, record.outcome, record.admitted.name, record.resolvedTo?.name]),
    wake: wakeOn(kubeletSteps, 'record'),
    stop: async () => {
      await kubelet.stop();
      plugin.stop();
      for (const name of [first, second]) await core.deleteNode({ name }).catch(() => undefined);
    },
  };
}

async function realNodes(
  plane: ControlPlane,
  core: CoreV1Api,
  [first, second]: readonly [string, string],
  group: string,
): Promise<TwoNodes> {
  const fleet = await RealGpuFleet.start({
    names: [first, second],
    labels: { [REAL_GROUP_LABEL]: group },
    gpusPerNode: 2,
    gpuMemoryMiB: 24576,
    cluster: plane,
    kubeConfig: loadKubeConfig(plane.kubeconfigPath),
    core,
    binaries: locateBinaries({ repoRoot, env: process.env }),
    processes: hostProcesses,
  });
  await core.patchNode({ name: second, body: { spec: { unschedulable: true } } }, mergePatch);
  return {
    victim: realGpuPod('victim', group, LIMITS),
    allocations: () =>
      fleet.plugin.records
        .filter((record) => record.outcome !== 'stalled')
        .map((record) => [record.node, record.outcome, record.resolvedTo?.name]),
    wake: undefined,
    ranWithOwnGpus: expectOwnGpus,
    stop: () => fleet.stop(),
  };
}

for (const kind of ['simulated', 'real'] as const) {
  describe(`a replica SIGKILLed mid-bind (${kind} nodes)`, function () {
    this.timeout(180_000);

    it('leaves no lock behind once kube-scheduler places the pod on another node, where it runs with its own GPUs', async () => {
      const { core, namespace } = testCluster();
      const plane = sharedControlPlane();
      const proxy = await FaultProxy.start({ upstream: plane });
      const certDir = mkdtempSync(join(tmpdir(), 'killed-mid-bind-'));
      const [webhookPort = 0, extenderPort = 0, metricsPort = 0] = await findFreePorts(3);
      let child: CapturedProcess['child'] | undefined;
      let scheduler: SchedulerHandle | undefined;
      // Every replica started so far; the output is theirs in turn (the killed one's, then the restarted one's).
      const replicas: CapturedProcess[] = [];
      const output = () => replicas.map((replica) => replica.output()).join('');
      const serve = async () => {
        // Through the proxy, so the Binding can be held; same ports and CERT_DIR across restarts.
        const replica = spawnTsx(main, ['serve'], {
          env: {
            ...process.env,
            KUBECONFIG: proxy.kubeconfigPath,
            CERT_DIR: certDir,
            CERT_HOSTS: '127.0.0.1',
            WEBHOOK_HOST: '127.0.0.1',
            WEBHOOK_PORT: String(webhookPort),
            EXTENDER_PORT: String(extenderPort),
            METRICS_HOST: '127.0.0.1',
            METRICS_PORT: String(metricsPort),
            SWEEP_ENABLED: 'false',
            POD_WATCH_ENABLED: 'true',
            POD_NAMESPACE: 'default',
            LOG_LEVEL: 'info',
          },
        });
        replicas.push(replica);
        const started = replica.child;
        child = started;
        // serve logs as it starts up: each line is a moment to look again; the polls stay as the fallback.
        const caPem = await eventually(
          'serve to write its CA',
          () =>
            Promise.resolve(
              (() => {
                try {
                  return readFileSync(join(certDir, 'ca.crt'), 'utf8');
                } catch (error) {
                  const exited = started.exitCode === null ? '' : `serve exited ${started.exitCode}; `;
                  return notYet(
                    `${exited}no ca.crt (${(error as NodeJS.ErrnoException).code ?? String(error)}); ${outputTail(output())}`,
                  );
                }
              })(),
            ),
          30_000,
          100,
          wakeOn(started.stdout, 'data'),
        );
        await eventually(
          'serve to be ready',
          async () => {
            const answer = await readyz(webhookPort, caPem);
            return answer.status === 200
              ? true
              : notYet(`/readyz ${answer.status}: ${answer.body.trim().slice(0, 300)}`);
          },
          30_000,
          100,
          wakeOn(started.stdout, 'data'),
        );
        return caPem;
      };

      const group = uniqueName('killed');
      const names = [`${group}-a`, `${group}-b`] as const;
      const [first, second] = names;
      let nodes: TwoNodes | undefined;
      try {
        nodes = await (kind === 'real' ? realNodes : simulatedNodes)(plane, core, names, group);
        const caPem = await serve();
        scheduler = await plane.startScheduler(
          kubeSchedulerConfiguration({
            schedulerName: 'hami-scheduler',
            extenderUrl: `https://127.0.0.1:${extenderPort}`,
            caPem,
          }),
        );
        const held = proxy.addRule({
          match: { method: 'POST', path: new RegExp(`^/api/v1/namespaces/${namespace}/pods/victim/binding$`) },
          action: { kind: 'hang' },
        });
        await core.createNamespacedPod({ namespace, body: nodes.victim });
        await held.whenHit();
        const lockOnFirst = async () =>
          (await core.readNode({ name: first })).metadata?.annotations?.[NODE_LOCK_ANNOTATION];
        const taken = await lockOnFirst();
        expect(taken && parseLockValue(taken), 'the lock was written before the Binding').to.deep.include({
          kind: 'owned',
          owner: { namespace, name: 'victim' },
        });

        child?.kill('SIGKILL');
        await new Promise((done) => child?.once('exit', done));
        held.remove();
        await core.patchNode({ name: first, body: { spec: { unschedulable: true } } }, mergePatch);
        await core.patchNode({ name: second, body: { spec: { unschedulable: false } } }, mergePatch);
        await serve();

        const bound = await eventually(
          'kube-scheduler to place the pod on the second node',
          async () => {
            const pod = await core.readNamespacedPod({ name: 'victim', namespace });
            return pod.spec?.nodeName === second ? Date.now() : notYet(await podStory(core, namespace, 'victim', pod));
          },
          60_000,
          50,
          nodes.wake,
        );
        // No store in this process watches the node: polled only.
        const freed = await eventually(
          "the first node's lock to be freed",
          async () => {
            const lock = await lockOnFirst();
            return lock === undefined ? Date.now() : notYet(`${first} locked ${lock}`);
          },
          30_000,
          50,
        );
        expect(freed - bound, 'freed at once, not after BIND_GRACE or a sweep').to.be.below(5_000);
        const running = await eventually(
          'the pod to be allocated on the second node',
          async () => {
            const pod = await core.readNamespacedPod({ name: 'victim', namespace });
            return pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION] === 'success' && pod.status?.phase === 'Running'
              ? pod
              : notYet(await podStory(core, namespace, 'victim', pod));
          },
          30_000,
          50,
          nodes.wake,
        );
        expect(nodes.allocations(), 'one Allocate, on the second node, with its own devices').to.deep.equal([
          kind === 'real' ? [second, 'allocated', 'victim'] : [second, 'allocated', 'victim', 'victim'],
        ]);
        await nodes.ranWithOwnGpus?.(running);
        expect(await lockOnFirst()).to.equal(undefined);
        process.stdout.write(
          `        ${kind}: bound on the second node -> first node's lock freed ${freed - bound} ms\n`,
        );
        // The child's log line may reach us a moment after the write it reports.
        await eventually(
          'the restarted replica to log the release',
          () => {
            const [released, node] = [output().includes('released'), output().includes(first)];
            return Promise.resolve(
              released && node
                ? true
                : notYet(
                    `"released" in the output: ${released ? 'yes' : 'no'}, ${first}: ${node ? 'yes' : 'no'}; ${outputTail(output())}`,
                  ),
            );
          },
          10_000,
          50,
          wakeOn(child!.stdout, 'data'),
        );
      } finally {
        child?.kill('SIGKILL');
        await scheduler?.stop();
        await core.deleteNamespacedPod({ namespace, name: 'victim', gracePeriodSeconds: 0 }).catch(() => undefined);
        await nodes?.stop();
        await proxy.stop();
        rmSync(certDir, { recursive: true, force: true });
      }
    });
  });
}
