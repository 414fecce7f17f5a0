import type { V1ResourceQuota } from '@kubernetes/client-node';
import { quotaLimits, type QuotaLimit } from '../devices/gpu-quota.js';
import type { ObjectChange } from './object-store.js';

/**
 * The GPU limits of every namespace, from its ResourceQuotas (gpu-quota.ts reads one). Kept per
 * ResourceQuota so an update or delete replaces exactly that quota's limits; a namespace's limits
 * are all of its quotas' (each is enforced). Quotas without a GPU key take no room here.
 */
export class QuotaIndex {
  /** namespace → ResourceQuota name → its GPU limits. */
  private readonly byNamespace = new Map<string, Map<string, readonly QuotaLimit[]>>();
  /** Problem texts already reported, so a bad value is logged once, not on every relist. */
  private readonly reported = new Set<string>();

  /** `memoryFactor` scales memory limits as it scales requests; `log` hears of unreadable values. */
  constructor(private readonly memoryFactor: number = 1, private readonly log: (message: string) => void = () => undefined) {}

  apply(changes: readonly ObjectChange<V1ResourceQuota>[]): void {
    for (const change of changes) {
      const namespace = change.object.metadata?.namespace;
      const name = change.object.metadata?.name;
      if (namespace === undefined || name === undefined) continue;
      if (change.type === 'delete') this.remove(namespace, name);
      else this.set(namespace, name, change.object);
    }
  }

  /** Every GPU limit of the namespace, in no particular order; empty when none applies. */
  limits(namespace: string): QuotaLimit[] {
    const quotas = this.byNamespace.get(namespace);
    return quotas === undefined ? [] : [...quotas.values()].flat();
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
    if (!quotas) this.byNamespace.set(namespace, (quotas = new Map<string, readonly QuotaLimit[]>()));
    quotas.set(name, limits);
  }

  private remove(namespace: string, name: string): void {
    const quotas = this.byNamespace.get(namespace);
    quotas?.delete(name);
    if (quotas?.size === 0) this.byNamespace.delete(namespace);
  }
}
