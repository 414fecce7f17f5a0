import { integerQuantity } from './quantity.js';
import { GPU_CORES, GPU_COUNT, GPU_MEMORY } from '../hami/wire.js';
import type { GpuUse } from './usage.js';
import { clip, LABEL_CHARS, NAME_CHARS } from '../base/user-text.js';

/**
 * Namespace GPU quota the way HAMi's scheduler enforces it (pkg/device/quota.go and the NVIDIA
 * Fit's fitQuota; hami-wire-contract.md §6.3): ResourceQuota `spec.hard` keys `limits.<resource>`
 * for GPU memory and cores, checked against the usage the scheduler itself counts (bound and
 * assumed pods), never against the quota's status, which kube-apiserver does not compute for them.
 * Plus `limits.nvidia.com/gpu`, which HAMi ignores and the issue asks for. Pure.
 */

/** What a namespace's GPU pods take, summed over their GPUs. */
export interface NamespaceUse {
  /** GPU shares (one per container per GPU; HAMi's DeviceUsage.Used). */
  gpus: number;
  memoryMiB: number;
  cores: number;
}

export const NO_NAMESPACE_USE: Readonly<NamespaceUse> = Object.freeze({ gpus: 0, memoryMiB: 0, cores: 0 });

export type QuotaField = keyof NamespaceUse;

/** The resource each usage field is limited as (the quota key without `limits.`). */
export const QUOTA_RESOURCES: Readonly<Record<QuotaField, string>> = Object.freeze({
  memoryMiB: GPU_MEMORY,
  cores: GPU_CORES,
  gpus: GPU_COUNT,
});

/** The keys read, by the usage field each limits. */
export const QUOTA_KEYS: Readonly<Record<QuotaField, string>> = Object.freeze({
  memoryMiB: `limits.${QUOTA_RESOURCES.memoryMiB}`,
  cores: `limits.${QUOTA_RESOURCES.cores}`,
  gpus: `limits.${QUOTA_RESOURCES.gpus}`,
});

/** One namespace's use of a GPU resource against its tightest limit (the quota metrics). */
export interface QuotaUse {
  namespace: string;
  /** One of QUOTA_RESOURCES: nvidia.com/gpumem, nvidia.com/gpucores or nvidia.com/gpu. */
  resource: string;
  used: number;
  limit: number;
}

const FIELD_OF_KEY = new Map(Object.entries(QUOTA_KEYS).map(([field, key]) => [key, field as QuotaField]));

/** One GPU limit of one ResourceQuota. */
export interface QuotaLimit {
  /** The ResourceQuota's name (clipped: the reason quotes it). */
  quota: string;
  field: QuotaField;
  /** In the usage's units: MiB (memoryFactor applied, as HAMi does), HAMi core units, shares. */
  limit: number;
  /**
   * What the pods this quota counts use, when its scopes count fewer than every pod of the
   * namespace (quota-scopes.ts); absent: the budget's `used`.
   */
  used?: Readonly<NamespaceUse>;
}

interface ResourceQuotaLike {
  metadata?: { name?: string; namespace?: string };
  spec?: { hard?: Record<string, unknown> };
}

/**
 * The GPU limits of one ResourceQuota, and a problem per GPU key whose value is not a whole number
 * (HAMi's AsInt64 ignores those too; we also say so). The memory limit is multiplied by
 * `memoryFactor` when it is above 1, as HAMi does, because requests are multiplied by it as well.
 */
export function quotaLimits(
  quota: ResourceQuotaLike,
  memoryFactor: number,
): { limits: QuotaLimit[]; problems: string[] } {
  const name = clip(quota.metadata?.name ?? '', NAME_CHARS);
  const limits: QuotaLimit[] = [];
  const problems: string[] = [];
  for (const [key, raw] of Object.entries(quota.spec?.hard ?? {})) {
    const field = FIELD_OF_KEY.get(key);
    if (field === undefined) continue;
    const value = integerQuantity(raw);
    if (value === undefined || value < 0n) {
      problems.push(
        `ResourceQuota ${quota.metadata?.namespace ?? ''}/${name}: ${key} ${clip(String(raw), LABEL_CHARS)} is not ` +
          `a whole number; ignored`,
      );
      continue;
    }
    const factor = field === 'memoryMiB' && memoryFactor > 1 ? BigInt(Math.floor(memoryFactor)) : 1n;
    // Beyond 2^53 a limit cannot be reached by any count of int32 requests: clamp, exactly enough.
    const scaled = value * factor;
    limits.push({
      quota: name,
      field,
      limit: scaled > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(scaled),
    });
  }
  return { limits, problems };
}

/**
 * The GPU limits a pod is held to (those of its namespace's ResourceQuotas whose scopes count it)
 * and what the namespace uses now, the pod being placed left out. A scoped limit carries its own
 * `used`: only the pods its quota counts.
 */
export interface QuotaBudget {
  namespace: string;
  limits: readonly QuotaLimit[];
  used: Readonly<NamespaceUse>;
}

/** What one pod's placement would add to its namespace: the sum over its GPUs of its per-GPU usage. */
export function namespaceUseOf(usage: ReadonlyMap<string, GpuUse>): NamespaceUse {
  const total = { gpus: 0, memoryMiB: 0, cores: 0 };
  for (const use of usage.values()) {
    total.gpus += use.slots;
    total.memoryMiB += use.memoryMiB;
    total.cores += use.cores;
  }
  return total;
}

/** HAMi's reason name for a GPU whose share would take the namespace over its quota. */
export const RESOURCE_QUOTA_NOT_FIT = 'ResourceQuotaNotFit';

/**
 * The first limit `adding` breaks, as a short sentence naming the quota, or undefined when every
 * limit holds. Every ResourceQuota is enforced (Kubernetes semantics), and an explicit 0 blocks.
 * A field the pod does not add to is never refused: a pod asking for no cores is not blocked by an
 * exhausted core quota (used + 0 is not more than it was).
 */
export function quotaExceeded(budget: QuotaBudget, adding: Readonly<NamespaceUse>): string | undefined {
  for (const limit of budget.limits) {
    const add = adding[limit.field];
    if (add <= 0) continue;
    const used = (limit.used ?? budget.used)[limit.field];
    if (used + add > limit.limit) {
      return (
        `ResourceQuota ${budget.namespace}/${limit.quota}: ${QUOTA_KEYS[limit.field]} ${used} used + ${add} ` +
        `requested > ${limit.limit}`
      );
    }
  }
  return undefined;
}

/**
 * The tightest limit of a namespace per field: what the quota metrics report. With `used` (the
 * namespace's, for the limits without their own), the one with the least room left, the smaller
 * limit among equals: a scoped quota counting few pods may have more room than a larger unscoped
 * one. Without it, the smallest limit.
 */
export function tightestLimits(
  limits: readonly QuotaLimit[],
  used?: Readonly<NamespaceUse>,
): Map<QuotaField, QuotaLimit> {
  const tightest = new Map<QuotaField, QuotaLimit>();
  const room = (limit: QuotaLimit): number =>
    limit.limit - (used === undefined ? 0 : (limit.used ?? used)[limit.field]);
  for (const limit of limits) {
    const known = tightest.get(limit.field);
    if (known === undefined || room(limit) < room(known) || (room(limit) === room(known) && limit.limit < known.limit))
      tightest.set(limit.field, limit);
  }
  return tightest;
}

/** The budget as a short stable key: fit verdicts cached per pod shape must change when it does. */
export function budgetKey(budget: QuotaBudget | undefined): string {
  if (budget === undefined) return '';
  const { used } = budget;
  const useKey = (use: Readonly<NamespaceUse>): string => `${use.gpus}/${use.memoryMiB}/${use.cores}`;
  const limitKey = (limit: QuotaLimit): string =>
    `${limit.quota}=${limit.field}<${limit.limit}${limit.used === undefined ? '' : `@${useKey(limit.used)}`}`;
  return `${useKey(used)}:${budget.limits.map(limitKey).join(',')}`;
}
