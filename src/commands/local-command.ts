import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, CoreV1Api, loadYaml, type V1MutatingWebhookConfiguration } from '@kubernetes/client-node';
import type { Command } from '../cli.js';
import { UsageError } from '../cli.js';
import { loadConfig } from '../config.js';
import { ClusterCache, kubeSources } from '../cluster/cluster-cache.js';
import { kubeSchedulerConfiguration } from '../extender/scheduler-config.js';
import { loadKubeConfig } from '../kube/client.js';
import { KubeNodeLockApi } from '../kube/node-lock-api.js';
import { ControlPlane } from '../local/control-plane.js';
import { DevicePluginSimulator } from '../local/device-plugin-simulator.js';
import { findFreePort } from '../local/free-port.js';
import { locateBinaries } from '../local/k8s-binaries.js';
import { ShutdownHooks, type ShutdownTarget } from '../local/shutdown-hooks.js';
import { simulatedGpuNode } from '../local/simulated-gpu-node.js';
import { NodeLocks } from '../lock/node-locks.js';
import { NODE_LOCK_ANNOTATION } from '../lock/lock-value.js';
import { renderLiveView } from '../local/live-view.js';
import { runSeedDemo, SEED_VICTIM } from '../local/seed-demo.js';
import { createLogger } from '../telemetry/logger.js';
import { startServer } from './serve-command.js';

function positiveInteger(flag: string, value: string | boolean | string[] | undefined, fallback: number, max = 1000): number {
  if (value === undefined) return fallback;
  const text = String(value);
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > max) {
    throw new UsageError(`invalid --${flag}=${JSON.stringify(text)}: expected a whole number from 1 to ${max}`);
  }
  return Number(text);
}

async function drawView(core: CoreV1Api, cache: ClusterCache, out: (line: string) => void): Promise<void> {
  const nodes = cache.nodeNames().filter((name) => name.startsWith('gpu-node-')).sort().map((name) => ({
    name,
    inventory: cache.inventory(name),
    usage: cache.usageOn(name),
    lock: cache.node(name)?.metadata?.annotations?.[NODE_LOCK_ANNOTATION],
  }));
  const listed = await core.listEventForAllNamespaces({ limit: 200 }).catch(() => ({ items: [] }));
  const events = listed.items
    .map((event) => ({ time: new Date(event.lastTimestamp ?? event.eventTime ?? 0), object: `${event.involvedObject.kind?.toLowerCase() ?? ''}/${event.involvedObject.name ?? ''}`, reason: event.reason ?? '', message: event.message ?? '' }))
    .sort((a, b) => a.time.getTime() - b.time.getTime());
  // Clear the screen and redraw from the top.
  out(`\u001b[2J\u001b[H${renderLiveView(nodes, events, new Date()).join('\n')}`);
}

/**
 * `vgpu-warden local`: the whole system on one machine. A real etcd, kube-apiserver and
 * kube-scheduler on loopback; vgpu-warden's webhook (registered from manifests/webhook.yaml) and
 * scheduler extender; simulated GPU nodes with HAMi's inventory annotation and a device-plugin
 * simulator that allocates and frees the node locks. Runs until Ctrl-C.
 */
export function localCommand(deps: { repoRoot: string; shutdownTarget: ShutdownTarget }): Command {
  return {
    name: 'local',
    summary: 'run a local cluster (etcd, kube-apiserver, kube-scheduler) with vgpu-warden and simulated GPU nodes until Ctrl-C',
    usesConfig: true,
    flags: {
      'gpu-nodes': { type: 'string', description: 'number of simulated GPU nodes (default 2)' },
      'gpus-per-node': { type: 'string', description: 'GPUs on each simulated node (default 4)' },
      'kubeconfig-out': { type: 'string', description: 'also copy the admin kubeconfig to this path' },
      'gpu-memory': { type: 'string', description: 'memory of each simulated GPU in MiB (default 24576)' },
      'scheduler-name': { type: 'string', description: 'scheduler profile GPU pods are sent to (env SCHEDULER_NAME)' },
      demo: { type: 'string', description: 'run a demo once ready: "seed" deletes a lock owner the moment its lock appears and binds a replacement' },
      'exit-after-demo': { type: 'boolean', description: 'stop everything and exit 0 once the demo has finished (headless runs, tests)' },
      'no-view': { type: 'boolean', description: 'do not redraw the live view of nodes, GPU use, locks and events' },
    },
    run: async ({ io, flags, config }) => {
      const nodeCount = positiveInteger('gpu-nodes', flags['gpu-nodes'], 2);
      const gpusPerNode = positiveInteger('gpus-per-node', flags['gpus-per-node'], 4);
      const gpuMemoryMiB = flags['gpu-memory'] === undefined ? 24576 : positiveInteger('gpu-memory', flags['gpu-memory'], 24576, 1_048_576);
      const demo = flags.demo;
      if (demo !== undefined && demo !== 'seed') throw new UsageError(`invalid --demo=${JSON.stringify(demo)}: the only demo is "seed"`);
      const settings = config();
      const binaries = locateBinaries({ repoRoot: deps.repoRoot, env: io.env });
      const hooks = new ShutdownHooks(deps.shutdownTarget, 20_000, (line) => { io.stdout(`local: ${line}`); });
      const say = (line: string) => { io.stdout(`local: ${line}`); };
      const plane = await ControlPlane.start({ binaries, shutdownHooks: hooks, progress: say });
      const certDir = mkdtempSync(join(tmpdir(), 'vgpu-warden-local-certs-'));
      const [webhookPort, extenderPort] = [await findFreePort(), await findFreePort()];
      const server = await startServer(loadConfig({
        ...io.env, KUBECONFIG: plane.kubeconfigPath, CERT_DIR: certDir, WEBHOOK_HOST: '127.0.0.1', WEBHOOK_PORT: String(webhookPort),
        EXTENDER_HOST: '127.0.0.1', EXTENDER_PORT: String(extenderPort), CERT_HOSTS: '127.0.0.1', SCHEDULER_NAME: settings.schedulerName,
        METRICS_HOST: '127.0.0.1', METRICS_PORT: String(await findFreePort()), POD_NAMESPACE: 'default', NODE_SCHEDULER_POLICY: settings.nodeSchedulerPolicy,
      }), createLogger(settings.logLevel === 'info' ? 'warn' : settings.logLevel));
      say(`vgpu-warden webhook on https://127.0.0.1:${webhookPort}, extender on https://127.0.0.1:${extenderPort}`);

      const kubeConfig = loadKubeConfig(plane.kubeconfigPath);
      const core = kubeConfig.makeApiClient(CoreV1Api);
      const caPem = server.keeper.current()?.caBundlePem ?? '';
      const shipped = loadYaml<V1MutatingWebhookConfiguration>(readFileSync(join(deps.repoRoot, 'manifests', 'webhook.yaml'), 'utf8'));
      await kubeConfig.makeApiClient(AdmissionregistrationV1Api).createMutatingWebhookConfiguration({
        body: {
          metadata: { name: 'vgpu-warden' },
          webhooks: (shipped.webhooks ?? []).map((webhook) => ({ ...webhook, clientConfig: { url: `https://127.0.0.1:${webhookPort}/mutate`, caBundle: Buffer.from(caPem).toString('base64') } })),
        },
      });
      for (let index = 1; index <= nodeCount; index++) {
        await core.createNode({ body: simulatedGpuNode({ name: `gpu-node-${index}`, gpus: gpusPerNode, gpuMemoryMiB }) });
      }
      const simulatorCache = new ClusterCache({ sources: kubeSources(kubeConfig, core) });
      await simulatorCache.start();
      const simulator = new DevicePluginSimulator({
        core,
        cache: simulatorCache,
        locks: new NodeLocks({ api: new KubeNodeLockApi(core), config: { bindGraceMs: settings.bindGraceMs, expireMs: settings.nodeLockExpireMs } }),
        isSimulated: (node) => node.startsWith('gpu-node-'),
        // The seed demo's victim must hold its lock as a pod still waiting for Allocate would.
        behaviour: (pod) => (pod.metadata?.name === SEED_VICTIM ? 'stall' : 'allocate'),
      });
      simulator.start();
      await plane.startScheduler(kubeSchedulerConfiguration({
        schedulerName: settings.schedulerName, extenderUrl: `https://127.0.0.1:${extenderPort}`, caPem, includeDefaultProfile: true,
        nodePolicy: settings.nodeSchedulerPolicy,
      }));
      say(`kube-scheduler with profiles default-scheduler and ${settings.schedulerName} (extender: filter, prioritize, bind)`);
      say(`${nodeCount} simulated GPU nodes with ${gpusPerNode} GPUs each, and a device-plugin simulator`);
      let kubeconfigPath = plane.kubeconfigPath;
      const out = flags['kubeconfig-out'];
      if (typeof out === 'string') {
        copyFileSync(plane.kubeconfigPath, out);
        kubeconfigPath = out;
      }
      say(`ready; use it with: export KUBECONFIG=${kubeconfigPath}`);
      say('try: a pod with limits nvidia.com/gpu: 1 and nvidia.com/gpumem: 4000 (the webhook sends it to the extender)');
      if (demo === 'seed') {
        await runSeedDemo({ core, namespace: 'default', node: 'gpu-node-1', say });
        if (flags['exit-after-demo'] === true) {
          say('demo finished; stopping');
          simulator.stop();
          await simulatorCache.stop();
          await server.stop();
          await plane.stop();
          rmSync(certDir, { recursive: true, force: true });
          return 0;
        }
      }
      say('press Ctrl-C to stop and remove everything');
      const viewTimer = flags['no-view'] !== true && process.stdout.isTTY
        ? setInterval(() => { void drawView(core, simulatorCache, io.stdout); }, 2000)
        : undefined;
      hooks.register({
        name: 'vgpu-warden',
        stop: async () => { simulator.stop(); await simulatorCache.stop(); await server.stop(); rmSync(certDir, { recursive: true, force: true }); },
        killSync: () => { rmSync(certDir, { recursive: true, force: true }); },
      });
      // Runs until a signal (the shutdown hooks then stop everything and exit) or until a component
      // dies. The interval keeps Node's event loop alive: child processes are deliberately unref'd.
      const keepAlive = setInterval(() => undefined, 60_000);
      const crashed = await plane.firstUnexpectedExit();
      clearInterval(keepAlive);
      clearInterval(viewTimer);
      io.stderr(`local: ${crashed.name} exited unexpectedly; last log lines:\n${crashed.lastLogLines()}`);
      await server.stop();
      await plane.stop();
      return 1;
    },
  };
}
