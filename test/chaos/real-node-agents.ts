import type { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import type { ControlPlane } from '../../src/local/control-plane.js';
import { locateBinaries } from '../../src/local/k8s-binaries.js';
import { hostProcesses } from '../../src/local/host-processes.js';
import { RealGpuFleet } from '@vgpu-warden/stand-ins/real-gpu-fleet';
import { expectedGpuEnvironment, gpuEnvironment } from '../support/gpu-environment.js';
import {
  decodePodDevices,
  HamiDevicePlugin,
  pluginApiFromCore,
  type Admission,
} from '@vgpu-warden/stand-ins/hami-plugin';
import type { AllocationDecoder, Violation } from './invariants.js';
import type { NodeAgents } from './node-agents.js';
import { podKey, type AllocationRecord, type Snapshot } from './observed-state.js';
import type { Prng } from './prng.js';
import { subjectsMentioned } from './timeline.js';

/** Mean time between two node faults (one node at a time): kubelet frozen, kubelet restarted, plugin restarted. */
const NODE_FAULT_INTERVAL_MS = 12_000;

export type NodeFault = 'pause-kubelet' | 'restart-kubelet' | 'restart-plugin';

export interface RealNodeAgentsOptions {
  plane: ControlPlane;
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  repoRoot: string;
  nodes: string[];
  labels: Record<string, string>;
  gpusPerNode: number;
  random: Prng;
  /** Node faults start after this and stop at `faultsUntilMs` (ms since start()). */
  faultsFromMs: number;
  faultsUntilMs: number;
  note?: (subjects: string[], text: string) => void;
}

const decode: AllocationDecoder = (encoded) => {
  try {
    return decodePodDevices(encoded).map((devices) =>
      devices.map((device) => ({ uuid: device.uuid, memoryMiB: device.usedMem, cores: device.usedCores })),
    );
  } catch (error) {
    return { error: (error as Error).message };
  }
};

/**
 * Real nodes for the chaos runner: kubelet + containerd each (@vgpu-warden/stand-ins/real-node), and the
 * HAMi stand-in served over gRPC on each kubelet, so kubelet's device manager decides when Allocate
 * is called and for which pod (the RPC does not say, so records carry no admitted pod). In its place
 * the invariant is read from the containers themselves: every Running GPU container printed exactly
 * the GPUs and limits of its own pod's allocation. Node faults join the plan: kubelet frozen
 * (SIGSTOP, 0.5-4 s), kubelet restarted, plugin restarted (re-registered).
 */
export class RealNodeAgents implements NodeAgents {
  private fleet: RealGpuFleet | undefined;
  private readonly plugin: HamiDevicePlugin<Admission>;
  private readonly history: AllocationRecord[] = [];
  /** Pods whose container environment was checked (by uid). */
  private readonly checked = new Set<string>();
  private faults: Promise<void> | undefined;
  private stopping = false;
  /** Ends the fault loop's current pause (stop()). */
  private wake: () => void = () => undefined;
  readonly faultCounts: Record<NodeFault, number> = { 'pause-kubelet': 0, 'restart-kubelet': 0, 'restart-plugin': 0 };
  readonly decode = decode;

  constructor(private readonly options: RealNodeAgentsOptions) {
    this.plugin = new HamiDevicePlugin<Admission>({
      api: pluginApiFromCore(options.core),
      fallback: true,
      // What HAMi only logs (a bind-phase patch or a lock release that failed) explains a violation.
      log: (line) => options.note?.(subjectsMentioned(line, options.nodes), `plugin: ${line.slice(0, 300)}`),
      onRecord: (record) => {
        const resolved = record.resolvedTo === undefined ? 'no pod' : podKey(record.resolvedTo);
        options.note?.(
          [...(record.resolvedTo === undefined ? [] : [resolved]), `node/${record.node}`],
          `plugin: Allocate ${record.outcome}, resolved to ${resolved}${record.error === undefined ? '' : `: ${record.error.slice(0, 200)}`}`,
        );
        if (record.outcome === 'stalled') return;
        this.history.push({
          node: record.node,
          admitted: undefined,
          resolvedTo: record.resolvedTo,
          ...(record.lock === undefined ? {} : { lock: record.lock }),
          ok: record.outcome === 'allocated',
          at: record.at.getTime(),
        });
      },
    });
  }

  async start(): Promise<void> {
    const { options } = this;
    this.fleet = await RealGpuFleet.start({
      names: options.nodes,
      labels: options.labels,
      gpusPerNode: options.gpusPerNode,
      gpuMemoryMiB: 24576,
      cluster: options.plane,
      kubeConfig: options.kubeConfig,
      core: options.core,
      binaries: locateBinaries({ repoRoot: options.repoRoot, env: process.env }),
      processes: hostProcesses,
      plugin: this.plugin,
    });
    const started = Date.now();
    this.faults = this.injectNodeFaults(started);
  }

  private async injectNodeFaults(started: number): Promise<void> {
    const { random } = this.options;
    const sleep = (ms: number) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    // A function, not the field: stop() sets it while this loop sleeps.
    const over = () => this.stopping || Date.now() - started >= this.options.faultsUntilMs;
    await sleep(this.options.faultsFromMs);
    while (!over()) {
      await sleep(-Math.log(1 - random.next()) * NODE_FAULT_INTERVAL_MS);
      if (over()) return;
      const name = random.pick(this.options.nodes);
      const fault = random.weighted<NodeFault>([
        ['pause-kubelet', 3],
        ['restart-kubelet', 2],
        ['restart-plugin', 2],
      ]);
      const node = this.fleet?.node(name);
      if (node === undefined) return;
      this.faultCounts[fault]++;
      try {
        if (fault === 'pause-kubelet') {
          const ms = random.int(500, 4_000);
          this.options.note?.([`node/${name}`], `fault: kubelet frozen for ${ms} ms`);
          node.pause();
          await sleep(ms);
          node.resume();
        } else if (fault === 'restart-kubelet') {
          this.options.note?.([`node/${name}`], 'fault: kubelet restarted');
          await node.restartKubelet({ downMs: random.int(0, 2_000) });
        } else {
          this.options.note?.([`node/${name}`], 'fault: device plugin restarted');
          await this.fleet?.servers.get(name)?.restart();
        }
      } catch (error) {
        this.options.note?.([`node/${name}`], `fault ${fault} failed: ${(error as Error).message.slice(0, 200)}`);
      }
    }
  }

  records(): readonly AllocationRecord[] {
    return this.history;
  }

  /**
   * Every Running GPU container printed exactly the GPUs and limits of its own pod's allocation;
   * each pod is read once, as soon as it has printed.
   */
  async checkContainers(snapshot: Snapshot): Promise<Violation[]> {
    const violations: Violation[] = [];
    for (const pod of snapshot.pods) {
      // Only pods on these real nodes have containers (a simulated node beside them runs none).
      if (
        pod.phase !== 'Running' ||
        pod.gpuCount === 0 ||
        this.checked.has(pod.uid) ||
        !this.options.nodes.includes(pod.nodeName ?? '')
      )
        continue;
      const log = await this.options.core
        .readNamespacedPodLog({ namespace: pod.namespace, name: pod.name, container: 'main' })
        .catch(() => '');
      if (!log.includes('NVIDIA_VISIBLE_DEVICES')) continue;
      this.checked.add(pod.uid);
      const encoded = pod.annotations['hami.io/vgpu-devices-allocated'] ?? '';
      const devices = (() => {
        try {
          return decodePodDevices(encoded).flat();
        } catch {
          return [];
        }
      })();
      const expected = expectedGpuEnvironment(devices);
      const seen = gpuEnvironment(log);
      const sorted = (env: Record<string, string>) =>
        JSON.stringify(Object.entries(env).sort(([a], [b]) => a.localeCompare(b)));
      if (sorted(seen) !== sorted(expected)) {
        violations.push({
          invariant: 'foreign-container-env',
          message: `${podKey(pod)} on ${pod.nodeName ?? '?'} runs with ${JSON.stringify(seen)}, its allocation ${encoded} says ${JSON.stringify(expected)}`,
          subjects: [podKey(pod), `node/${pod.nodeName ?? ''}`],
        });
      }
    }
    return violations;
  }

  /** Running GPU pods whose environment was checked. */
  get containersChecked(): number {
    return this.checked.size;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.wake();
    await this.faults?.catch(() => undefined);
    await this.fleet?.stop();
  }
}
