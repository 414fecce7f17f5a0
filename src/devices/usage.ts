import type { PodAllocation } from './allocation-codec.js';

/**
 * Per-GPU usage accounting (hami-wire-contract.md §3.5). Pure: the only mutation is of the map the
 * caller passes as `into`.
 */
export interface GpuUse {
  /** Shares taken out of the GPU's split count. */
  slots: number;
  memoryMiB: number;
  cores: number;
}

/** What reading usage needs: a Map, or a scratch overlay on one. */
export interface UsageLookup {
  get(uuid: string): GpuUse | undefined;
}

/**
 * Scratch usage for one fit: writes land in a small overlay, reads fall through to the base. A fit
 * touches one or two GPUs, so this spares copying every GPU's usage for every node tried.
 */
export class UsageOverlay implements UsageLookup {
  private readonly changed = new Map<string, GpuUse>();
  constructor(private readonly base: ReadonlyMap<string, GpuUse>) {}

  get(uuid: string): GpuUse | undefined {
    return this.changed.get(uuid) ?? this.base.get(uuid);
  }

  set(uuid: string, use: GpuUse): void {
    this.changed.set(uuid, use);
  }
}

interface Tally {
  memoryMiB: number;
  cores: number;
  containers: number;
}

/** Per GPU, what one container takes (a UUID repeated inside one container is summed, one slot). */
function containerUse(devices: PodAllocation[number]): Map<string, Tally> {
  const use = new Map<string, Tally>();
  for (const device of devices) {
    const tally = use.get(device.uuid) ?? { memoryMiB: 0, cores: 0, containers: 1 };
    tally.memoryMiB += device.memoryMiB;
    tally.cores += device.cores;
    use.set(device.uuid, tally);
  }
  return use;
}

/**
 * HAMi's "collapse" of a pod's allocation into one usage per GPU. Init containers run one after
 * another and before the app containers, so a GPU carries the larger of the biggest init container
 * and the sum of the app containers (each field on its own), and as many slots as app containers
 * use it, at least one if any init container does.
 */
export function podDeviceUsage(allocation: PodAllocation, initContainerCount: number): Map<string, GpuUse> {
  const initPeak = new Map<string, Tally>();
  const appSum = new Map<string, Tally>();
  for (const [position, devices] of allocation.entries()) {
    const isInit = position < initContainerCount;
    for (const [uuid, use] of containerUse(devices)) {
      const target = isInit ? initPeak : appSum;
      const current = target.get(uuid);
      if (current === undefined) target.set(uuid, { ...use });
      else if (isInit) target.set(uuid, { memoryMiB: Math.max(current.memoryMiB, use.memoryMiB), cores: Math.max(current.cores, use.cores), containers: 1 });
      else target.set(uuid, { memoryMiB: current.memoryMiB + use.memoryMiB, cores: current.cores + use.cores, containers: current.containers + 1 });
    }
  }
  const result = new Map<string, GpuUse>();
  for (const uuid of new Set([...initPeak.keys(), ...appSum.keys()])) {
    const init = initPeak.get(uuid);
    const app = appSum.get(uuid);
    result.set(uuid, {
      slots: Math.max(init === undefined ? 0 : 1, app?.containers ?? 0),
      memoryMiB: Math.max(init?.memoryMiB ?? 0, app?.memoryMiB ?? 0),
      cores: Math.max(init?.cores ?? 0, app?.cores ?? 0),
    });
  }
  return result;
}

export function addUsage(into: Map<string, GpuUse>, from: ReadonlyMap<string, GpuUse>): void {
  for (const [uuid, use] of from) {
    const current = into.get(uuid) ?? { slots: 0, memoryMiB: 0, cores: 0 };
    into.set(uuid, { slots: current.slots + use.slots, memoryMiB: current.memoryMiB + use.memoryMiB, cores: current.cores + use.cores });
  }
}

/**
 * Takes `from` back out of `into`. Floors at zero: negative usage would read as spare capacity and
 * let a node overcommit if a caller ever subtracted a pod it had not added. Drops GPUs whose usage
 * becomes zero so idle GPUs look the same as never-used ones.
 */
export function subtractUsage(into: Map<string, GpuUse>, from: ReadonlyMap<string, GpuUse>): void {
  for (const [uuid, use] of from) {
    const current = into.get(uuid);
    if (current === undefined) continue;
    const next = {
      slots: Math.max(0, current.slots - use.slots),
      memoryMiB: Math.max(0, current.memoryMiB - use.memoryMiB),
      cores: Math.max(0, current.cores - use.cores),
    };
    if (next.slots === 0 && next.memoryMiB === 0 && next.cores === 0) into.delete(uuid);
    else into.set(uuid, next);
  }
}

/** A deep copy, so fitting can work on scratch usage without touching the caller's map. */
export function copyUsage(usage: ReadonlyMap<string, GpuUse>): Map<string, GpuUse> {
  return new Map([...usage].map(([uuid, use]) => [uuid, { ...use }]));
}

export const NO_USE: Readonly<GpuUse> = Object.freeze({ slots: 0, memoryMiB: 0, cores: 0 });
