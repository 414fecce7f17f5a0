import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { httpStatusOf } from '../../src/kube/errors.js';
import { loadKubeConfig } from '../../src/kube/client.js';
import { kubernetesVersionOf, locateBinaries } from '../../src/local/k8s-binaries.js';
import { hostProcesses } from '../../src/local/host-processes.js';
import { locateRealNodeTools, RealNodeFleet, TEST_IMAGE, type RealNode } from '@vgpu-warden/stand-ins/real-node';
import { cleanUpTestNamespace, eventually, notYet, sharedControlPlane, testCluster } from '../support/test-cluster.js';

/**
 * Everything on the host a real node could leave behind or change, read independently of the
 * fixture's own bookkeeping: processes, cgroups in every hierarchy, mounts, the kernel settings
 * kubelet wants, and the host folders kubelet and containerd write to by fixed paths.
 */
interface HostSnapshot {
  processes: string[];
  cgroups: string[];
  mounts: string[];
  sysctls: Record<string, string>;
  hostPaths: Record<string, boolean>;
}

const KUBELET_SYSCTLS = [
  'vm/overcommit_memory',
  'vm/panic_on_oom',
  'kernel/panic',
  'kernel/panic_on_oops',
  'kernel/keys/root_maxkeys',
  'kernel/keys/root_maxbytes',
];
const HOST_PATHS = [
  '/var/lib/kubelet',
  '/run/containerd',
  '/run/containerd/s',
  '/var/log/containers',
  '/var/log/pods',
  '/usr/libexec/kubernetes',
  '/opt/containerd',
  '/var/run/netns',
  '/etc/cni/net.d',
  '/var/lib/cni',
];
const NODE_PROGRAMS = new Set(['kubelet', 'containerd', 'containerd-shim', 'containerd-shim-runc-v2', 'runc']);

function readOr(path: string, fallback: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return fallback;
  }
}

function hostSnapshot(baseDir: string, marker: string, cgroupNames: readonly string[]): HostSnapshot {
  const processes: string[] = [];
  for (const pid of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    const argv = readOr(`/proc/${pid}/cmdline`, '')
      .split('\0')
      .filter((arg) => arg !== '');
    const comm = readOr(`/proc/${pid}/comm`, '').trim();
    if (argv.length === 0 || pid === String(process.pid)) continue;
    const program = basename(argv[0] ?? '');
    const ours =
      argv.some((arg) => arg.includes(baseDir)) || readOr(`/proc/${pid}/environ`, '').split('\0').includes(marker);
    // A node program of another run on this machine (a chaos or e2e run beside this one) names its
    // own run folder; one that names none could be an escaped process of ours, and counts.
    // A `runc init` names nothing: its cgroup (under another run's node root) tells.
    const cgroup = readOr(`/proc/${pid}/cgroup`, '');
    const otherNodeCgroup =
      cgroup.includes('/vgpu-warden-') && !cgroupNames.some((name) => cgroup.includes(`/${name}`));
    const anotherRun = !ours && (argv.some((arg) => arg.includes('/vgpu-warden-rn-')) || otherNodeCgroup);
    if (ours || ((NODE_PROGRAMS.has(program) || NODE_PROGRAMS.has(comm)) && !anotherRun))
      processes.push(`${pid} ${argv.join(' ').slice(0, 200)}`);
  }
  const cgroups: string[] = [];
  for (const hierarchy of readdirSync('/sys/fs/cgroup')) {
    for (const name of cgroupNames)
      if (existsSync(join('/sys/fs/cgroup', hierarchy, name))) cgroups.push(join(hierarchy, name));
  }
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter((line) => line.includes(baseDir));
  const sysctls = Object.fromEntries(
    KUBELET_SYSCTLS.map((key) => [key, readOr(`/proc/sys/${key}`, 'unreadable').trim()]),
  );
  const hostPaths = Object.fromEntries(HOST_PATHS.map((path) => [path, existsSync(path)]));
  return { processes: processes.sort(), cgroups, mounts, sysctls, hostPaths };
}

/** Host pids of the processes that carry `VAR=value` in their environment (a pod's containers). */
function processesWithEnv(entry: string): number[] {
  return readdirSync('/proc')
    .filter((pid) => /^\d+$/.test(pid) && readOr(`/proc/${pid}/environ`, '').split('\0').includes(entry))
    .map(Number);
}

function hostNetworkPod(name: string, nodeName: string, marker: { name: string; value: string }): V1Pod {
  return {
    metadata: { name },
    spec: {
      nodeName,
      hostNetwork: true,
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'main',
          image: TEST_IMAGE,
          imagePullPolicy: 'Never',
          command: ['sh', '-c', 'echo hello-$POD; sleep 3600'],
          env: [{ name: 'POD', value: name }, marker],
        },
      ],
    },
  };
}

async function runningPod(namespace: string, name: string, timeoutMs: number): Promise<V1Pod> {
  const { core } = testCluster();
  return eventually(
    `pod ${name} Running`,
    async () => {
      const pod = await core.readNamespacedPod({ name, namespace });
      const waiting = pod.status?.containerStatuses?.[0]?.state?.waiting;
      return pod.status?.phase === 'Running'
        ? pod
        : notYet(
            `phase ${pod.status?.phase ?? 'none'}${waiting ? ` (${waiting.reason ?? ''}: ${waiting.message ?? ''})` : ''}`,
          );
    },
    timeoutMs,
    100,
  );
}

function readyCondition(node: V1Node) {
  return node.status?.conditions?.find((condition) => condition.type === 'Ready');
}

describe('real nodes (kubelet + containerd in namespaces of their own)', function () {
  this.timeout(120_000);
  const run = randomBytes(3).toString('hex');
  const names = [`rn-${run}-0`, `rn-${run}-1`];
  // In the environment of every test pod, so the leftover check finds pod processes by it.
  const marker = { name: 'VGPU_WARDEN_RN_TEST', value: run };
  const cgroupNames = names.map((name) => `vgpu-warden-${name}`);
  let baseDir = '';
  let hostBefore: HostSnapshot | undefined;
  let fleet: RealNodeFleet | undefined;
  const nodes = (): RealNode[] => fleet?.nodes ?? [];

  let kubeletVersion = '';
  before(async function () {
    this.timeout(120_000);
    // Short (sockets live inside) and ours alone, so the leftover check can name everything in it.
    baseDir = mkdtempSync(join(tmpdir(), 'vgpu-warden-rnt-'));
    hostBefore = hostSnapshot(baseDir, `${marker.name}=${marker.value}`, cgroupNames);
    const plane = sharedControlPlane();
    const binaries = locateBinaries({ repoRoot: join(import.meta.dirname, '..', '..'), env: process.env });
    kubeletVersion = kubernetesVersionOf(binaries);
    const started = Date.now();
    fleet = await RealNodeFleet.start({
      nodes: names.map((name, index) => ({ name, labels: { 'vgpu-warden.test/real-node': String(index) } })),
      baseDir,
      cluster: plane,
      kubeConfig: loadKubeConfig(plane.kubeconfigPath),
      tools: locateRealNodeTools(binaries),
      processes: hostProcesses,
    });
    process.stdout.write(`      (2 real nodes started and Ready in ${Date.now() - started} ms)\n`);
  });

  after(async function () {
    this.timeout(60_000);
    try {
      await fleet?.stop();
    } finally {
      if (baseDir !== '') rmSync(baseDir, { recursive: true, force: true });
    }
  });

  it('registers both nodes Ready with InternalIP 127.0.0.1, their labels, and no cloud taint', async () => {
    const { core } = testCluster();
    for (const [index, name] of names.entries()) {
      const node = await core.readNode({ name });
      expect(readyCondition(node)?.status, `${name} Ready`).to.equal('True');
      expect(node.status?.addresses).to.deep.equal([
        { type: 'InternalIP', address: '127.0.0.1' },
        { type: 'Hostname', address: name },
      ]);
      expect((node.spec?.taints ?? []).map((taint) => taint.key)).to.not.include(
        'node.cloudprovider.kubernetes.io/uninitialized',
      );
      expect(node.metadata?.labels?.['vgpu-warden.test/real-node']).to.equal(String(index));
      expect(node.status?.nodeInfo?.kubeletVersion).to.equal(kubeletVersion);
      expect(node.status?.nodeInfo?.containerRuntimeVersion).to.match(/^containerd:\/\/1\.6\./);
    }
    for (const node of nodes()) {
      expect(
        existsSync(join(node.devicePluginDir, 'kubelet.sock')),
        `${node.nodeName} kubelet.sock on the host`,
      ).to.equal(true);
      expect(node.kubeletPid).to.be.a('number');
      expect(node.containerdPid).to.be.a('number');
    }
    // The leftover check sees a running node (else the final comparison would prove nothing);
    // its mounts stay invisible to the host all along.
    const running = hostSnapshot(baseDir, `${marker.name}=${marker.value}`, cgroupNames);
    for (const node of nodes()) {
      expect(
        running.processes.some((line) => line.startsWith(`${String(node.kubeletPid)} `)),
        `kubelet of ${node.nodeName} seen`,
      ).to.equal(true);
      expect(
        running.processes.some((line) => line.startsWith(`${String(node.containerdPid)} `)),
        `containerd of ${node.nodeName} seen`,
      ).to.equal(true);
    }
    expect(running.cgroups).to.have.length(readdirSync('/sys/fs/cgroup').length * names.length);
    expect(running.mounts).to.deep.equal([]);
    expect(running.sysctls).to.deep.equal(hostBefore?.sysctls);
  });

  it('runs a hostNetwork pod on each node and serves its log through kube-apiserver', async () => {
    const { core, namespace } = testCluster();
    const started = Date.now();
    await Promise.all(
      names.map((nodeName, index) =>
        core.createNamespacedPod({ namespace, body: hostNetworkPod(`hello-${index}`, nodeName, marker) }),
      ),
    );
    await Promise.all(names.map((_, index) => runningPod(namespace, `hello-${index}`, 20_000)));
    process.stdout.write(`      (2 pods created → Running in ${Date.now() - started} ms)\n`);
    for (const index of names.keys()) {
      const log = await eventually(
        `log of hello-${index}`,
        async () => {
          const text = await core.readNamespacedPodLog({ name: `hello-${index}`, namespace, container: 'main' });
          return text.includes(`hello-hello-${index}`) ? text : notYet(JSON.stringify(text));
        },
        10_000,
        200,
      );
      expect(log.trim()).to.equal(`hello-hello-${index}`);
    }
  });

  it('freezes kubelet with SIGSTOP (no status, no new pods) and thaws it with SIGCONT', async () => {
    const { core, namespace } = testCluster();
    const node = nodes()[0];
    if (node === undefined) throw new Error('no node');
    node.pause();
    try {
      const frozenAt = readyCondition(await core.readNode({ name: node.nodeName }))?.lastHeartbeatTime;
      await core.createNamespacedPod({ namespace, body: hostNetworkPod('while-frozen', node.nodeName, marker) });
      await new Promise((resolve) => setTimeout(resolve, 3000));
      // nodeStatusUpdateFrequency is 1 s: three seconds without a heartbeat means kubelet is frozen.
      expect(readyCondition(await core.readNode({ name: node.nodeName }))?.lastHeartbeatTime).to.deep.equal(frozenAt);
      expect((await core.readNamespacedPod({ name: 'while-frozen', namespace })).status?.phase).to.equal('Pending');
    } finally {
      node.resume();
    }
    await runningPod(namespace, 'while-frozen', 20_000);
    const heartbeat = readyCondition(await core.readNode({ name: node.nodeName }))?.lastHeartbeatTime;
    expect(heartbeat?.getTime() ?? 0).to.be.greaterThan(Date.now() - 5000);
  });

  it('kills the containers of pods the namespace clean-up force-deletes', async () => {
    const { core, namespace } = testCluster();
    const [first] = names;
    if (first === undefined) throw new Error('no node');
    await core.createNamespacedPod({ namespace, body: hostNetworkPod('doomed', first, marker) });
    await runningPod(namespace, 'doomed', 20_000);
    expect(processesWithEnv('POD=doomed')).to.have.length.greaterThan(0);
    // What cluster-hooks' afterEach does after every test.
    await cleanUpTestNamespace();
    await eventually(
      'doomed gone from the API',
      async () => {
        const left = await core.readNamespacedPod({ name: 'doomed', namespace }).then(
          () => 'still there',
          (error: unknown) => (httpStatusOf(error) === 404 ? 'gone' : String(error)),
        );
        return left === 'gone' ? left : notYet(left);
      },
      10_000,
    );
    await eventually(
      'the container of doomed killed on the node',
      () => {
        const pids = processesWithEnv('POD=doomed');
        return Promise.resolve(pids.length === 0 ? 'killed' : notYet(`pids ${pids.join(', ')}`));
      },
      20_000,
      200,
    );
  });

  it('restarts kubelet alone: the pod keeps running in the same process', async () => {
    const { core, namespace } = testCluster();
    const node = nodes()[1];
    if (node === undefined) throw new Error('no node');
    await core.createNamespacedPod({ namespace, body: hostNetworkPod('survivor', node.nodeName, marker) });
    await runningPod(namespace, 'survivor', 20_000);
    const podProcesses = processesWithEnv('POD=survivor');
    const oldKubelet = node.kubeletPid;
    const started = Date.now();
    await node.restartKubelet();
    process.stdout.write(`      (kubelet killed, restarted and Ready again in ${Date.now() - started} ms)\n`);
    expect(node.kubeletPid).to.be.a('number').and.not.equal(oldKubelet);
    expect(processesWithEnv('POD=survivor')).to.deep.equal(podProcesses);
    const pod = await core.readNamespacedPod({ name: 'survivor', namespace });
    expect(pod.status?.phase).to.equal('Running');
    expect(pod.status?.containerStatuses?.[0]?.restartCount).to.equal(0);
  });

  it('stops both nodes, even with containerd killed under running pods, and leaves the host as it was', async () => {
    const { core, namespace } = testCluster();
    const node = nodes()[0];
    if (node === undefined || fleet === undefined) throw new Error('no node');
    await core.createNamespacedPod({ namespace, body: hostNetworkPod('orphaned', node.nodeName, marker) });
    await runningPod(namespace, 'orphaned', 20_000);
    // The shim and the pod outlive a killed containerd; the teardown still has to find them.
    await node.killContainerd();
    expect(node.containerdPid).to.equal(undefined);
    expect(processesWithEnv('POD=orphaned')).to.have.length.greaterThan(0);

    const started = Date.now();
    await fleet.stop();
    process.stdout.write(`      (2 real nodes torn down in ${Date.now() - started} ms)\n`);
    const after = hostSnapshot(baseDir, `${marker.name}=${marker.value}`, cgroupNames);
    expect(after).to.deep.equal(hostBefore);
    expect(readdirSync(baseDir)).to.deep.equal([]);
    for (const name of names) {
      const status = await core.readNode({ name }).then(
        () => 200,
        (error: unknown) => httpStatusOf(error),
      );
      expect(status, `Node ${name} deleted`).to.equal(404);
    }
  });
});
