import { clip, LABEL_CHARS, quoted } from '../base/user-text.js';
import { INT32_MAX, int32Quantity, readQuantity } from './quantity.js';
import { GPU_COUNT, GPU_MEMORY, GPU_MEMORY_PERCENTAGE, GPU_CORES } from '../hami/wire.js';
import type { InitLayout } from './usage.js';

/**
 * Per-container NVIDIA requests of a pod, following HAMi v2.10's `GenerateResourceRequests`
 * (hami-wire-contract.md §4.3). Pure: takes raw Pod JSON or a client-node V1Pod through plain
 * property access, never throws.
 */

export interface ContainerGpuRequest {
  /** Distinct GPUs the container needs (> 0). */
  count: number;
  /** MiB per GPU, memoryFactor applied; 0 when a percentage is used. */
  memoryMiB: number;
  /** Percent of each GPU's memory (1..100); undefined when memoryMiB is used. */
  memoryPercentage: number | undefined;
  /** Percent of each GPU's SMs, 0..100. */
  cores: number;
}

export interface PodGpuRequests {
  /** One slot per init container, in spec order; undefined = no GPU. */
  initContainers: (ContainerGpuRequest | undefined)[];
  /** One slot per app container, in spec order; undefined = no GPU. */
  containers: (ContainerGpuRequest | undefined)[];
  /**
   * One entry per init container, true for a sidecar (`restartPolicy: Always`, KEP-753): it keeps
   * running beside every container after it. Absent when the pod has no sidecar.
   */
  sidecars?: readonly boolean[];
}

export interface RequestDefaults {
  /** HAMi `defaultMemory`: MiB used when a container names neither gpumem nor a percentage. */
  defaultMemoryMiB: number;
  /** HAMi `defaultCores`: cores when gpucores is absent. */
  defaultCores: number;
  /** HAMi `memoryFactor`: gpumem is multiplied by it (values below 1 act as 1). */
  memoryFactor: number;
}

/** The HAMi chart defaults. */
export const DEFAULT_REQUEST_DEFAULTS: RequestDefaults = Object.freeze({
  defaultMemoryMiB: 0,
  defaultCores: 0,
  memoryFactor: 1,
});

type Json = Record<string, unknown>;

function asRecord(value: unknown): Json | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : undefined;
}

/** HAMi reads limits first and falls back to requests only when limits lack the name entirely. */
function resourceValue(limits: Json | undefined, requests: Json | undefined, name: string): unknown {
  const fromLimits = limits?.[name];
  if (fromLimits !== undefined && fromLimits !== null) return fromLimits;
  const fromRequests = requests?.[name];
  return fromRequests ?? undefined;
}

function clampPercent(value: number): number {
  return Math.min(100, Math.max(0, value));
}

/**
 * The NVIDIA request of one container, or undefined when it asks for no GPU. HAMi's reading of
 * values that gpuRequestProblems refuses is kept (an invalid gpumem drops the request, percentages
 * and cores are clamped), but no caller gets that far with such a pod: they validate first.
 */
export function containerGpuRequest(container: unknown, defaults: RequestDefaults): ContainerGpuRequest | undefined {
  const resources = asRecord(asRecord(container)?.resources);
  const limits = asRecord(resources?.limits);
  const requests = asRecord(resources?.requests);
  const value = (name: string): unknown => resourceValue(limits, requests, name);

  const count = int32Quantity(value(GPU_COUNT));
  if (count === undefined || count <= 0) return undefined;

  const factor = defaults.memoryFactor > 1 ? Math.floor(defaults.memoryFactor) : 1;
  let memoryMiB = 0;
  const memoryText = value(GPU_MEMORY);
  if (memoryText !== undefined) {
    const memory = int32Quantity(memoryText);
    // v2.10: a gpumem that is not a non-negative integer fitting int32 after the factor drops the
    // whole request; the container is then treated as asking for no GPU.
    if (memory === undefined || memory < 0 || memory > Math.floor(INT32_MAX / factor)) return undefined;
    memoryMiB = memory * factor;
  }

  // HAMi's sentinel 101 = unset; ≤ 0 and unparsable count as unset, above 100 is clamped.
  let memoryPercentage: number | undefined;
  const percentage = int32Quantity(value(GPU_MEMORY_PERCENTAGE));
  if (percentage !== undefined && percentage > 0) memoryPercentage = Math.min(100, percentage);

  if (memoryPercentage === undefined && memoryMiB === 0) {
    if (defaults.defaultMemoryMiB > 0) memoryMiB = Math.floor(defaults.defaultMemoryMiB);
    else memoryPercentage = 100;
  }
  // Fit uses gpumem whenever it is > 0 and ignores the percentage then; keep one source of truth.
  if (memoryMiB > 0) memoryPercentage = undefined;

  const coresValue = int32Quantity(value(GPU_CORES));
  // Fit clamps > 100 to 100; negative cores (rejected by the apiserver anyway) would shrink usage.
  const cores = clampPercent(coresValue ?? Math.floor(defaults.defaultCores));

  return { count, memoryMiB, memoryPercentage, cores };
}

function containerList(value: unknown): unknown[] {
  return Array.isArray(value) ? (value as unknown[]) : [];
}

/** Is this init container a sidecar? kubelet's IsRestartableInitContainer: `restartPolicy: Always`. */
export function isSidecar(initContainer: unknown): boolean {
  return asRecord(initContainer)?.restartPolicy === 'Always';
}

export function podGpuRequests(pod: unknown, defaults: RequestDefaults): PodGpuRequests {
  const spec = asRecord(asRecord(pod)?.spec);
  const initContainers = containerList(spec?.initContainers);
  const sidecars = initContainers.map(isSidecar);
  return {
    initContainers: initContainers.map((container) => containerGpuRequest(container, defaults)),
    containers: containerList(spec?.containers).map((container) => containerGpuRequest(container, defaults)),
    // Only when there is one: the requests of a pod without sidecars read (and key) as before.
    ...(sidecars.includes(true) ? { sidecars } : {}),
  };
}

/**
 * The pod's init containers as podDeviceUsage needs them: which are sidecars, or just how many
 * there are when none is.
 */
export function initLayout(requests: PodGpuRequests): InitLayout {
  return requests.sidecars ?? requests.initContainers.length;
}

/** initLayout of a pod object (a stored pod whose allocation is read back). */
export function podInitLayout(pod: unknown): InitLayout {
  const initContainers = containerList(asRecord(asRecord(pod)?.spec)?.initContainers);
  const sidecars = initContainers.map(isSidecar);
  return sidecars.includes(true) ? sidecars : initContainers.length;
}

export function hasGpuRequest(requests: PodGpuRequests): boolean {
  return (
    requests.initContainers.some((request) => request !== undefined) ||
    requests.containers.some((request) => request !== undefined)
  );
}

/** The memory a request takes on one GPU: gpumem, else floor(card memory × percentage / 100). */
export function memoryOnGpu(request: ContainerGpuRequest, gpuMemoryMiB: number): number {
  if (request.memoryMiB > 0) return request.memoryMiB;
  if (request.memoryPercentage === undefined) return 0;
  return Math.floor((gpuMemoryMiB * request.memoryPercentage) / 100);
}

const GPU_RESOURCES = [GPU_COUNT, GPU_MEMORY, GPU_MEMORY_PERCENTAGE, GPU_CORES] as const;

/** The whole numbers a resource may hold, both ends included. */
export interface QuantityBounds {
  min: number;
  max: number;
}

/**
 * What vgpu-warden can read, per resource (the same bounds as the vgpu-warden-gpu-pods admission
 * policy): counts and MiB are int32 in HAMi's request and allocation annotations, and gpumem is
 * multiplied by memoryFactor, so its bound is int32 divided by the factor (HAMi silently drops a
 * larger one, and the pod would then be placed as if it asked for no GPU). Percentages of a GPU
 * stop at 100 (HAMi's webhook refuses more). No bound below int32 is put on what a card can hold:
 * cards differ, registered memory may be scaled, and a readable request that fits nowhere is
 * told so by filter (`CardInsufficientMemory` on every node, a FilteringFailed event).
 */
export function gpuRequestBounds(
  defaults: RequestDefaults = DEFAULT_REQUEST_DEFAULTS,
): Readonly<Record<(typeof GPU_RESOURCES)[number], QuantityBounds>> {
  const factor = defaults.memoryFactor > 1 ? Math.floor(defaults.memoryFactor) : 1;
  return {
    [GPU_COUNT]: { min: 0, max: INT32_MAX },
    [GPU_MEMORY]: { min: 0, max: Math.floor(INT32_MAX / factor) },
    [GPU_MEMORY_PERCENTAGE]: { min: 0, max: 100 },
    [GPU_CORES]: { min: 0, max: 100 },
  };
}

/**
 * Why a quantity is not a whole number within `bounds`, or undefined when it is. The grammar is
 * kube-apiserver's (quantity.ts): "not a quantity" is what the apiserver itself refuses to decode.
 */
export function quantityProblem(value: unknown, bounds: QuantityBounds): string | undefined {
  const read = readQuantity(value);
  const range = `must be an integer between ${bounds.min} and ${bounds.max}`;
  if (read.kind === 'malformed') return `not a Kubernetes quantity; ${range}`;
  if (read.kind === 'fraction') return `not a whole number; ${range}`;
  if (read.kind === 'huge' || read.value < BigInt(bounds.min) || read.value > BigInt(bounds.max)) return range;
  return undefined;
}

/**
 * Why a pod's GPU shares cannot be read: one message per container, resource and field (limits,
 * requests) whose value is not a whole number within gpuRequestBounds, init containers first.
 * Empty when every share is readable, and then podGpuRequests reads each one as written (it never
 * drops a request). This is the one validation of GPU requests: the webhook denies a pod CREATE
 * with a problem (400), filter answers it with an Error, bind refuses it. HAMi instead drops such
 * a request silently and binds the pod with no GPU. Messages name the container and resource and
 * clip what the pod's author wrote (names, values) to 63 characters.
 */
export function gpuRequestProblems(pod: unknown, defaults: RequestDefaults = DEFAULT_REQUEST_DEFAULTS): string[] {
  const spec = asRecord(asRecord(pod)?.spec);
  const bounds = gpuRequestBounds(defaults);
  const problems: string[] = [];
  for (const [kind, list] of [
    ['init container', spec?.initContainers],
    ['container', spec?.containers],
  ] as const) {
    for (const [position, container] of containerList(list).entries()) {
      const record = asRecord(container);
      const resources = asRecord(record?.resources);
      const limits = asRecord(resources?.limits);
      for (const [field, values] of [
        ['limits', limits],
        ['requests', asRecord(resources?.requests)],
      ] as const) {
        for (const resource of GPU_RESOURCES) {
          const value = values?.[resource];
          if (value === undefined || value === null) continue;
          // kube-apiserver copies limits into missing requests: one value, one problem.
          if (field === 'requests' && limits?.[resource] === value) continue;
          const why = quantityProblem(value, bounds[resource]);
          if (why !== undefined)
            problems.push(
              `invalid ${resource} value ${quoted(value)} in ${kind} ` +
                `${containerName(record, position)}${field === 'requests' ? ' (requests)' : ''}: ${why}`,
            );
        }
      }
    }
  }
  return problems;
}

/** A container's name for a message: clipped, or its position when it has none. */
export function containerName(container: Record<string, unknown> | undefined, position: number): string {
  return typeof container?.name === 'string' && container.name !== ''
    ? clip(container.name, LABEL_CHARS)
    : `#${position}`;
}

/** The first problem and how many more: one line whatever the number of containers. */
export function describeProblems(problems: readonly string[]): string {
  const [first = ''] = problems;
  return problems.length > 1 ? `${first} (and ${problems.length - 1} more)` : first;
}

/** Does any container name a GPU resource at all (readable or not)? */
export function namesGpuResource(pod: unknown): boolean {
  const spec = asRecord(asRecord(pod)?.spec);
  return [...containerList(spec?.initContainers), ...containerList(spec?.containers)].some((container) => {
    const resources = asRecord(asRecord(container)?.resources);
    return GPU_RESOURCES.some(
      (resource) =>
        asRecord(resources?.limits)?.[resource] !== undefined ||
        asRecord(resources?.requests)?.[resource] !== undefined,
    );
  });
}
