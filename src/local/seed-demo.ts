import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { parseLockValue } from '../lock/lock-value.js';
import { BIND_PHASE_ANNOTATION, NODE_LOCK_ANNOTATION } from '../hami/wire.js';
import { sleep } from '../base/abort.js';

/** Prefix of the victims' names: the simulated device plugin never allocates such a pod. */
export const SEED_VICTIM = 'seed-victim';
export const SEED_REPLACEMENT = 'seed-replacement';

/** How the victim goes: at once (`--grace-period=0 --force`) or with a grace period kubelet finishes. */
export type SeedVariant = 'force' | 'graceful';
export const SEED_VARIANTS: readonly SeedVariant[] = ['force', 'graceful'];

export interface SeedVariantResult {
  variant: SeedVariant;
  /** From the victim's delete to its lock no longer naming it. */
  releasedAfterMs: number;
  /** From the victim's delete to the replacement allocated (simulated) or Running (real). */
  readyAfterMs: number;
  /** The GPUs the replacement's container was given (real nodes: from its log), when known. */
  visibleDevices: string | undefined;
}

/**
 * The node the demo runs on, as local mode built it. On real nodes kubelet is frozen while the
 * victim is bound and deleted (a kubelet slow to admit, the case the bug lives in) and resumed 1.5 s
 * after the delete; on simulated nodes the device-plugin simulator never allocates a victim, so
 * its lock stays as a pod waiting for Allocate would keep it, and the demo finishes a graceful
 * delete itself 1.5 s after it began, as the missing kubelet would.
 */
export interface SeedDemoNode {
  mode: 'real' | 'simulated';
  name: string;
  /** A GPU pod body these nodes can run. */
  gpuPod(name: string): V1Pod;
  /** Real: SIGSTOP to kubelet. Simulated: nothing. */
  freezeKubelet(): void;
  /** Real: SIGCONT to kubelet. Simulated: nothing. */
  resumeKubelet(): void;
  /** Real: the container's NVIDIA_VISIBLE_DEVICES from its log. */
  visibleDevices?(pod: V1Pod): Promise<string | undefined>;
}

export interface SeedDemoDeps {
  core: CoreV1Api;
  namespace: string;
  node: SeedDemoNode;
  say: (line: string) => void;
  /** How long kubelet stays frozen after the delete (real nodes); default 1.5 s. */
  kubeletLagMs?: number;
  timeoutMs?: number;
}

/** What HAMi v2.10's scheduler does with the same lock (measured; docs/operate.md, "The seed demo"). */
export const HAMI_V2_10: Readonly<Record<SeedVariant, string>> = {
  force: 'HAMi v2.10 frees it at its next bind to the node, when that bind finds the owner gone (1.2-3.2 s measured)',
  graceful:
    'HAMi v2.10 keeps it for the whole NODELOCK_EXPIRE (5m): the owner still exists while its graceful delete runs',
};

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`seed demo: timed out waiting for ${what}`);
    await sleep(5);
  }
}

async function readPod(core: CoreV1Api, namespace: string, name: string): Promise<V1Pod | undefined> {
  try {
    return await core.readNamespacedPod({ name, namespace });
  } catch {
    return undefined;
  }
}

/**
 * The seed scenario on the local cluster, once per variant: a GPU pod for the node is deleted the
 * moment its node lock appears (bound, waiting for Allocate), then a replacement GPU pod for the same
 * node is created. Here the DELETE webhook, the pod watch, the sweeper or the next bind frees the lock
 * as soon as no kubelet can still admit the victim; each variant's line says what HAMi v2.10 does.
 * The replacements are left running for `kubectl get pods`.
 */
export async function runSeedDemo(deps: SeedDemoDeps): Promise<SeedVariantResult[]> {
  const results: SeedVariantResult[] = [];
  const how =
    deps.node.mode === 'real'
      ? 'kubelet frozen from before the victim is bound until 1.5 s after its delete'
      : 'the simulated plugin never allocates the victim; ' +
        'a graceful delete is finished 1.5 s after it began, as kubelet would';
  deps.say(`seed demo on ${deps.node.mode} nodes (${how})`);
  for (const variant of SEED_VARIANTS) results.push(await runVariant(deps, variant));
  return results;
}

async function runVariant(deps: SeedDemoDeps, variant: SeedVariant): Promise<SeedVariantResult> {
  const { core, namespace, node, say } = deps;
  const timeoutMs = deps.timeoutMs ?? 60_000;
  const victim = `${SEED_VICTIM}-${variant}`;
  const replacement = `${SEED_REPLACEMENT}-${variant}`;
  const tag = `seed demo (${variant} delete)`;
  const lockOf = async () => (await core.readNode({ name: node.name })).metadata?.annotations?.[NODE_LOCK_ANNOTATION];
  node.freezeKubelet();
  // An object: the wait below thaws kubelet from inside a callback.
  const kubelet = { frozen: true };
  try {
    say(`${tag}: creating GPU pod ${namespace}/${victim} for ${node.name}; it is deleted the moment its lock appears`);
    await core.createNamespacedPod({ namespace, body: node.gpuPod(victim) });
    const lock = await until(
      `the lock of ${victim}`,
      async () => {
        const value = await lockOf();
        const parsed = value === undefined ? undefined : parseLockValue(value);
        return parsed?.kind === 'owned' && parsed.owner.name === victim ? value : undefined;
      },
      timeoutMs,
    );
    say(
      `${tag}: ${node.name} locked: ${lock}; ` +
        `deleting ${victim} ${variant === 'force' ? 'with grace period 0' : 'gracefully'}`,
    );
    const deleted = Date.now();
    await core.deleteNamespacedPod({
      name: victim,
      namespace,
      ...(variant === 'force' ? { gracePeriodSeconds: 0 } : {}),
    });
    await core.createNamespacedPod({ namespace, body: node.gpuPod(replacement) });
    let releasedAfterMs: number | undefined;
    const lagMs = deps.kubeletLagMs ?? 1500;
    const ready = await until(
      `${replacement} to ${node.mode === 'real' ? 'run' : 'be allocated'}`,
      async () => {
        if (kubelet.frozen && Date.now() - deleted >= lagMs) {
          node.resumeKubelet();
          kubelet.frozen = false;
          // No kubelet on a simulated node finishes a graceful delete: the demo does, as kubelet would
          // once the containers are gone (real nodes: kubelet admits the victim, then finishes it).
          if (node.mode === 'simulated' && variant === 'graceful')
            await core.deleteNamespacedPod({ name: victim, namespace, gracePeriodSeconds: 0 }).catch(() => undefined);
        }
        if (releasedAfterMs === undefined) {
          const value = await lockOf();
          if (value === undefined || !value.endsWith(`,${victim}`)) releasedAfterMs = Date.now() - deleted;
        }
        const pod = await readPod(core, namespace, replacement);
        const done =
          node.mode === 'real'
            ? pod?.status?.phase === 'Running'
            : pod?.metadata?.annotations?.[BIND_PHASE_ANNOTATION] === 'success';
        return done ? pod : undefined;
      },
      timeoutMs,
    );
    const readyAfterMs = Date.now() - deleted;
    const visibleDevices = await node.visibleDevices?.(ready);
    const freed = releasedAfterMs ?? readyAfterMs;
    const resumed = node.mode === 'real' ? ` (${Math.max(0, freed - lagMs)} ms after kubelet resumed)` : '';
    say(`${tag}: the victim's lock was freed ${freed} ms after its delete${resumed}; ${HAMI_V2_10[variant]}`);
    const boundTo = ready.spec?.nodeName ?? '?';
    const visible = visibleDevices === undefined ? '' : ` with NVIDIA_VISIBLE_DEVICES=${visibleDevices}`;
    say(
      node.mode === 'real'
        ? `${tag}: replacement pod ${replacement} Running on ${boundTo}${visible} ${readyAfterMs} ms after the delete`
        : `${tag}: replacement pod ${replacement} bound to ${boundTo} and allocated ${readyAfterMs} ms ` +
            'after the delete',
    );
    return { variant, releasedAfterMs: freed, readyAfterMs, visibleDevices };
  } finally {
    if (kubelet.frozen) node.resumeKubelet();
  }
}
