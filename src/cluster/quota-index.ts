import type { V1ResourceQuota } from '@kubernetes/client-node';
import { quotaLimits, type NamespaceUse, type QuotaBudget, type QuotaLimit } from '../devices/gpu-quota.js';
import { quotaScopeRequirements, scopesMatchPod, type ScopeRequirement } from '../devices/quota-scopes.js';
import type { ObjectChange } from './object-store.js';

/** One ResourceQuota's GPU limits and the scope requirements that decide which pods it counts. */
interface IndexedQuota {
  limits: readonly QuotaLimit[];
  /** Empty: the quota counts every pod of its namespace. */
  scopes: readonly ScopeRequirement[];
}

/**
 * What the namespace's GPU pods use (bound and assumed, the pod being placed left out): all of them
 * when `counted` is undefined, else only those it accepts (a scoped quota's pods).
 */
export type NamespaceUseOf = (counted: ((pod: unknown) => boolean) | undefined) => Readonly<NamespaceUse>;

/**
 * The GPU limits of every namespace, from its ResourceQuotas (gpu-quota.ts reads one). Kept per
 * ResourceQuota so an update or delete replaces exactly that quota's limits; a namespace's limits
 * are all of its quotas' (each is enforced). Quotas without a GPU key take no room here. A quota's
 * `scopes` and `scopeSelector` decide which pods it counts and holds back, as kube-apiserver's
 * quota admission decides it (quota-scopes.ts): see `budget`.
 */
export class QuotaIndex {
  /** namespace → ResourceQuota name → its GPU limits and scopes. */
  private readonly byNamespace = new Map<string, Map<string, IndexedQuota>>();
  /** Problem texts already reported, so a bad value is logged once, not on every relist. */
  private readonly reported = new Set<string>();

  /** `memoryFactor` scales memory limits as it scales requests; `log` hears of unreadable values. */
  constructor(
    private readonly memoryFactor: number = 1,
    private readonly log: (message: string) => void = () => undefined,
  ) {}

  apply(changes: readonly ObjectChange<V1ResourceQuota>[]): void {
    for (const change of changes) {
      const namespace = change.object.metadata?.namespace;
      const name = change.object.metadata?.name;
      if (namespace === undefined || name === undefined) continue;
      if (change.type === 'delete') this.remove(namespace, name);
      else this.set(namespace, name, change.object);
    }
  }

  /** Every GPU limit of the namespace, whatever its quota's scopes, in no particular order; empty when none. */
  limits(namespace: string): QuotaLimit[] {
    const quotas = this.byNamespace.get(namespace);
    return quotas === undefined ? [] : [...quotas.values()].flatMap((quota) => quota.limits);
  }

  /**
   * The pod's GPU quota: the limits of the namespace's ResourceQuotas whose scopes count `pod`,
   * each scoped one with the use of only the pods it counts; undefined when none limits it. `useOf`
   * sums the namespace's GPU pods, the pod itself left out (the state store's usage).
   */
  budget(namespace: string, pod: unknown, useOf: NamespaceUseOf): QuotaBudget | undefined {
    const quotas = this.byNamespace.get(namespace);
    if (quotas === undefined) return undefined;
    const limits: QuotaLimit[] = [];
    for (const quota of quotas.values()) {
      if (!scopesMatchPod(quota.scopes, pod)) continue;
      if (quota.scopes.length === 0) {
        limits.push(...quota.limits);
        continue;
      }
      const used = useOf((other) => scopesMatchPod(quota.scopes, other));
      limits.push(...quota.limits.map((limit) => ({ ...limit, used })));
    }
    return limits.length === 0 ? undefined : { namespace, limits, used: useOf(undefined) };
  }

  /**
   * Every GPU limit of the namespace, each scoped one with the use of the pods its quota counts
   * (from `useOf`, as in `budget`); an unscoped one has no `used` of its own: the namespace's.
   */
  limitsWithUse(namespace: string, useOf: NamespaceUseOf): QuotaLimit[] {
    const quotas = this.byNamespace.get(namespace);
    if (quotas === undefined) return [];
    return [...quotas.values()].flatMap((quota) => {
      if (quota.scopes.length === 0) return quota.limits;
      const used = useOf((other) => scopesMatchPod(quota.scopes, other));
      return quota.limits.map((limit) => ({ ...limit, used }));
    });
  }

  /** Namespaces with at least one GPU limit. */
  namespaces(): string[] {
    return [...this.byNamespace.keys()];
  }

  private set(namespace: string, name: string, quota: V1ResourceQuota): void {
    const { limits, problems } = quotaLimits(quota, this.memoryFactor);
    for (const problem of problems) {
      if (this.reported.has(problem)) continue;
      // Bounded: one entry per distinct bad value an admin wrote, and the set is only for dedup.
      if (this.reported.size >= 1000) this.reported.clear();
      this.reported.add(problem);
      this.log(problem);
    }
    if (limits.length === 0) {
      this.remove(namespace, name);
      return;
    }
    let quotas = this.byNamespace.get(namespace);
    if (!quotas) this.byNamespace.set(namespace, (quotas = new Map<string, IndexedQuota>()));
    quotas.set(name, { limits, scopes: quotaScopeRequirements(quota) });
  }

  private remove(namespace: string, name: string): void {
    const quotas = this.byNamespace.get(namespace);
    quotas?.delete(name);
    if (quotas?.size === 0) this.byNamespace.delete(namespace);
  }
}
