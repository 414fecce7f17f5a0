import { INT32_MAX, int32Quantity } from './quantity.js';

/**
 * Per-container NVIDIA requests of a pod, following HAMi v2.10's `GenerateResourceRequests`
 * (hami-wire-contract.md §4.3). Pure: takes raw Pod JSON or a client-node V1Pod through plain
 * property access, never throws.
 */
export const GPU_COUNT = 'nvidia.com/gpu';
export const GPU_MEMORY = 'nvidia.com/gpumem';
export const GPU_MEMORY_PERCENTAGE = 'nvidia.com/gpumem-percentage';
export const GPU_CORES = 'nvidia.com/gpucores';

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
export const DEFAULT_REQUEST_DEFAULTS: RequestDefaults = Object.freeze({ defaultMemoryMiB: 0, defaultCores: 0, memoryFactor: 1 });

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

/** The NVIDIA request of one container, or undefined when it asks for no GPU (or its gpumem is invalid). */
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

export function podGpuRequests(pod: unknown, defaults: RequestDefaults): PodGpuRequests {
  const spec = asRecord(asRecord(pod)?.spec);
  return {
    initContainers: containerList(spec?.initContainers).map((container) => containerGpuRequest(container, defaults)),
    containers: containerList(spec?.containers).map((container) => containerGpuRequest(container, defaults)),
  };
}

export function hasGpuRequest(requests: PodGpuRequests): boolean {
  return requests.initContainers.some((request) => request !== undefined) || requests.containers.some((request) => request !== undefined);
}

/** The memory a request takes on one GPU: gpumem, else floor(card memory × percentage / 100). */
export function memoryOnGpu(request: ContainerGpuRequest, gpuMemoryMiB: number): number {
  if (request.memoryMiB > 0) return request.memoryMiB;
  if (request.memoryPercentage === undefined) return 0;
  return Math.floor((gpuMemoryMiB * request.memoryPercentage) / 100);
}

const GPU_RESOURCES = [GPU_COUNT, GPU_MEMORY, GPU_MEMORY_PERCENTAGE, GPU_CORES] as const;

function describeValue(value: unknown): string {
  const text = typeof value === 'string' ? value : typeof value === 'number' ? String(value) : `a ${typeof value}`;
  // Tenant-written: never echo it unbounded.
  return JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);
}

/**
 * Why a pod's GPU shares cannot be read: one message per container and resource whose value is
 * not an integer quantity within int32 (or negative). HAMi drops such a request silently and the
 * pod then gets a GPU-less bind; we refuse to place it instead. Empty when every share is readable.
 */
export function gpuRequestProblems(pod: unknown): string[] {
  const spec = asRecord(asRecord(pod)?.spec);
  const problems: string[] = [];
  for (const [kind, list] of [['init container', spec?.initContainers], ['container', spec?.containers]] as const) {
    for (const [position, container] of containerList(list).entries()) {
      const record = asRecord(container);
      const name = typeof record?.name === 'string' ? record.name.slice(0, 63) : `#${position}`;
      const resources = asRecord(record?.resources);
      for (const [which, values] of [['limits', asRecord(resources?.limits)], ['requests', asRecord(resources?.requests)]] as const) {
        for (const resource of GPU_RESOURCES) {
          const value = values?.[resource];
          if (value === undefined || value === null) continue;
          const parsed = int32Quantity(value);
          if (parsed === undefined || parsed < 0) problems.push(`${kind} ${name}: ${which} ${resource} ${describeValue(value)} is not a whole number from 0 to ${INT32_MAX}`);
        }
      }
    }
  }
  return problems;
}

/** Does any container name a GPU resource at all (readable or not)? */
export function namesGpuResource(pod: unknown): boolean {
  const spec = asRecord(asRecord(pod)?.spec);
  return [...containerList(spec?.initContainers), ...containerList(spec?.containers)].some((container) => {
    const resources = asRecord(asRecord(container)?.resources);
    return GPU_RESOURCES.some((resource) => asRecord(resources?.limits)?.[resource] !== undefined || asRecord(resources?.requests)?.[resource] !== undefined);
  });
}
