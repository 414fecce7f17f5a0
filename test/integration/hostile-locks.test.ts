import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig, RbacAuthorizationV1Api, type CoreV1Api } from '@kubernetes/client-node';
import { expect } from 'chai';
import { EXIT_OK, runCli } from '../../src/commands/cli.js';
import { ClusterCache } from '../../src/cluster/cluster-cache.js';
import type { LockRow } from '../../src/lock/lock-report.js';
import { locksCommand } from '../../src/commands/locks-command.js';
import { formatLockValue, formatRfc3339, type PodRef } from '../../src/lock/lock-value.js';
import { NodeLocks } from '../../src/lock/node-locks.js';
import { sweepOnce, type SweepReport } from '../../src/sweeper/sweep-pass.js';
import { createGpuNode, createPod, InstrumentedLockApi, readLock, setLock } from '../support/lock-helpers.js';
import { eventually, notYet, testCluster, uniqueName } from '../support/test-cluster.js';
import { kubeSources } from '../../src/cluster/kube-list-watch.js';

/**
 * Lock values planted on real nodes as anyone who can patch a node, a buggy plugin or a skewed
 * clock would leave them (issue 13): none may hold a node forever, fail the sweeper, a bind or the
 * CLI. Ages are judged from first sight, so the rules run here with a short grace and expiry.
 */
const CONFIG = { bindGraceMs: 2_000, expireMs: 4_000 };
const YEAR_SECONDS = 365 * 86_400;

const FAR_FUTURE = '2099-01-01T00:00:00Z';
const ANCIENT = '0001-01-01T00:00:00Z';
/** 250,000 characters: the owner lookup built from it once failed with an HTTP/2 frame error. */
const hugeOwner = (namespace: string) => `${formatRfc3339(new Date())},${namespace},${'a'.repeat(250_000)}`;
/** Go refuses a lower-case `t`: HAMi could never have written it. */
const lowerCaseT = (owner: PodRef) => formatLockValue(new Date(), owner).replace('T', 't');

async function plant(core: CoreV1Api, values: Record<string, string>): Promise<Record<string, string>> {
  const nodes: Record<string, string> = {};
  await Promise.all(
    Object.entries(values).map(async ([label, value]) => {
      const node = await createGpuNode(core);
      await setLock(core, node, value);
      nodes[label] = node;
    }),
  );
  return nodes;
}

const releasedBy = (report: SweepReport): Record<string, string | undefined> =>
  Object.fromEntries(report.released.map((entry) => [entry.node, entry.classification?.reason]));

describe('hostile node-lock values on a real apiserver', function () {
  this.timeout(120_000);

  it('the sweeper frees each pathological lock in the first pass after it is releasable, and never errors on one', async () => {
    const { core, kubeConfig, namespace } = testCluster();
    const waiting = await createPod(core, namespace, 'waiting');
    const nodes = await plant(core, {
      futureLegacy: FAR_FUTURE,
      futureOwned: `${FAR_FUTURE},${namespace},${waiting.name}`,
      ancientLegacy: ANCIENT,
      ancientOwned: `${ANCIENT},${namespace},${waiting.name}`,
      hugeOwner: hugeOwner(namespace),
      lowerCaseT: lowerCaseT(waiting),
    });
    const byNode: Record<string, string> = Object.fromEntries(
      Object.entries(nodes).map(([label, node]) => [node, label]),
    );
    const cache = new ClusterCache({ sources: kubeSources(kubeConfig) });
    await cache.start();
    try {
      const ours = Object.values(nodes);
      await eventually(
        'the state store to see every planted lock',
        () => {
          const unseen = ours.filter((node) => cache.lockOf(node) === undefined);
          return Promise.resolve(
            unseen.length === 0
              ? true
              : notYet(
                  `${unseen.length} of ${ours.length} planted locks not in the store: ${unseen.map((node) => byNode[node] ?? node).join(', ')}`,
                ),
          );
        },
        undefined,
        undefined,
        (recheck) => cache.onNodeChange(recheck),
      );
      const api = new InstrumentedLockApi(core);
      const locks = new NodeLocks({ api, view: cache.lockView, config: CONFIG });
      const sweep = async (): Promise<Record<string, string | undefined>> => {
        const report = await sweepOnce({
          targets: { lockedNodes: () => ours.filter((node) => cache.lockOf(node) !== undefined) },
          locks,
          concurrency: 4,
        });
        expect(report.errors).to.deep.equal([]);
        return Object.fromEntries(
          Object.entries(releasedBy(report)).map(([node, reason]) => [byNode[node] ?? node, reason]),
        );
      };
      const firstSeen = Math.max(...ours.map((node) => cache.lockOf(node)?.firstSeen.getTime() ?? 0));
      const waitUntil = (ms: number) =>
        new Promise((resolve) => setTimeout(resolve, Math.max(0, firstSeen + ms - Date.now())));

      // No owner to look up: freed at once, without a pod read. An owned stamp from long ago proves
      // nothing (issue #42 item 8: a stamp is its writer's clock): the apiserver recorded the lock's
      // write after the pod's creation, so it is judged like any lock of that pod.
      expect(await sweep()).to.deep.equal({ hugeOwner: 'malformed', lowerCaseT: 'malformed' });
      expect(api.podReads.every((pod) => pod.name.length <= 253)).to.equal(true);

      // An owned stamp far in the future or the past: a bind in progress for the grace after first
      // sight, then the owner is not bound here: released.
      await waitUntil(CONFIG.bindGraceMs + 300);
      expect(await sweep()).to.deep.equal({ futureOwned: 'owner-replaced', ancientOwned: 'owner-replaced' });

      // Legacy stamps (no owner): the expiry after first sight, whatever the stamp says.
      await waitUntil(CONFIG.expireMs + 300);
      expect(await sweep()).to.deep.equal({ futureLegacy: 'legacy-expired', ancientLegacy: 'legacy-expired' });

      for (const node of ours) expect(await readLock(core, node), byNode[node]).to.equal(undefined);
    } finally {
      await cache.stop();
    }
  });

  it('a bind takes a node whose lock names no possible pod at once, without looking the owner up', async () => {
    const { core, namespace } = testCluster();
    const next = await createPod(core, namespace, 'next');
    const nodes = await plant(core, { hugeOwner: hugeOwner(namespace), lowerCaseT: lowerCaseT(next) });
    const api = new InstrumentedLockApi(core);
    const locks = new NodeLocks({ api, config: CONFIG });
    for (const node of Object.values(nodes)) {
      const result = await locks.acquire(node, next);
      expect(result.outcome).to.equal('taken-over');
      expect(result.replaced?.reason).to.equal('malformed');
      expect(await readLock(core, node)).to.equal(result.value);
    }
    expect(api.podReads).to.deep.equal([]);
  });

  it('vgpu-warden locks lists every lock, pathological ones next to normal ones, and exits 0', async () => {
    const { core, namespace } = testCluster();
    const fresh = await createPod(core, namespace, 'fresh');
    const nodes = await plant(core, {
      normal: formatLockValue(new Date(), fresh),
      orphan: formatLockValue(new Date(), { namespace, name: 'gone' }),
      futureLegacy: FAR_FUTURE,
      futureOwned: `${FAR_FUTURE},${namespace},${fresh.name}`,
      ancientLegacy: ANCIENT,
      hugeOwner: hugeOwner(namespace),
      lowerCaseT: lowerCaseT(fresh),
    });
    const run = async (args: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await runCli(['locks', ...args], [locksCommand()], {
        env: { KUBECONFIG: testCluster().controlPlane.kubeconfigPath },
        stdout: (line) => out.push(line),
        stderr: (line) => err.push(line),
      });
      return { code, out, err };
    };

    const json = await run(['-o', 'json']);
    expect(json.err).to.deep.equal([]);
    expect(json.code).to.equal(EXIT_OK);
    const items = (JSON.parse(json.out.join('\n')) as { items: LockRow[] }).items;
    const item = (label: string): LockRow => {
      const found = items.find((candidate) => candidate.node === nodes[label]);
      if (found === undefined) throw new Error(`no row for ${label}`);
      return found;
    };
    expect(item('normal')).to.deep.include({ kind: 'owned', state: 'held', reason: 'bind-in-progress' });
    expect(item('orphan')).to.deep.include({ kind: 'owned', state: 'releasable', reason: 'owner-not-found' });
    // A stamp in the future is aged from the apiserver's record of the write, and says how far ahead it is.
    for (const label of ['futureLegacy', 'futureOwned']) {
      expect(item(label).ageSeconds, label).to.be.within(0, 30);
      expect(item(label).stampAheadSeconds, label).to.be.above(70 * YEAR_SECONDS);
    }
    expect(item('futureLegacy')).to.deep.include({ kind: 'legacy', state: 'held', reason: 'legacy-fresh' });
    expect(item('futureOwned')).to.deep.include({ kind: 'owned', state: 'held', reason: 'bind-in-progress' });
    // Year 0001, not 1901: the stamp's own age, 2025 years and more.
    expect(item('ancientLegacy')).to.deep.include({ kind: 'legacy', state: 'releasable', reason: 'legacy-expired' });
    expect(item('ancientLegacy').ageSeconds).to.be.above(2024 * YEAR_SECONDS);
    for (const label of ['hugeOwner', 'lowerCaseT']) {
      expect(item(label), label).to.deep.include({
        kind: 'malformed',
        holder: null,
        ageSeconds: null,
        state: 'releasable',
        reason: 'malformed',
        owner: null,
      });
    }
    expect(item('hugeOwner').problem).to.match(/^names no possible pod: pod name "a+…" is not a DNS-1123 subdomain/);
    expect(item('hugeOwner').value).to.have.length.above(250_000);

    const table = await run([]);
    expect(table.err).to.deep.equal([]);
    expect(table.code).to.equal(EXIT_OK);
    const [header = '', ...lines] = table.out;
    const columns = ['HOLDER', 'AGE', 'STATE', 'REASON'].map((name) => header.indexOf(name));
    const cells = (label: string): string[] => {
      const line = lines.find((candidate) => candidate.startsWith(`${nodes[label] ?? '?'} `)) ?? '';
      return columns.map((start, index) => line.slice(start, columns[index + 1]).trim());
    };
    expect(cells('futureLegacy')[1]).to.match(/^\d+s \(stamp \+7\dy\)$/);
    expect(cells('futureLegacy').slice(2)).to.deep.equal(['held', 'legacy-fresh']);
    expect(cells('ancientLegacy')[1]).to.match(/^20[2-9]\dy$/);
    expect(cells('ancientLegacy').slice(2)).to.deep.equal(['releasable', 'legacy-expired']);
    expect(cells('hugeOwner')).to.deep.equal(['<malformed>', '<unknown>', 'releasable', 'malformed']);
    expect(cells('orphan').slice(2)).to.deep.equal(['releasable', 'owner-not-found']);
    expect(
      Math.max(...table.out.map((line) => line.length)),
      'no line carries the 250,000-character value',
    ).to.be.below(400);
  });

  it('vgpu-warden locks lists a node whose owner cannot be read as unknown, lists the others, and exits 0', async () => {
    const { core, kubeConfig, namespace, controlPlane } = testCluster();
    const owner = await createPod(core, namespace, 'owner');
    const nodes = await plant(core, {
      owned: formatLockValue(new Date(), owner),
      legacy: formatRfc3339(new Date()),
      garbage: 'not,a lock',
    });
    // An identity that may read nodes but not pods: every owner lookup answers 403.
    const user = uniqueName('nodes-only');
    const rbac = kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createClusterRole({
      body: { metadata: { name: user }, rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list'] }] },
    });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: user },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: user },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
      },
    });
    const dir = mkdtempSync(join(tmpdir(), 'hostile-locks-'));
    try {
      const asUser = new KubeConfig();
      asUser.loadFromFile(controlPlane.kubeconfigPath);
      const current = asUser.getCurrentUser();
      if (current === null) throw new Error('the admin kubeconfig has no current user');
      asUser.users = asUser.users.map((entry) =>
        entry.name === current.name ? { ...entry, impersonateUser: user } : entry,
      );
      const kubeconfig = join(dir, 'kubeconfig');
      writeFileSync(kubeconfig, asUser.exportConfig());
      const out: string[] = [];
      const err: string[] = [];
      // Until the new ClusterRole reaches the authorizer the listing itself is refused (exit 1).
      const code = await eventually(
        'a listing as the nodes-only user',
        async () => {
          out.length = 0;
          err.length = 0;
          const exit = await runCli(['locks', '-o', 'json', '--kubeconfig', kubeconfig], [locksCommand()], {
            env: {},
            stdout: (line) => out.push(line),
            stderr: (line) => err.push(line),
          });
          return exit === EXIT_OK ? exit : notYet(`exit ${exit}; stderr: ${err.at(-1)?.slice(0, 200) ?? 'nothing'}`);
        },
        10_000,
        250,
      );

      expect(code).to.equal(EXIT_OK);
      const items = (JSON.parse(out.join('\n')) as { items: LockRow[] }).items;
      const item = (label: string) => items.find((candidate) => candidate.node === nodes[label]);
      expect(item('owned')).to.deep.include({
        holder: owner,
        kind: 'owned',
        ageSeconds: null,
        state: 'unknown',
        reason: 'inspect-failed',
        owner: null,
      });
      expect(item('owned')?.error).to.match(
        new RegExp(`^could not inspect the lock on node ${nodes.owned ?? '?'}: caused by: .*403`),
      );
      expect(item('legacy')).to.deep.include({ kind: 'legacy', state: 'held', reason: 'legacy-fresh' });
      expect(item('garbage')).to.deep.include({ kind: 'malformed', state: 'releasable', reason: 'malformed' });
      expect(err.filter((line) => line.includes(nodes.owned ?? '?'))).to.have.length(1);
      expect(err[0]).to.match(/^vgpu-warden: could not inspect the lock on node /);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await rbac.deleteClusterRoleBinding({ name: user }).catch(() => undefined);
      await rbac.deleteClusterRole({ name: user }).catch(() => undefined);
    }
  });
});
