// The chaos runner: a real control plane, two vgpu-warden replicas (real processes, leader election
// on, each behind its own fault proxy), the real kube-scheduler and kube-controller-manager, the
// HAMi device-plugin stand-in with its kubelet simulator on simulated GPU nodes, a seeded random
// workload and a seeded fault plan, with the invariants checked continuously.
//   npm run chaos -- --seed N --minutes M [--nodes 6 | --nodes real | --nodes real:N | --nodes real:N+M] [--keep-logs]
// With --nodes real the nodes are real (kubelet + containerd each, the stand-in over gRPC, 3 unless
// real:N says otherwise; root and the packages npm run setup installs), kubelet and plugin faults join the
// plan, and every Running GPU container's environment is checked against its pod's allocation.
// real:N+M adds M simulated nodes beside the N real ones, for a workload larger than N kubelets.
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  CoreV1Api,
  loadYaml,
  type V1MutatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { kubeSchedulerConfiguration } from '../../src/extender/scheduler-config.js';
import { GPU_ALLOCATABLE_RESOURCE, NODE_LOCK_ANNOTATION } from '../../src/hami/wire.js';
import { loadKubeConfig } from '../../src/kube/client.js';
import { ControlPlane } from '../../src/local/control-plane.js';
import { locateBinaries } from '../../src/local/k8s-binaries.js';
import { ShutdownHooks } from '../../src/local/shutdown-hooks.js';
import { simulatedGpuNode } from '../../src/local/simulated-gpu-node.js';
import { bundleFromSecretData } from '../../src/tls/secret-cert-store.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { REAL_NODE_CONTAINER } from '../support/real-gpu-nodes.js';
import { ClusterObserver } from './cluster-observer.js';
import { DEFAULT_INTERVALS, describeFault, planFaults } from './fault-plan.js';
import { FaultInjector, OutageLog } from './fault-injector.js';
import { checkAllBound, checkCapacity, checkForeignDevices, LockTracker, type Violation } from './invariants.js';
import { mixedNodeAgents } from './mixed-node-agents.js';
import { createNodeAgents } from './node-agents-impl.js';
import { RealNodeAgents } from './real-node-agents.js';
import { Prng } from './prng.js';
import { SchedulerSupervisor } from './scheduler-supervisor.js';
import { ReplicaSet } from './replica-set.js';
import { TcpBalancer } from './tcp-balancer.js';
import { lockReleaseNote } from './replica-log.js';
import { Timeline } from './timeline.js';
import { PLUGIN_BEHAVIOUR_LABEL, Workload, type PluginBehaviour } from './workload.js';

const repoRoot = resolve(import.meta.dirname, '..', '..');
const { values: args } = parseArgs({
  options: {
    seed: { type: 'string', default: '1' },
    minutes: { type: 'string', default: '2' },
    nodes: { type: 'string', default: '6' },
    'keep-logs': { type: 'boolean', default: false },
  },
});
const seed = Number(args.seed);
const minutes = Number(args.minutes);
const realSpec = /^real(?::(\d+)(?:\+(\d+))?)?$/.exec(args.nodes);
const realNodes = realSpec !== null;
const realCount = realSpec === null ? 0 : Number(realSpec[1] ?? 3);
const simulatedCount = realSpec === null ? Number(args.nodes) : Number(realSpec[2] ?? 0);
const nodeCount = realCount + simulatedCount;
if (
  !Number.isInteger(seed) ||
  !(minutes > 0) ||
  !Number.isInteger(nodeCount) ||
  nodeCount < 2 ||
  (realNodes && realCount < 2)
) {
  process.stderr.write(
    'chaos: --seed must be an integer, --minutes a positive number, --nodes an integer >= 2 or real[:N[+M]] (N >= 2 real nodes, M simulated beside them)\n',
  );
  process.exit(2);
}

const GPUS_PER_NODE = 4;
const SWEEP_EVERY_S = 5;
const LEASE_S = 15;
// Shares are at most 1/4 of a GPU (6000 of 24576 MiB, 25 of 100 cores), so a GPU with at most 3
// shares always has room for one more. A 2-GPU pod cannot be placed only if every node has at most
// one such GPU, i.e. at least 3 x 4 shares on each: more than this budget. So every pending pod fits.
const MAX_GPU_UNITS = Math.min(3 * GPUS_PER_NODE * nodeCount - 1, 2 * GPUS_PER_NODE * nodeCount);
const CHAOS_MS = minutes * 60_000;
const SETTLE_MS = 8_000;
const QUIESCE_MS = 90_000;
const NAMESPACE = 'chaos';
const NODE_LABEL = { 'chaos.vgpu-warden.io/node': 'true' };

const log = (line: string) => {
  process.stdout.write(`[chaos] ${line}\n`);
};
const logDir = mkdtempSync(join(tmpdir(), `vgpu-warden-chaos-${seed}-`));
const random = new Prng(seed);
const plan = planFaults(random.fork('faults'), {
  startMs: SETTLE_MS,
  endMs: CHAOS_MS,
  replicas: 2,
  meanIntervalMs: DEFAULT_INTERVALS,
});
log(
  `seed ${seed}, ${minutes} min of chaos, ${realNodes ? `${realCount} real${simulatedCount > 0 ? ` + ${simulatedCount} simulated` : ''}` : `${nodeCount} simulated`} nodes x ${GPUS_PER_NODE} GPUs, at most ${MAX_GPU_UNITS} GPU shares live; ${plan.length} faults planned; logs in ${logDir}`,
);

const plane = await ControlPlane.start({
  binaries: locateBinaries({ repoRoot, env: process.env }),
  shutdownHooks: new ShutdownHooks(process),
  baseDir: logDir,
});
const cleanups: (() => Promise<unknown>)[] = [];
const violations: Violation[] = [];
let exitCode = 0;
let replicasCrashed = 0;
try {
  const kubeConfig = loadKubeConfig(plane.kubeconfigPath);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const apps = kubeConfig.makeApiClient(AppsV1Api);
  const manager = await plane.startControllerManager();
  cleanups.push(() => manager.stop());
  await core.createNamespace({ body: { metadata: { name: 'vgpu-warden' } } });
  await core.createNamespace({
    body: { metadata: { name: NAMESPACE, labels: { 'chaos.vgpu-warden.io/webhook': 'on' } } },
  });
  // Real nodes register themselves when their kubelet starts (below); simulated ones are made here.
  const realNames = Array.from({ length: realCount }, (_, index) => `chaos-node-${index}`);
  const simulatedNames = Array.from({ length: simulatedCount }, (_, index) =>
    realNodes ? `chaos-sim-${index}` : `chaos-node-${index}`,
  );
  for (const name of simulatedNames)
    await core.createNode({ body: simulatedGpuNode({ name, gpus: GPUS_PER_NODE, labels: NODE_LABEL }) });

  // Two replicas, each with its own proxy to the apiserver (faults hit one replica at a time).
  const proxies = [
    await FaultProxy.start({ upstream: plane, baseDir: logDir }),
    await FaultProxy.start({ upstream: plane, baseDir: logDir }),
  ];
  cleanups.push(() => Promise.all(proxies.map((proxy) => proxy.stop())));
  // Set once the time line exists: the replicas' lock releases before the chaos phase explain nothing.
  let onReplicaLine: (index: number, line: string) => void = () => undefined;
  const replicas = new ReplicaSet({
    logFile: join(logDir, 'replicas.log'),
    onLine: (index, line) => {
      onReplicaLine(index, line);
    },
    env: {
      POD_NAMESPACE: 'vgpu-warden',
      CERT_SECRET_NAME: 'vgpu-warden-tls',
      CERT_HOSTS: '127.0.0.1',
      WEBHOOK_CONFIG_NAME: 'chaos-webhook',
      SWEEP_SCHEDULE: `*/${SWEEP_EVERY_S} * * * * *`,
      LOG_LEVEL: 'info',
    },
  });
  cleanups.push(() => replicas.stopAll());
  for (const proxy of proxies) await replicas.add(proxy.kubeconfigPath);
  const up = (port: (index: number) => number) => () =>
    Array.from({ length: replicas.size }, (_, index) => index)
      .filter((index) => replicas.isUp(index))
      .map(port);
  const extender = await TcpBalancer.start(up((index) => replicas.ports(index).extender));
  const webhook = await TcpBalancer.start(up((index) => replicas.ports(index).webhook));
  cleanups.push(
    () => extender.stop(),
    () => webhook.stop(),
  );

  // The webhook (CREATE defaults, DELETE release) for the chaos namespace, reached through the balancer.
  const shipped = loadYaml<V1MutatingWebhookConfiguration>(
    readFileSync(join(repoRoot, 'manifests', 'webhook.yaml'), 'utf8'),
  );
  await kubeConfig.makeApiClient(AdmissionregistrationV1Api).createMutatingWebhookConfiguration({
    body: {
      metadata: { name: 'chaos-webhook' },
      webhooks: (shipped.webhooks ?? []).map((entry) => ({
        ...entry,
        clientConfig: { url: `https://127.0.0.1:${webhook.port}/mutate` },
        namespaceSelector: { matchLabels: { 'chaos.vgpu-warden.io/webhook': 'on' } },
      })),
    },
  });

  replicas.start(0);
  const caPem = await (async () => {
    for (let waited = 0; waited < 60_000; waited += 250) {
      const secret = await core
        .readNamespacedSecret({ namespace: 'vgpu-warden', name: 'vgpu-warden-tls' })
        .catch(() => undefined);
      const bundle = secret === undefined ? undefined : bundleFromSecretData(secret.data);
      if (bundle !== undefined && bundle.caCertPem !== '') return bundle.caCertPem;
      await new Promise((done) => setTimeout(done, 250));
    }
    throw new Error('replica 0 did not create its certificate Secret within 60 s');
  })();
  replicas.start(1);
  const scheduler = await SchedulerSupervisor.start(
    plane,
    kubeSchedulerConfiguration({
      schedulerName: 'hami-scheduler',
      extenderUrl: `https://127.0.0.1:${extender.port}`,
      caPem,
    }),
    { logDir, log },
  );
  cleanups.push(() => scheduler.stop());

  const behaviourOf = (labels: Readonly<Record<string, string>>): PluginBehaviour => {
    const value = labels[PLUGIN_BEHAVIOUR_LABEL];
    return value === 'fail' || value === 'stall' ? value : 'ok';
  };
  const started = Date.now();
  const timeline = new Timeline({ started });
  const note = (subjects: string[], text: string) => {
    timeline.add(subjects, text);
  };
  onReplicaLine = (index, line) => {
    const release = lockReleaseNote(index, line);
    if (release !== undefined) note(release.subjects, release.text);
  };
  const real = realNodes
    ? new RealNodeAgents({
        plane,
        kubeConfig,
        core,
        repoRoot,
        nodes: realNames,
        labels: NODE_LABEL,
        gpusPerNode: GPUS_PER_NODE,
        random: random.fork('nodes'),
        faultsFromMs: SETTLE_MS,
        faultsUntilMs: CHAOS_MS,
        note,
      })
    : undefined;
  const simulated =
    simulatedCount > 0
      ? createNodeAgents({ core, kubeConfig, nodes: simulatedNames, behaviourOf, seed, note })
      : undefined;
  const agents = real !== undefined && simulated !== undefined ? mixedNodeAgents(real, simulated) : (real ?? simulated);
  if (agents === undefined) throw new Error('no nodes');
  await agents.start();
  cleanups.push(() => agents.stop());

  const outages = new OutageLog();
  const observer = new ClusterObserver({
    core,
    namespace: NAMESPACE,
    nodeSelector: 'chaos.vgpu-warden.io/node=true',
    timeline,
  });
  const locks = new LockTracker({
    staleAfterMs: (SWEEP_EVERY_S + LEASE_S + 10) * 1000,
    ...(realNodes ? { goneOwnerExtraMs: 30_000 } : {}),
  });
  const workload = new Workload({
    core,
    apps,
    random: random.fork('workload'),
    timeline,
    options: {
      namespace: NAMESPACE,
      schedulerName: 'hami-scheduler',
      nodeSelector: NODE_LABEL,
      maxGpuUnits: MAX_GPU_UNITS,
      ...(realNodes ? { container: REAL_NODE_CONTAINER, hostNetwork: true } : {}),
    },
  });
  const injector = new FaultInjector({ plane, proxies, replicas, timeline, outages, started });
  const boundPods = new Set<string>();
  let checkedRecords = 0;
  let latest = await observer.snapshot();

  const report = (found: Violation[]) => {
    for (const violation of found) {
      violations.push(violation);
      log(
        `VIOLATION ${violation.invariant}: ${violation.message}\n--- time line (seed ${seed}) ---\n${timeline.explain(violation.subjects)}\n---`,
      );
    }
  };
  // No replica up (all crashed or killed at once): nothing can release a lock meanwhile.
  let noReplica: { end: () => void } | undefined;
  const check = async () => {
    const anyUp = Array.from({ length: replicas.size }, (_, index) => index).some((index) => replicas.isUp(index));
    if (!anyUp) noReplica ??= outages.begin();
    else if (noReplica !== undefined) {
      noReplica.end();
      noReplica = undefined;
    }
    const snapshot = await observer.snapshot();
    if (snapshot === undefined) return;
    latest = snapshot;
    for (const pod of snapshot.pods) if (pod.nodeName !== undefined) boundPods.add(pod.uid);
    const records = agents.records();
    report(
      checkCapacity(snapshot, agents.decode).filter(
        (found) => !violations.some((known) => known.message === found.message),
      ),
    );
    report(checkForeignDevices(records.slice(checkedRecords)));
    if (agents.checkContainers !== undefined) report(await agents.checkContainers(snapshot));
    checkedRecords = records.length;
    report(locks.observe(snapshot, records, (from, to) => outages.within(from, to)));
  };

  injector.schedule(plan);
  log('chaos phase');
  let nextCheck = 0;
  while (Date.now() - started < CHAOS_MS) {
    await workload.step(latest);
    if (Date.now() >= nextCheck) {
      await check();
      nextCheck = Date.now() + 500;
    }
    await new Promise((done) => setTimeout(done, 150 + Math.floor(random.next() * 450)));
  }

  log('quiesce phase: faults off, stalled pods deleted, every pending pod must bind');
  await injector.stop();
  for (let index = 0; index < replicas.size; index++) replicas.start(index);
  await workload.deleteAllStalls();
  const quiesceEnd = Date.now() + QUIESCE_MS;
  for (;;) {
    await check();
    if (latest !== undefined && checkAllBound(latest).length === 0) break;
    if (Date.now() > quiesceEnd) {
      if (latest !== undefined) {
        const unbound = checkAllBound(latest);
        report(unbound);
        if (unbound.length > 0)
          await logWhyUnbound(
            core,
            unbound.flatMap((violation) => violation.subjects),
          );
      }
      break;
    }
    await new Promise((done) => setTimeout(done, 500));
  }
  // Locks whose owners are gone must go within the stale bound after the faults stopped too.
  const lockDeadline = Date.now() + (SWEEP_EVERY_S + 10) * 1000;
  while (Date.now() < lockDeadline) {
    await check();
    await new Promise((done) => setTimeout(done, 500));
  }
  report(locks.finish());

  const records = agents.records();
  const summary = {
    seed,
    minutes,
    nodes: nodeCount,
    gpusPerNode: GPUS_PER_NODE,
    workload: workload.counts,
    podsBound: boundPods.size,
    allocations: {
      total: records.length,
      ok: records.filter((record) => record.ok).length,
      failed: records.filter((record) => !record.ok).length,
      ...(real !== undefined && simulatedCount > 0
        ? { onSimulatedNodes: records.filter((record) => simulatedNames.includes(record.node)).length }
        : {}),
    },
    faults: injector.applied,
    replicaCrashRestarts: replicas.crashRestarts,
    schedulerRestarts: scheduler.exits.length,
    faultsPlanned: plan.length,
    ...(real === undefined
      ? {}
      : {
          realNodes: realCount,
          simulatedNodes: simulatedCount,
          nodeFaults: real.faultCounts,
          containersChecked: real.containersChecked,
        }),
    violations: violations.length,
  };
  log(`summary ${JSON.stringify(summary)}`);
  // A replica that exited on its own is no violation, but its log is the only record of why.
  replicasCrashed = replicas.crashRestarts;
  if (violations.length > 0) {
    log(
      `${violations.length} violation(s); replay with: npm run chaos -- --seed ${seed} --minutes ${minutes}${realNodes ? ` --nodes ${args.nodes}` : ''}`,
    );
    log(`fault plan:\n${plan.map(describeFault).join('\n')}`);
    // The control plane's run folder goes with it; kube-scheduler's view of the run is kept here.
    const current = scheduler.handle?.process;
    if (current !== undefined) {
      copyFileSync(current.logFile, join(logDir, 'kube-scheduler.log'));
      const complaints = current
        .lastLogLines(4000)
        .split('\n')
        .filter((line) => /^[EW]\d{4} /.test(line))
        .slice(-40);
      log(
        `kube-scheduler's last errors and warnings (whole log: ${join(logDir, 'kube-scheduler.log')}):\n${complaints.map((line) => line.slice(0, 400)).join('\n')}`,
      );
    }
    exitCode = 1;
  } else {
    log('0 violations');
  }
} catch (error) {
  log(`the run itself failed: ${(error as Error).stack ?? String(error)}`);
  exitCode = 3;
} finally {
  // Clean-up must not decide the exit code: a stop that never settles would otherwise end the
  // process with Node's "unsettled top-level await" (13) instead of the verdict (seen once).
  process.exitCode = exitCode;
  setTimeout(() => {
    process.stderr.write('[chaos] clean-up did not finish within 60 s; exiting\n');
    process.exit(exitCode);
  }, 60_000);
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  await plane.stop();
  if (!args['keep-logs'] && exitCode === 0 && replicasCrashed === 0) rmSync(logDir, { recursive: true, force: true });
  else
    log(
      `logs kept in ${logDir}${exitCode === 0 && replicasCrashed > 0 ? ` (${replicasCrashed} replica exit(s) on their own: "exited on its own" in replicas.log)` : ''}`,
    );
}
process.exit(exitCode);

/**
 * What kube-scheduler last said of each pod left unbound, and what the GPU nodes offered then: the
 * scheduler's own log is not kept, and a not-bound violation without its reason cannot be replayed
 * into a fix. Bounded: the newest event per pod and reason, each message cut at 300 characters.
 */
async function logWhyUnbound(core: CoreV1Api, pods: readonly string[]): Promise<void> {
  try {
    const wanted = new Set(pods);
    const events = (await core.listNamespacedEvent({ namespace: NAMESPACE })).items.filter(
      (event) => wanted.has(`${NAMESPACE}/${event.involvedObject.name ?? ''}`) && event.type === 'Warning',
    );
    const newest = new Map<string, { at: number; line: string }>();
    for (const event of events) {
      const key = `${event.involvedObject.name ?? ''} ${event.reason ?? ''}`;
      const at = new Date(event.lastTimestamp ?? event.eventTime ?? 0).getTime();
      if ((newest.get(key)?.at ?? -1) < at)
        newest.set(key, { at, line: `${key} x${event.count ?? 1}: ${(event.message ?? '').slice(0, 300)}` });
    }
    for (const { line } of [...newest.values()].slice(0, 60)) process.stdout.write(`[chaos] why unbound: ${line}\n`);
    for (const node of (await core.listNode({ labelSelector: 'chaos.vgpu-warden.io/node=true' })).items) {
      const ready = node.status?.conditions?.find((condition) => condition.type === 'Ready')?.status;
      process.stdout.write(
        `[chaos] node ${node.metadata?.name ?? ''}: Ready=${ready ?? '?'} allocatable nvidia.com/gpu=${node.status?.allocatable?.[GPU_ALLOCATABLE_RESOURCE] ?? '-'} lock=${node.metadata?.annotations?.[NODE_LOCK_ANNOTATION] ?? '-'} taints=${(node.spec?.taints ?? []).map((taint) => taint.key).join(',') || '-'}\n`,
      );
    }
  } catch (error) {
    process.stdout.write(`[chaos] could not read why pods are unbound: ${(error as Error).message}\n`);
  }
}
