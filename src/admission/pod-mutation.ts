import { INT32_MAX, int32Quantity } from '../devices/quantity.js';
import {
  containerName,
  DEFAULT_REQUEST_DEFAULTS,
  describeProblems,
  gpuRequestProblems,
  quantityProblem,
  type RequestDefaults,
} from '../devices/requests.js';
import { clip, LABEL_CHARS, quoted } from '../base/user-text.js';
import { pointer, type JsonPatchOp } from './json-patch.js';
import {
  GPU_CORES,
  GPU_COUNT,
  GPU_MEMORY,
  GPU_MEMORY_PERCENTAGE,
  GPU_PRIORITY,
  isSchedulerOwnedAnnotation,
  type GpuCorePolicy,
} from '../hami/wire.js';
import { isRecord } from '../base/json.js';

/**
 * What the webhook does with a pod on CREATE, as a pure function of the raw pod JSON (never
 * round-tripped through client model classes, which would drop unknown fields). It follows
 * HAMi v2.10's NVIDIA rules (hami-wire-contract.md §2) so HAMi's device plugin sees what it expects.
 */
export const GPU_RESOURCES = {
  count: GPU_COUNT,
  memory: GPU_MEMORY,
  memoryPercentage: GPU_MEMORY_PERCENTAGE,
  cores: GPU_CORES,
  priority: GPU_PRIORITY,
} as const;

export const TASK_PRIORITY_ENV = 'CUDA_TASK_PRIORITY';
/** HAMi's util.CoreLimitSwitch: read by HAMi-core (libvgpu) inside the container. */
export const CORE_POLICY_ENV = 'GPU_CORE_UTILIZATION_POLICY';
/** What HAMi's overwriteEnv writes into containers that get no GPU, so the NVIDIA runtime exposes none. */
export const VISIBLE_DEVICES_ENV = 'NVIDIA_VISIBLE_DEVICES';

export interface PodMutationConfig {
  /** Written into spec.schedulerName of GPU pods. */
  schedulerName: string;
  /** Also take over pods that name default-scheduler (what the apiserver defaults an empty name to). */
  overwriteDefaultScheduler: boolean;
  /** nvidia.com/gpu set when a container asks for GPU memory or cores without a count; 0 turns that off. */
  defaultGpuCount: number;
  /** The extender's request defaults (memoryFactor bounds gpumem); HAMi's chart defaults when absent. */
  requestDefaults?: RequestDefaults;
  /** HAMi's overwriteEnv: NVIDIA_VISIBLE_DEVICES=none on containers that get no GPU. Off when absent, as in HAMi. */
  overwriteEnv?: boolean;
  /** HAMi's runtimeClassName: set on GPU pods that name none. Absent or empty writes nothing, as in HAMi. */
  runtimeClassName?: string | undefined;
  /**
   * HAMi's gpuCorePolicy, written as GPU_CORE_UTILIZATION_POLICY
   * into GPU containers; `default` (HAMi's default) writes nothing.
   */
  gpuCorePolicy?: GpuCorePolicy;
}

export type MutationDecision =
  | { kind: 'skip'; reason: string }
  | { kind: 'patch'; ops: JsonPatchOp[]; warnings: string[] }
  | { kind: 'deny'; code: number; message: string };

type Json = Record<string, unknown>;

type EnvEntry = ContainerPlan['addEnv'][number];

interface ContainerLike {
  name?: unknown;
  env?: unknown;
  resources?: { limits?: Record<string, unknown>; requests?: Record<string, unknown> };
  securityContext?: { privileged?: unknown };
}

/** A resource as written (limits, else requests): the raw JSON value, or undefined when absent. */
function resource(limits: Json | undefined, requests: Json | undefined, name: string): unknown {
  const fromLimits = limits?.[name];
  if (fromLimits !== undefined && fromLimits !== null) return fromLimits;
  const fromRequests = requests?.[name];
  return fromRequests ?? undefined;
}

interface ContainerPlan {
  list: 'initContainers' | 'containers';
  index: number;
  container: ContainerLike;
  addLimits: Record<string, string>;
  addEnv: { name: string; value: string }[];
  hasGpu: boolean;
}

/**
 * Whether the variable already ends up with this value. The kubelet lets the last entry of a name
 * win, so only the last one counts (HAMi's hasEnvVarWithValue): an earlier `none` followed by the
 * user's `all` still needs our entry, and a second webhook call adds nothing.
 */
function envEndsWith(env: unknown[], name: string, value: string): boolean {
  const last = env.findLast((entry) => isRecord(entry) && entry.name === name);
  return isRecord(last) && last.value === value && last.valueFrom === undefined;
}

/** CUDA_TASK_PRIORITY is an int in HAMi's env (0 high, 1 low); refuse what is not a whole number. */
const PRIORITY_BOUNDS = { min: 0, max: INT32_MAX };

/**
 * Applies HAMi's per-container NVIDIA rules to a container whose GPU shares gpuRequestProblems has
 * already found readable; returns the plan or a denial message.
 */
function planContainer(
  list: ContainerPlan['list'],
  index: number,
  container: ContainerLike,
  config: PodMutationConfig,
  warnings: string[],
): ContainerPlan | string {
  const name = containerName(container as Json, index);
  const limits = isRecord(container.resources?.limits) ? container.resources.limits : undefined;
  const requests = isRecord(container.resources?.requests) ? container.resources.requests : undefined;
  const env = Array.isArray(container.env) ? (container.env as unknown[]) : [];
  const plan: ContainerPlan = { list, index, container, addLimits: {}, addEnv: [], hasGpu: false };

  const where = `${list === 'initContainers' ? 'init container' : 'container'} ${name}`;
  const priority = priorityEnv(limits?.[GPU_RESOURCES.priority], env, where);
  if (typeof priority === 'string') return priority;
  if (priority !== undefined) plan.addEnv.push(priority);
  return planGpu(plan, { name, limits, requests, env }, config, warnings);
}

/** One container as planGpu reads it. */
interface ContainerAsks {
  name: string;
  limits: Json | undefined;
  requests: Json | undefined;
  env: unknown[];
}

/**
 * CUDA_TASK_PRIORITY from nvidia.com/priority, unless the container sets the variable itself;
 * undefined when there is nothing to add, a denial message when the value cannot be read.
 */
function priorityEnv(priority: unknown, env: unknown[], where: string): EnvEntry | string | undefined {
  if (priority === undefined || priority === null) return undefined;
  if (env.some((entry) => isRecord(entry) && entry.name === TASK_PRIORITY_ENV)) return undefined;
  const problem = quantityProblem(priority, PRIORITY_BOUNDS);
  if (problem !== undefined)
    return `invalid ${GPU_RESOURCES.priority} value ${quoted(priority)} in ${where}: ${problem}`;
  return { name: TASK_PRIORITY_ENV, value: String(int32Quantity(priority)) };
}

/**
 * The GPU rules: the count a share without one defaults to, the core policy, and all cores for an
 * exclusive GPU; a container without a GPU gets only overwriteEnv.
 */
function planGpu(
  plan: ContainerPlan,
  asks: ContainerAsks,
  config: PodMutationConfig,
  warnings: string[],
): ContainerPlan {
  const { name, limits, requests, env } = asks;
  const percentage = resource(limits, requests, GPU_RESOURCES.memoryPercentage);
  const cores = resource(limits, requests, GPU_RESOURCES.cores);
  const memory = resource(limits, requests, GPU_RESOURCES.memory);

  let count = int32Quantity(resource(limits, requests, GPU_RESOURCES.count));
  const asksForShare = memory !== undefined || percentage !== undefined || cores !== undefined;
  if (count === undefined && asksForShare && config.defaultGpuCount > 0) {
    count = config.defaultGpuCount;
    plan.addLimits[GPU_RESOURCES.count] = String(count);
    warnings.push(
      `container ${name}: ${GPU_RESOURCES.count} set to ${count} ` +
        'because it asks for GPU memory or cores without a count',
    );
  }
  if (count === undefined || count <= 0) {
    // HAMi's overwriteEnv: a container without a GPU must not see the node's GPUs through the
    // NVIDIA runtime's default (all devices). Only such containers, exactly as HAMi.
    if (config.overwriteEnv === true && !envEndsWith(env, VISIBLE_DEVICES_ENV, 'none'))
      plan.addEnv.push({ name: VISIBLE_DEVICES_ENV, value: 'none' });
    return plan;
  }
  plan.hasGpu = true;
  const policy = config.gpuCorePolicy ?? 'default';
  if (policy !== 'default' && !envEndsWith(env, CORE_POLICY_ENV, policy))
    plan.addEnv.push({ name: CORE_POLICY_ENV, value: policy });

  // Exclusive by default: a count with no memory share (or 100 %) gets all cores, as HAMi does.
  const exclusive = int32Quantity(percentage) === 100 || (memory === undefined && percentage === undefined);
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
      for (const [key, value] of Object.entries(plan.addLimits))
        ops.push({ op: 'add', path: pointer(...base, 'resources', 'limits', key), value });
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
  const forged = forgedAnnotationsDenial(pod.metadata);
  if (forged !== undefined) return forged;

  const spec = pod.spec;
  const containers = Array.isArray(spec.containers) ? (spec.containers as unknown[]) : [];
  const initContainers = Array.isArray(spec.initContainers) ? (spec.initContainers as unknown[]) : [];
  if (containers.length === 0) return { kind: 'deny', code: 403, message: 'pod has no containers' };

  const current = typeof spec.schedulerName === 'string' ? spec.schedulerName : '';
  const targetsOther =
    current !== '' &&
    current !== config.schedulerName &&
    !(current === 'default-scheduler' && config.overwriteDefaultScheduler);
  if (targetsOther)
    return { kind: 'skip', reason: `pod already has different scheduler assigned (${clip(current, LABEL_CHARS)})` };

  // One validation for the webhook, filter and bind: a share that cannot be read is refused here
  // rather than dropped (HAMi would then bind the pod with no GPU). kube-apiserver already refuses
  // what is not a quantity or a fraction; the rest (negative, beyond int32 or 100 %) it admits.
  const unreadable = gpuRequestProblems(pod, config.requestDefaults ?? DEFAULT_REQUEST_DEFAULTS);
  if (unreadable.length > 0) return { kind: 'deny', code: 400, message: describeProblems(unreadable) };

  const warnings: string[] = [];
  const all: [ContainerPlan['list'], unknown[]][] = [
    ['initContainers', initContainers],
    ['containers', containers],
  ];
  const plans = planContainers(all, config, warnings);
  if (typeof plans === 'string') return { kind: 'deny', code: 400, message: plans };
  if (!plans.some((plan) => plan.hasGpu)) {
    // HAMi patches such pods too when overwriteEnv is on; the scheduler and everything else stay as written.
    const envOps = plans.flatMap(containerOps);
    return envOps.length === 0
      ? { kind: 'skip', reason: 'pod requests no GPU' }
      : { kind: 'patch', ops: envOps, warnings };
  }
  return (
    gpuPodRefusal(plans, spec, config) ?? { kind: 'patch', ops: gpuPodOps(plans, spec, current, config), warnings }
  );
}

/**
 * No per-pod opt-out: whoever creates a pod writes its labels. Opting out is a namespace label
 * that only cluster admins set, applied by the webhook's namespaceSelector before we are called.
 * So a pod that carries annotations only the scheduler may write is refused.
 */
function forgedAnnotationsDenial(metadata: unknown): MutationDecision | undefined {
  const annotations = isRecord(metadata) && isRecord(metadata.annotations) ? Object.keys(metadata.annotations) : [];
  const forged = annotations.filter(isSchedulerOwnedAnnotation);
  if (forged.length === 0) return undefined;
  const named = forged
    .slice(0, 5)
    .map((key) => clip(key, LABEL_CHARS))
    .join(', ');
  const more = forged.length > 5 ? ` and ${forged.length - 5} more` : '';
  return {
    kind: 'deny',
    code: 403,
    message: `pod carries scheduler-owned annotations (${named}${more}); only the scheduler may set them`,
  };
}

/** The plan of every container, init containers first; the first denial message stops it. */
function planContainers(
  lists: [ContainerPlan['list'], unknown[]][],
  config: PodMutationConfig,
  warnings: string[],
): ContainerPlan[] | string {
  const plans: ContainerPlan[] = [];
  for (const [list, items] of lists) {
    for (const [index, item] of items.entries()) {
      const planned = planContainer(list, index, isRecord(item) ? item : {}, config, warnings);
      if (typeof planned === 'string') return planned;
      plans.push(planned);
    }
  }
  return plans;
}

/** Why a GPU pod cannot be admitted as it is (a privileged container, a node already chosen), if so. */
function gpuPodRefusal(plans: ContainerPlan[], spec: Json, config: PodMutationConfig): MutationDecision | undefined {
  const privileged = plans.find((plan) => plan.container.securityContext?.privileged === true);
  if (privileged) {
    const name = containerName(privileged.container as Json, privileged.index);
    return {
      kind: 'deny',
      code: 403,
      message: `container ${name} is privileged; privileged containers cannot share GPUs`,
    };
  }
  if (typeof spec.nodeName === 'string' && spec.nodeName !== '') {
    return {
      kind: 'deny',
      code: 403,
      message: `pod has node assigned (${clip(spec.nodeName)}); GPU pods must be placed by ${config.schedulerName}`,
    };
  }
  return undefined;
}

/** A GPU pod's patch: the containers' limits and env, the runtime class, and our scheduler (`current`: the pod's). */
function gpuPodOps(plans: ContainerPlan[], spec: Json, current: string, config: PodMutationConfig): JsonPatchOp[] {
  const ops = plans.flatMap(containerOps);
  // As HAMi: only when the pod names no runtime class; the user's choice is never replaced.
  const runtimeClassName = config.runtimeClassName ?? '';
  if (runtimeClassName !== '' && (spec.runtimeClassName === undefined || spec.runtimeClassName === null)) {
    ops.push({ op: 'add', path: '/spec/runtimeClassName', value: runtimeClassName });
  }
  if (current !== config.schedulerName) {
    ops.push({
      op: 'schedulerName' in spec ? 'replace' : 'add',
      path: '/spec/schedulerName',
      value: config.schedulerName,
    });
  }
  return ops;
}
