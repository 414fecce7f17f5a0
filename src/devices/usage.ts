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
  /** `base` may be another overlay: a sidecar's share stays under every container fitted after it. */
  constructor(private readonly base: UsageLookup) {}

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
 * A pod's init containers, for podDeviceUsage: one entry per init container, true for a sidecar
 * (`restartPolicy: Always`); or only how many there are, none of them a sidecar.
 */
export type InitLayout = number | readonly boolean[];

function sum(a: Tally | undefined, b: Tally): Tally {
  return a === undefined
    ? { ...b }
    : { memoryMiB: a.memoryMiB + b.memoryMiB, cores: a.cores + b.cores, containers: a.containers + b.containers };
}

/** Raises the GPU's peak to `phase`, field by field. */
function raise(peaks: Map<string, GpuUse>, uuid: string, phase: Tally): void {
  const peak = peaks.get(uuid);
  peaks.set(
    uuid,
    peak === undefined
      ? { slots: phase.containers, memoryMiB: phase.memoryMiB, cores: phase.cores }
      : {
          slots: Math.max(peak.slots, phase.containers),
          memoryMiB: Math.max(peak.memoryMiB, phase.memoryMiB),
          cores: Math.max(peak.cores, phase.cores),
        },
  );
}

/**
 * HAMi's "collapse" of a pod's allocation into one usage per GPU, with sidecars as kubelet runs
 * them (KEP-753). Init containers run one after another and before the app containers; a sidecar
 * keeps running from its turn on, beside every later init container and the app containers. So a
 * GPU carries, each field on its own, the largest of: each plain init container plus the sidecars
 * started before it, and the app containers plus every sidecar. Slots count the containers of that
 * phase using the GPU (a UUID repeated inside one container is one slot). Without sidecars: the
 * larger of the biggest init container and the sum of the app containers, as HAMi counts.
 */
export function podDeviceUsage(allocation: PodAllocation, init: InitLayout): Map<string, GpuUse> {
  const initCount = typeof init === 'number' ? init : init.length;
  const peaks = new Map<string, GpuUse>();
  /** The sidecars started so far, then the app containers beside them. */
  const running = new Map<string, Tally>();
  for (const [position, devices] of allocation.entries()) {
    const plainInit = position < initCount && (typeof init === 'number' || init[position] !== true);
    for (const [uuid, use] of containerUse(devices)) {
      if (plainInit) raise(peaks, uuid, sum(running.get(uuid), use));
      else running.set(uuid, sum(running.get(uuid), use));
    }
  }
  for (const [uuid, phase] of running) raise(peaks, uuid, phase);
  return peaks;
}

export function addUsage(into: Map<string, GpuUse>, from: ReadonlyMap<string, GpuUse>): void {
  for (const [uuid, use] of from) {
    const current = into.get(uuid) ?? { slots: 0, memoryMiB: 0, cores: 0 };
    into.set(uuid, {
      slots: current.slots + use.slots,
      memoryMiB: current.memoryMiB + use.memoryMiB,
      cores: current.cores + use.cores,
    });
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
