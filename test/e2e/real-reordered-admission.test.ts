import type { V1Pod } from '@kubernetes/client-node';
import { expect } from 'chai';
import { decodePodDevices, wire } from '@vgpu-warden/stand-ins/hami-plugin';
import { expectedGpuEnvironment, gpuEnvironment } from '../support/gpu-environment.js';
import {
  boundPod,
  nodeLock,
  nodeUnlocked,
  podGone,
  podNamed,
  RealGpuNodes,
  realGpuPod,
} from '../support/real-gpu-nodes.js';
import { eventually, notYet, sharedControlPlane, testCluster } from '../support/test-cluster.js';

/**
 * reordered-admission.test.ts on a real kubelet: two GPU pods of one node, `first` pinned to GPU 0
 * with 1000 MiB and `second` to GPU 1 with 2000 MiB, so whose devices a container got is plain from
 * what it printed. kubelet is frozen (SIGSTOP) from before first's bind, as a kubelet slow to admit;
 * whatever frees first's lock while kubelet still has first queued lets the lock name second, and
 * HAMi's plugin then serves first's Allocate with whatever the lock names.
 *
 * - Default lock rules: nothing frees first's lock while first awaits its Allocate, not even
 *   NODELOCK_EXPIRE, so second cannot be bound until kubelet has admitted first; each runs with its own.
 * - NODELOCK_FORCE_AFTER (opt-in), kubelet frozen: the stalled lock is not forced while the node's
 *   kubelet has not renewed its Lease since the lock was written. Measured here before that rule:
 *   the sweeper forced the lock, second was bound, and once kubelet ran it admitted the two in
 *   creation order, so HAMi's plugin served first with second's GPU and, through v2.10's pod-list
 *   fallback, second with first's (3 of 3 runs; without the fallback second was rejected instead).
 * - NODELOCK_FORCE_AFTER, kubelet running but the plugin slow inside first's Allocate (what the
 *   setting is for): first's lock is forced and second is bound meanwhile; second's lock is not
 *   forced while first still awaits kubelet's acknowledgement (second is queued behind it), and each
 *   gets its own GPU, since HAMi's plugin resolved first through the lock before the slow part.
 *
 * The simulated suite stays for the orders a real kubelet does not take here (latest-first, one pod
 * held back while the other is admitted): kubelet admits in its own order, which this suite records.
 */
const RUNS = Number(process.env.REAL_REORDER_RUNS ?? 3);
const FAST = {
  BIND_GRACE: '1s',
  BIND_TIMEOUT: '900ms',
  BIND_LOCK_WAIT: '500ms',
  NODELOCK_EXPIRE: '3s',
  SWEEP_SCHEDULE: '* * * * * *',
  LEADER_ELECTION: 'false',
};
const FORCE_AFTER = { ...FAST, NODELOCK_FORCE_AFTER: '5s' };
/** How long kubelet stays frozen with first bound, in the default case: past NODELOCK_EXPIRE (3 s). */
const HELD_MS = 6_500;
/** The same with NODELOCK_FORCE_AFTER=5s: well past it. */
const FROZEN_PAST_FORCE_MS = 9_000;
/** How long the plugin takes inside first's Allocate: longer than FORCE_AFTER plus a Lease renewal (every 10 s). */
const SLOW_ALLOCATE_MS = 30_000;

type Name = 'first' | 'second';

interface Outcome {
  /** Which pod each Allocate served, in kubelet's order (through the lock or the list fallback). */
  served: string[];
  /** Per pod: Running with whose devices (`first`, `second`, `none` when it printed neither), or its failure reason. */
  ran: Record<Name, string>;
}

describe('a real kubelet admitting two GPU pods of one node in its own order', function () {
  this.timeout(300_000);

  /** Starts the nodes and returns the per-run steps; `stop` tears everything down. */
  function suite(env: Record<string, string>, fallback: boolean) {
    let cluster: RealGpuNodes;
    let node = '';
    before(async function () {
      this.timeout(180_000);
      cluster = new RealGpuNodes(sharedControlPlane(), { nodes: 1, gpusPerNode: 2, env, fallback });
      await cluster.start();
      node = cluster.nodeNames[0] ?? '';
    });
    after(async function () {
      this.timeout(120_000);
      if (node !== '') cluster.node(node).resume();
      await cluster.stop();
    });
    afterEach(() => {
      if (node !== '') cluster.node(node).resume();
    });

    const pod = (name: Name, run: number): V1Pod => {
      const [gpu0, gpu1] = cluster.gpus.get(node) ?? [];
      const body = realGpuPod(`${name}-${run}`, cluster.group, {
        'nvidia.com/gpu': '1',
        'nvidia.com/gpumem': name === 'first' ? '1000' : '2000',
        'nvidia.com/gpucores': '10',
      });
      body.metadata = {
        ...body.metadata,
        annotations: { 'nvidia.com/use-gpuuuid': (name === 'first' ? gpu0 : gpu1)?.uuid ?? '' },
      };
      return body;
    };

    /** The GPU environment the pod's container printed, or undefined when it never ran. */
    async function printed(name: string): Promise<Record<string, string> | undefined> {
      const { core, namespace } = testCluster();
      const found = await podNamed(name);
      if (found?.status?.phase !== 'Running') return undefined;
      const log = await eventually(
        `${name} to print its environment`,
        async () => {
          const text = await core.readNamespacedPodLog({ namespace, name, container: 'main' });
          return text.includes('NVIDIA_VISIBLE_DEVICES') ? text : notYet(`log: ${text.slice(0, 200)}`);
        },
        20_000,
        200,
      );
      return gpuEnvironment(log);
    }

    /** Whose allocation (of `pods`) an environment equals. */
    function whose(environment: Record<string, string>, pods: Record<Name, V1Pod>): string {
      // The container prints its environment sorted; compare regardless of key order.
      const canonical = (variables: Record<string, string>) =>
        JSON.stringify(Object.entries(variables).sort(([a], [b]) => a.localeCompare(b)));
      for (const name of ['first', 'second'] as const) {
        const devices = decodePodDevices(pods[name].metadata?.annotations?.[wire.DEVICES_ALLOCATED] ?? '').flat();
        if (canonical(expectedGpuEnvironment(devices)) === canonical(environment)) return name;
      }
      return `none (${JSON.stringify(environment)})`;
    }

    /** Both pods settled (Running or Failed): who was served, who ran with whose devices. */
    async function outcome(run: number, bound: Record<Name, V1Pod>, recordsBefore: number): Promise<Outcome> {
      const settled = async (name: string) =>
        eventually(
          `${name} Running or Failed`,
          async () => {
            const found = await podNamed(name);
            return found?.status?.phase === 'Running' || found?.status?.phase === 'Failed'
              ? found
              : notYet(`phase ${found?.status?.phase ?? 'gone'}`);
          },
          60_000,
          50,
        );
      const ran = {} as Record<Name, string>;
      for (const name of ['first', 'second'] as const) {
        const found = await settled(`${name}-${run}`);
        const environment = await printed(`${name}-${run}`);
        ran[name] = environment === undefined ? `Failed ${found.status?.reason ?? ''}` : whose(environment, bound);
      }
      const served = cluster.plugin.records
        .slice(recordsBefore)
        .filter((record) => record.outcome !== 'stalled')
        .map((record) =>
          record.outcome === 'allocated'
            ? `${(record.resolvedTo?.name ?? '?').replace(/-\d+$/, '')} via ${record.via ?? '?'}`
            : `failed: ${record.error ?? ''}`,
        );
      return { served, ran };
    }

    async function cleanUp(run: number): Promise<void> {
      const { core, namespace } = testCluster();
      for (const name of [`first-${run}`, `second-${run}`])
        await core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 }).catch(() => undefined);
      for (const name of [`first-${run}`, `second-${run}`]) await podGone(name);
      await nodeUnlocked(core, node);
    }

    /**
     * One run with kubelet frozen from before first's bind for `holdMs`: the lock stays on first and
     * second waits; once kubelet runs, each runs with its own GPU. Returns resume -> second bound, ms.
     */
    async function frozenRun(run: number, holdMs: number, rule: string): Promise<number> {
      const { core, namespace } = testCluster();
      const real = cluster.node(node);
      const recordsBefore = cluster.plugin.records.length;
      real.pause();
      await core.createNamespacedPod({ namespace, body: pod('first', run) });
      const first = await boundPod(`first-${run}`);
      await core.createNamespacedPod({ namespace, body: pod('second', run) });
      await new Promise((resolve) => setTimeout(resolve, holdMs));
      expect(
        await nodeLock(core, node),
        `first keeps the lock ${holdMs} ms, past ${rule}, while it awaits Allocate`,
      ).to.match(new RegExp(`,first-${run}$`));
      expect((await podNamed(`second-${run}`))?.spec?.nodeName, 'second waits').to.equal(undefined);
      real.resume();
      const resumed = Date.now();
      const second = await boundPod(`second-${run}`, 30_000);
      const secondBound = Date.now() - resumed;
      const seen = await outcome(run, { first, second }, recordsBefore);
      expect(seen).to.deep.equal({
        served: ['first via lock', 'second via lock'],
        ran: { first: 'first', second: 'second' },
      });
      await cleanUp(run);
      return secondBound;
    }

    return {
      get node() {
        return node;
      },
      get cluster() {
        return cluster;
      },
      pod,
      outcome,
      cleanUp,
      frozenRun,
    };
  }

  describe('default lock rules (no NODELOCK_FORCE_AFTER)', () => {
    const nodes = suite(FAST, true);

    it(`second cannot be bound while the frozen kubelet holds first, even past NODELOCK_EXPIRE; once kubelet runs, each runs with its own GPU (${RUNS} runs)`, async () => {
      const secondBoundAfterResume: number[] = [];
      for (let run = 0; run < RUNS; run++)
        secondBoundAfterResume.push(await nodes.frozenRun(run, HELD_MS, 'NODELOCK_EXPIRE'));
      process.stdout.write(
        `        kubelet frozen ${HELD_MS} ms with first bound; resume -> second bound: ${secondBoundAfterResume.join(', ')} ms (${RUNS} runs)\n`,
      );
    });
  });

  describe("NODELOCK_FORCE_AFTER=5s (opt-in), the plugin with HAMi v2.10's pod-list fallback", () => {
    const nodes = suite(FORCE_AFTER, true);

    it(`kubelet frozen: FORCE_AFTER is withheld (the kubelet has not run since the lock was written), so second waits; once kubelet runs, each runs with its own GPU (${RUNS} runs)`, async () => {
      const secondBoundAfterResume: number[] = [];
      for (let run = 0; run < RUNS; run++)
        secondBoundAfterResume.push(await nodes.frozenRun(run, FROZEN_PAST_FORCE_MS, 'NODELOCK_FORCE_AFTER'));
      process.stdout.write(
        `        kubelet frozen ${FROZEN_PAST_FORCE_MS} ms with first bound: the lock stayed on first in ${RUNS} of ${RUNS} runs; resume -> second bound: ${secondBoundAfterResume.join(', ')} ms\n`,
      );
    });

    it("kubelet running, the plugin slow inside first's Allocate: FORCE_AFTER frees first's lock, second is bound and keeps its lock while queued behind first, each runs with its own GPU", async () => {
      const { core, namespace } = testCluster();
      const run = RUNS;
      const recordsBefore = nodes.cluster.plugin.records.length;
      let calls = 0;
      // HAMi's plugin resolves the pod through the lock first; the slow part comes after, so the
      // late answer still carries first's devices.
      nodes.cluster.allocation = () =>
        calls++ === 0 ? { kind: 'allocate', afterLookupDelayMs: SLOW_ALLOCATE_MS } : { kind: 'allocate' };
      try {
        await core.createNamespacedPod({ namespace, body: nodes.pod('first', run) });
        const first = await boundPod(`first-${run}`);
        const boundAt = Date.now();
        await core.createNamespacedPod({ namespace, body: nodes.pod('second', run) });
        const second = await boundPod(`second-${run}`, SLOW_ALLOCATE_MS);
        const forcedAfter = Date.now() - boundAt;
        expect(
          (await podNamed(`first-${run}`))?.metadata?.annotations?.[wire.BIND_PHASE],
          "second was bound while first's Allocate was still running",
        ).to.equal('allocating');
        const seen = await nodes.outcome(run, { first, second }, recordsBefore);
        // Found here: with only the Lease rule, second's lock was forced too while kubelet still had
        // second queued behind first's Allocate; second's Allocate then found no lock and failed.
        expect(seen).to.deep.equal({
          served: ['first via lock', 'second via lock'],
          ran: { first: 'first', second: 'second' },
        });
        process.stdout.write(
          `        plugin slow ${SLOW_ALLOCATE_MS} ms in first's Allocate: first bound -> second bound ${forcedAfter} ms (FORCE_AFTER 5 s, then the kubelet's next Lease renewal); Allocate served ${seen.served.join(' | ')}\n`,
        );
        await nodes.cleanUp(run);
      } finally {
        nodes.cluster.allocation = () => ({ kind: 'allocate' });
      }
    });
  });
});
