import type { CoreV1Api } from '@kubernetes/client-node';
import type { AllocationDecoder, Violation } from './invariants.js';
import type { AllocationRecord, Snapshot } from './observed-state.js';
import type { PluginBehaviour } from './workload.js';

/** The simulated nodes' kubelet and HAMi device plugin, as the chaos runner drives and reads them. */
export interface NodeAgents {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Every Allocate so far: which pod kubelet admitted and whose devices it got. */
  records(): readonly AllocationRecord[];
  /** The plugin's own decoder for hami.io/vgpu-devices-allocated (not vgpu-warden's). */
  decode: AllocationDecoder;
  /** Real nodes: what the Running containers were given, against their own pods' allocations. */
  checkContainers?(snapshot: Snapshot): Promise<Violation[]>;
}

export interface NodeAgentsOptions {
  core: CoreV1Api;
  nodes: string[];
  behaviourOf: (labels: Readonly<Record<string, string>>) => PluginBehaviour;
  seed: number;
  /** What kubelet and the plugin did, for the time lines of violations. */
  note?: (subjects: string[], text: string) => void;
}
