import type { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import {
  decodePodDevices,
  HamiDevicePlugin,
  pluginApiFromCore,
  type AllocateAction,
  type AllocateRequest,
} from '@vgpu-warden/stand-ins/hami-plugin';
import { KubeletSim } from '../support/kubelet-sim/index.js';
import type { AllocationDecoder } from './invariants.js';
import type { NodeAgents, NodeAgentsOptions } from './node-agents.js';
import type { AllocationRecord } from './observed-state.js';
import type { PluginBehaviour } from './workload.js';

function hashOf(text: string): number {
  let hash = 2166136261;
  for (const char of text) hash = Math.imul(hash ^ char.charCodeAt(0), 16777619) >>> 0;
  return hash;
}

/** The stand-in's decoder, so the capacity check does not rest on vgpu-warden's codec. */
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
 * HAMi's device-plugin stand-in and the kubelet simulator on the chaos nodes. The plugin's
 * behaviour for a pod (allocate, fail, never answer) comes from the pod's chaos label, read when
 * kubelet admits it.
 */
export function createNodeAgents(options: NodeAgentsOptions & { kubeConfig: KubeConfig }): NodeAgents {
  const behaviours = new Map<string, PluginBehaviour>();
  const records: AllocationRecord[] = [];
  const plugin = new HamiDevicePlugin({
    api: pluginApiFromCore(options.core),
    behaviour: (request: AllocateRequest): AllocateAction => {
      const behaviour = behaviours.get(request.admitted.uid) ?? 'ok';
      // A stall ends as a broken connection does when the plugin is restarted: kubelet then rejects
      // the pod (UnexpectedAdmissionError). Its length is drawn from the pod name, so it replays.
      const forMs = 3_000 + (hashOf(request.admitted.name) % 12_000);
      return behaviour === 'fail'
        ? { kind: 'fail' }
        : behaviour === 'stall'
          ? { kind: 'stall', forMs }
          : { kind: 'allocate' };
    },
    onRecord: (record) => {
      const resolved =
        record.resolvedTo === undefined ? 'no pod' : `${record.resolvedTo.namespace}/${record.resolvedTo.name}`;
      options.note?.(
        [`${record.admitted.namespace}/${record.admitted.name}`, `node/${record.node}`],
        `plugin: Allocate for ${record.admitted.name} ${record.outcome}, resolved to ${resolved}${record.error === undefined ? '' : `: ${record.error.slice(0, 200)}`}`,
      );
      if (record.outcome === 'stalled') return;
      records.push({
        node: record.node,
        admitted: record.admitted,
        resolvedTo: record.resolvedTo,
        ...(record.lock === undefined ? {} : { lock: record.lock }),
        ok: record.outcome === 'allocated',
        at: record.at.getTime(),
      });
    },
  });
  const core: CoreV1Api = options.core;
  const endpoint = {
    listDevices: (node: string) => plugin.listDevices(node),
    allocate: async (request: AllocateRequest) => {
      if (!behaviours.has(request.admitted.uid)) {
        const pod = await core
          .readNamespacedPod({ namespace: request.admitted.namespace, name: request.admitted.name })
          .catch(() => undefined);
        behaviours.set(
          request.admitted.uid,
          pod?.metadata?.uid === request.admitted.uid ? options.behaviourOf(pod.metadata.labels ?? {}) : 'ok',
        );
      }
      return plugin.allocate(request);
    },
  };
  const nodes = new Set(options.nodes);
  const kubelet = new KubeletSim({
    kubeConfig: options.kubeConfig,
    core,
    plugin: endpoint,
    servesNode: (node) => nodes.has(node),
    seed: options.seed,
    order: 'random',
    admitDelayMs: (_pod, random) => Math.floor(random() * 1500),
    onRecord: (record) => {
      options.note?.(
        [`${record.pod.namespace}/${record.pod.name}`, `node/${record.node}`],
        `kubelet: ${record.kind}${record.message === undefined ? '' : ` (${record.message.slice(0, 200)})`}`,
      );
    },
    log: (line) => {
      options.note?.(['kubelet'], line.slice(0, 300));
    },
  });
  return {
    start: () => kubelet.start(),
    stop: async () => {
      plugin.stop();
      await kubelet.stop();
    },
    records: () => records,
    decode,
  };
}
