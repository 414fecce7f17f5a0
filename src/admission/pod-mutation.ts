import { pointer, type JsonPatchOp } from './json-patch.js';

/**
 * What the webhook does with a pod on CREATE, as a pure function of the raw pod JSON (never
 * round-tripped through client model classes, which would drop unknown fields). It follows
 * HAMi v2.10's NVIDIA rules (hami-wire-contract.md §2) so HAMi's device plugin sees what it expects.
 */
export const GPU_RESOURCES = {
  count: 'nvidia.com/gpu',
  memory: 'nvidia.com/gpumem',
  memoryPercentage: 'nvidia.com/gpumem-percentage',
  cores: 'nvidia.com/gpucores',
  priority: 'nvidia.com/priority',
} as const;

export const TASK_PRIORITY_ENV = 'CUDA_TASK_PRIORITY';

/** Annotations only the scheduler writes; a pod arriving with them could steer the device plugin (HAMi #3041). */
export function isSchedulerOwnedAnnotation(key: string): boolean {
  return key.startsWith('hami.io/vgpu-') || key.startsWith('hami.io/bind-') || key === 'hami.io/mutex.lock';
}

export interface PodMutationConfig {
  /** Written into spec.schedulerName of GPU pods. */
  schedulerName: string;
  /** Also take over pods that name default-scheduler (what the apiserver defaults an empty name to). */
  overwriteDefaultScheduler: boolean;
  /** nvidia.com/gpu set when a container asks for GPU memory or cores without a count; 0 turns that off. */
  defaultGpuCount: number;
}

export type MutationDecision =
  | { kind: 'skip'; reason: string }
  | { kind: 'patch'; ops: JsonPatchOp[]; warnings: string[] }
  | { kind: 'deny'; code: number; message: string };

type Json = Record<string, unknown>;

interface ContainerLike {
  name?: unknown;
  env?: unknown;
  resources?: { limits?: Record<string, unknown>; requests?: Record<string, unknown> };
  securityContext?: { privileged?: unknown };
}

function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function quantity(map: Record<string, unknown> | undefined, name: string): string | undefined {
  const value = map?.[name];
  if (value === undefined || value === null) return undefined;
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function isPositiveCount(value: string | undefined): boolean {
  return value !== undefined && /^\d+$/.test(value) && Number(value) > 0;
}

function percentValue(value: string | undefined): number | undefined {
  return value !== undefined && /^\d+$/.test(value) && Number(value) <= 100 ? Number(value) : undefined;
}

interface ContainerPlan {
  list: 'initContainers' | 'containers';
  index: number;
  container: ContainerLike;
  addLimits: Record<string, string>;
  addEnv: { name: string; value: string }[];
  hasGpu: boolean;
}

/** Applies HAMi's per-container NVIDIA rules; returns the plan or a denial message. */
function planContainer(list: ContainerPlan['list'], index: number, container: ContainerLike, config: PodMutationConfig, warnings: string[]): ContainerPlan | string {
  const name = typeof container.name === 'string' ? container.name : `#${index}`;
  const limits = isRecord(container.resources?.limits) ? container.resources.limits : undefined;
  const requests = isRecord(container.resources?.requests) ? container.resources.requests : undefined;
  const plan: ContainerPlan = { list, index, container, addLimits: {}, addEnv: [], hasGpu: false };

  const percentage = quantity(limits, GPU_RESOURCES.memoryPercentage) ?? quantity(requests, GPU_RESOURCES.memoryPercentage);
  if (percentage !== undefined && percentValue(percentage) === undefined) {
    return `invalid ${GPU_RESOURCES.memoryPercentage} value ${percentage} in container ${name}: must be an integer between 0 and 100`;
  }
  const cores = quantity(limits, GPU_RESOURCES.cores) ?? quantity(requests, GPU_RESOURCES.cores);
  if (cores !== undefined && percentValue(cores) === undefined) {
    return `invalid ${GPU_RESOURCES.cores} value ${cores} in container ${name}: must be an integer between 0 and 100`;
  }

  const priority = quantity(limits, GPU_RESOURCES.priority);
  const env = Array.isArray(container.env) ? (container.env as unknown[]) : [];
  const hasPriorityEnv = env.some((entry) => isRecord(entry) && entry.name === TASK_PRIORITY_ENV);
  if (priority !== undefined && !hasPriorityEnv) {
    if (!/^\d+$/.test(priority)) return `invalid ${GPU_RESOURCES.priority} value ${priority} in container ${name}: must be a whole number`;
    plan.addEnv.push({ name: TASK_PRIORITY_ENV, value: priority });
  }

  let count = quantity(limits, GPU_RESOURCES.count) ?? quantity(requests, GPU_RESOURCES.count);
  const memory = quantity(limits, GPU_RESOURCES.memory) ?? quantity(requests, GPU_RESOURCES.memory);
  const asksForShare = memory !== undefined || percentage !== undefined || cores !== undefined;
  if (count === undefined && asksForShare && config.defaultGpuCount > 0) {
    count = String(config.defaultGpuCount);
    plan.addLimits[GPU_RESOURCES.count] = count;
    warnings.push(`container ${name}: ${GPU_RESOURCES.count} set to ${count} because it asks for GPU memory or cores without a count`);
  }
  if (!isPositiveCount(count)) return plan;
  plan.hasGpu = true;

  // Exclusive by default: a count with no memory share (or 100 %) gets all cores, as HAMi does.
  const exclusive = percentValue(percentage) === 100 || (memory === undefined && percentage === undefined);
  if (cores === undefined && exclusive) {
    plan.addLimits[GPU_RESOURCES.cores] = '100';
    warnings.push(`container ${name}: ${GPU_RESOURCES.cores} set to 100 (whole GPU: no memory share requested)`);
  }
  return plan;
}

function containerOps(plan: ContainerPlan): JsonPatchOp[] {
  const ops: JsonPatchOp[] = [];
  const base = ['spec', plan.list, plan.index];
  const { container } = plan;
  if (Object.keys(plan.addLimits).length > 0) {
    if (!isRecord(container.resources)) {
      ops.push({ op: 'add', path: pointer(...base, 'resources'), value: { limits: plan.addLimits } });
    } else if (!isRecord(container.resources.limits)) {
      ops.push({ op: 'add', path: pointer(...base, 'resources', 'limits'), value: plan.addLimits });
    } else {
      for (const [key, value] of Object.entries(plan.addLimits)) ops.push({ op: 'add', path: pointer(...base, 'resources', 'limits', key), value });
    }
  }
  if (plan.addEnv.length > 0) {
    if (!Array.isArray(container.env)) ops.push({ op: 'add', path: pointer(...base, 'env'), value: plan.addEnv });
    else for (const entry of plan.addEnv) ops.push({ op: 'add', path: `${pointer(...base, 'env')}/-`, value: entry });
  }
  return ops;
}

export function mutatePodOnCreate(pod: unknown, config: PodMutationConfig): MutationDecision {
  if (!isRecord(pod) || !isRecord(pod.spec)) return { kind: 'deny', code: 400, message: 'request object is not a Pod' };
  const metadata = isRecord(pod.metadata) ? pod.metadata : {};
  // No per-pod opt-out: whoever creates a pod writes its labels. Opting out is a namespace label
  // that only cluster admins set, applied by the webhook's namespaceSelector before we are called.
  const annotations = isRecord(metadata.annotations) ? Object.keys(metadata.annotations) : [];
  const forged = annotations.filter(isSchedulerOwnedAnnotation);
  if (forged.length > 0) {
    return { kind: 'deny', code: 403, message: `pod carries scheduler-owned annotations (${forged.join(', ')}); only the scheduler may set them` };
  }

  const spec = pod.spec;
  const containers = Array.isArray(spec.containers) ? (spec.containers as unknown[]) : [];
  const initContainers = Array.isArray(spec.initContainers) ? (spec.initContainers as unknown[]) : [];
  if (containers.length === 0) return { kind: 'deny', code: 403, message: 'pod has no containers' };

  const current = typeof spec.schedulerName === 'string' ? spec.schedulerName : '';
  const targetsOther = current !== '' && current !== config.schedulerName && !(current === 'default-scheduler' && config.overwriteDefaultScheduler);
  if (targetsOther) return { kind: 'skip', reason: `pod already has different scheduler assigned (${current})` };

  const warnings: string[] = [];
  const plans: ContainerPlan[] = [];
  const all: [ContainerPlan['list'], unknown[]][] = [['initContainers', initContainers], ['containers', containers]];
  for (const [list, items] of all) {
    for (const [index, item] of items.entries()) {
      const planned = planContainer(list, index, isRecord(item) ? item : {}, config, warnings);
      if (typeof planned === 'string') return { kind: 'deny', code: 400, message: planned };
      plans.push(planned);
    }
  }
  if (!plans.some((plan) => plan.hasGpu)) return { kind: 'skip', reason: 'pod requests no GPU' };

  const privileged = plans.find((plan) => plan.container.securityContext?.privileged === true);
  if (privileged) {
    const name = typeof privileged.container.name === 'string' ? privileged.container.name : `#${privileged.index}`;
    return { kind: 'deny', code: 403, message: `container ${name} is privileged; privileged containers cannot share GPUs` };
  }
  if (typeof spec.nodeName === 'string' && spec.nodeName !== '') {
    return { kind: 'deny', code: 403, message: `pod has node assigned (${spec.nodeName}); GPU pods must be placed by ${config.schedulerName}` };
  }

  const ops = plans.flatMap(containerOps);
  if (current !== config.schedulerName) {
    ops.push({ op: 'schedulerName' in spec ? 'replace' : 'add', path: '/spec/schedulerName', value: config.schedulerName });
  }
  return { kind: 'patch', ops, warnings };
}
