import type { V1Node } from '@kubernetes/client-node';
import { INVENTORY_ANNOTATIONS, parseNodeInventory, type NodeInventory } from '../devices/inventory.js';
import { NODE_HANDSHAKE_ANNOTATION } from '../hami/wire.js';
import { allocatableGpus, gpuLiveness, type GpuLiveness } from './node-liveness.js';
import type { DerivedIndex, IndexEffects } from './derived-index.js';
import type { ObjectChange } from './object-store.js';

/** What the store remembers of a node's device plugin, and its verdict (node-liveness.ts). */
interface LivenessState {
  /** The node's allocatable nvidia.com/gpu has been above zero while this process watched. */
  reportedBefore: boolean;
  /** When this process first saw the plugin not reporting (cleared when it reports). */
  notReportingSince: number | undefined;
  verdict: GpuLiveness;
}

interface NodeState {
  inventory: NodeInventory;
  /** Set by the store on every change that can change a fit or a lock decision on this node. */
  generation: number;
  liveness: LivenessState;
}

/**
 * The state store's per-node state: the parsed GPU inventory (parsed again only when one of its
 * annotations changes), the device plugin's liveness and its verdict, and the node's generation.
 * Pure bookkeeping fed by the store's node changes; the store decides when a generation moves.
 */
export class NodeStates implements DerivedIndex {
  private readonly states = new Map<string, NodeState>();

  constructor(private readonly clock: () => number) {}

  /** A new node, a changed inventory or liveness verdict, and a deleted node each move its generation. */
  onNode(change: ObjectChange<V1Node>, _delivery: unknown, effects: IndexEffects): void {
    const name = change.object.metadata?.name;
    if (name === undefined) return;
    if (change.type === 'delete') {
      this.remove(name);
      effects.changed(name);
    } else if (this.update(name, change.object, change.type === 'update' ? change.previous : undefined)) {
      effects.changed(name);
    }
  }

  /**
   * Takes in a node add or update; true when anything a fit depends on changed (a new node, its
   * inventory annotations, or its liveness verdict), so the store bumps its generation.
   */
  update(name: string, node: V1Node, previous: V1Node | undefined): boolean {
    const annotations = node.metadata?.annotations ?? {};
    const state = this.states.get(name);
    if (state === undefined) {
      const inventory = parseNodeInventory(annotations);
      this.states.set(name, { inventory, generation: 0, liveness: this.judgeLiveness(node, inventory, undefined) });
      return true;
    }
    if (!sameInventoryAnnotations(previous?.metadata?.annotations, annotations)) {
      state.inventory = parseNodeInventory(annotations);
      state.liveness = this.judgeLiveness(node, state.inventory, state.liveness);
      return true;
    }
    return this.rejudge(state, node);
  }

  remove(name: string): void {
    this.states.delete(name);
  }

  has(name: string): boolean {
    return this.states.has(name);
  }

  names(): string[] {
    return [...this.states.keys()];
  }

  inventory(name: string): NodeInventory | undefined {
    return this.states.get(name)?.inventory;
  }

  generation(name: string): number | undefined {
    return this.states.get(name)?.generation;
  }

  /** Records the store's generation for the node (no-op for a node it does not have). */
  stamp(name: string, generation: number): void {
    const state = this.states.get(name);
    if (state) state.generation = generation;
  }

  /** The node's liveness verdict; undefined for a node it does not have. */
  liveness(name: string): GpuLiveness | undefined {
    return this.states.get(name)?.liveness.verdict;
  }

  /**
   * The node's generation now (undefined for a node it does not have): a verdict whose time ran out
   * is judged again first, against `nodeOf(name)`, and `onRejudged` hears when that changed it (the
   * store then moves the generation). One map lookup for a node whose verdict holds: filter asks
   * this for every name kube-scheduler sends.
   */
  currentGeneration(
    name: string,
    nodeOf: (name: string) => V1Node | undefined,
    onRejudged: (name: string) => void,
  ): number | undefined {
    const state = this.states.get(name);
    if (state === undefined) return undefined;
    const validUntil = state.liveness.verdict.ready ? state.liveness.verdict.validUntil : undefined;
    if (validUntil !== undefined && this.clock() >= validUntil) {
      const node = nodeOf(name);
      if (node !== undefined && this.rejudge(state, node)) onRejudged(name);
    }
    return state.generation;
  }

  private rejudge(state: NodeState, node: V1Node): boolean {
    const before = state.liveness.verdict;
    state.liveness = this.judgeLiveness(node, state.inventory, state.liveness);
    return !sameVerdict(before, state.liveness.verdict);
  }

  /** The node's plugin liveness after this version of the node, given what the store remembered. */
  private judgeLiveness(node: V1Node, inventory: NodeInventory, before: LivenessState | undefined): LivenessState {
    const now = this.clock();
    const allocatable = allocatableGpus(node.status?.allocatable);
    const reporting = allocatable !== undefined && allocatable > 0;
    const reportedBefore = (before?.reportedBefore ?? false) || reporting;
    const notReportingSince = reporting ? undefined : (before?.notReportingSince ?? now);
    const registeredShares =
      inventory.devices.length === 0
        ? undefined
        : inventory.devices.reduce((sum, device) => sum + (device.healthy ? device.count : 0), 0);
    const verdict = gpuLiveness({
      allocatable,
      handshake: node.metadata?.annotations?.[NODE_HANDSHAKE_ANNOTATION],
      registeredShares,
      // The verdict for this version of the node: "before" it, not counting what it reports now.
      reportedBefore: before?.reportedBefore ?? false,
      notReportingSince,
      now,
    });
    return { reportedBefore, notReportingSince, verdict };
  }
}

/** Same answer for filter: readiness, reason and the moment it lapses (a note changes no verdict). */
function sameVerdict(a: GpuLiveness, b: GpuLiveness): boolean {
  if (a.ready !== b.ready) return false;
  return a.ready && b.ready ? a.validUntil === b.validUntil : !a.ready && !b.ready && a.reason === b.reason;
}

function sameInventoryAnnotations(before: Record<string, string> | undefined, after: Record<string, string>): boolean {
  return before !== undefined && INVENTORY_ANNOTATIONS.every((key) => before[key] === after[key]);
}
