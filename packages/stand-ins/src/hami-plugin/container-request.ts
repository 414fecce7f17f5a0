/**
 * HAMi #3075 (on HAMi's main branch since v2.10, `validateContainerAllocation` in
 * pkg/device-plugin/nvidiadevice/nvinternal/plugin/util.go): the device plugin no longer trusts the
 * allocation annotation alone. Before it answers, it derives the container's request from the
 * container's own resources (GenerateResourceRequests, wire contract §4.3) and refuses an
 * allocation giving that container more memory or more cores on any device than the request.
 * The reason (HAMi #3041): anyone who can create a pod can write the annotation, but nobody can
 * raise a container's limits once the pod exists.
 *
 * What #3075 compares, per allocated device (MIG mode skips the check; the stand-in has no MIG):
 * - memory: with a percentage request (1..100) the bound is `card MiB × pct / 100` (integer
 *   division), the card's MiB being what the plugin published for it; a card it does not know
 *   leaves the memory unbounded. Otherwise a `gpumem` request (× memoryFactor) is the bound;
 *   without either the memory is unbounded. The percentage is looked at first, also when the
 *   container names both (HAMi's scheduler then sizes the share from gpumem: such a pod is refused
 *   whenever gpumem exceeds the percentage's share; HAMi #3093, still open, turns the order round).
 * - cores: bounded by the core request when it is above 0.
 * The device count is not part of it: kubelet's request carries the container's own count and
 * Allocate already refuses a different number (`device number not matched`).
 * Pure; the texts are HAMi's.
 */
import type { V1Container } from '@kubernetes/client-node';
import type { HamiDevice } from './pod-devices.js';
import { RESOURCE_CORES, RESOURCE_COUNT, RESOURCE_MEMORY, RESOURCE_MEMORY_PERCENTAGE } from './wire.js';

/** HAMi's ContainerDeviceRequest for the NVIDIA backend. */
export interface ContainerRequest {
  nums: number;
  /** MiB, memoryFactor applied; 0 when not asked for. */
  memReq: number;
  /** Percent of the card's memory; HAMi's sentinel 101 means unset. */
  memPercentage: number;
  coresReq: number;
}

/** The plugin's device config entries GenerateResourceRequests reads (chart defaults 0, 0, 1). */
export interface RequestDefaults {
  defaultMemory?: number;
  defaultCores?: number;
  memoryFactor?: number;
}

const INT32_MAX = 2 ** 31 - 1;
const UNSET_PERCENTAGE = 101;
const SUFFIXES: Record<string, number> = {
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/**
 * A quantity as Go's Quantity.AsInt64 reads it when it is a whole number: digits with an optional
 * SI or binary suffix. Fractions, milli-units and exponents are left out (undefined): no GPU
 * resource is written that way, and the stand-in then treats the value as not given.
 */
export function wholeQuantity(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const match = /^(\d+)(k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/.exec(text.trim());
  if (match === null) return undefined;
  const value = Number(match[1]) * (SUFFIXES[match[2] ?? ''] ?? Number.NaN);
  return Number.isSafeInteger(value) ? value : undefined;
}

/**
 * GenerateResourceRequests for one container (wire contract §4.3): undefined when the container
 * asks for no GPU count or its gpumem is unusable (HAMi drops the whole request then, and #3075 has
 * nothing to compare with).
 */
export function containerRequest(container: V1Container, defaults: RequestDefaults = {}): ContainerRequest | undefined {
  const value = (name: string): string | undefined =>
    container.resources?.limits?.[name] ?? container.resources?.requests?.[name];
  const nums = wholeQuantity(value(RESOURCE_COUNT));
  if (nums === undefined) return undefined;
  const factor =
    defaults.memoryFactor !== undefined && defaults.memoryFactor > 1 ? Math.floor(defaults.memoryFactor) : 1;
  let memReq = 0;
  const memoryText = value(RESOURCE_MEMORY);
  if (memoryText !== undefined) {
    const memory = wholeQuantity(memoryText);
    if (memory === undefined || memory > Math.floor(INT32_MAX / factor)) return undefined;
    memReq = memory * factor;
  }
  let memPercentage = UNSET_PERCENTAGE;
  const percentage = wholeQuantity(value(RESOURCE_MEMORY_PERCENTAGE));
  if (percentage !== undefined && percentage > 0) memPercentage = Math.min(100, percentage);
  if (memReq === 0 && memPercentage === UNSET_PERCENTAGE) {
    if ((defaults.defaultMemory ?? 0) !== 0) memReq = defaults.defaultMemory ?? 0;
    else memPercentage = 100;
  }
  const cores = wholeQuantity(value(RESOURCE_CORES));
  return { nums, memReq, memPercentage, coresReq: cores ?? defaults.defaultCores ?? 0 };
}

/** The memory the request entitles the container to on `uuid`, or undefined when it sets no bound. */
function memoryBound(
  request: ContainerRequest,
  uuid: string,
  cardMemory: (uuid: string) => number | undefined,
): number | undefined {
  if (request.memPercentage >= 1 && request.memPercentage <= 100) {
    const total = cardMemory(uuid);
    return total === undefined ? undefined : Math.trunc((total * request.memPercentage) / 100);
  }
  return request.memReq > 0 ? request.memReq : undefined;
}

/**
 * HAMi #3075's refusal text for the first device the container gets more of than it requests, or
 * undefined when the allocation is within the request. `cardMemory` answers the MiB the plugin
 * published for a card (undefined: a card it does not know).
 */
export function oversizedAllocation(
  containerName: string,
  request: ContainerRequest | undefined,
  devices: readonly HamiDevice[],
  cardMemory: (uuid: string) => number | undefined,
): string | undefined {
  // No request: HAMi has nothing to compare with and lets the allocation through.
  if (request === undefined) return undefined;
  for (const device of devices) {
    const limit = memoryBound(request, device.uuid, cardMemory);
    if (limit !== undefined && device.usedMem > limit) {
      return (
        `container ${containerName} is allocated ${device.usedMem} MB on device ${device.uuid} ` +
        `but requests ${limit} MB`
      );
    }
    if (request.coresReq > 0 && device.usedCores > request.coresReq) {
      return (
        `container ${containerName} is allocated ${device.usedCores}% of the cores on device ${device.uuid} ` +
        `but requests ${request.coresReq}%`
      );
    }
  }
  return undefined;
}

/** Whether the check needs the card's published memory (a percentage request). */
export function needsCardMemory(request: ContainerRequest | undefined): boolean {
  return request !== undefined && request.memPercentage >= 1 && request.memPercentage <= 100;
}
