import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { EXIT_OK, runCli } from '../../src/commands/cli.js';
import { locksCommand } from '../../src/commands/locks-command.js';
import type { LockRow } from '../../src/lock/lock-report.js';
import { findFreePort } from '../../src/local/free-port.js';
import { formatLockValue, type PodRef } from '../../src/lock/lock-value.js';
import { createGpuNode, createPod, setLock } from '../support/lock-helpers.js';
import { testCluster } from '../support/test-cluster.js';

const MINUTE = 60_000;

function lockValue(pod: PodRef, ageMs: number): string {
  return formatLockValue(new Date(Date.now() - ageMs), pod);
}

async function locks(args: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const env = { KUBECONFIG: testCluster().controlPlane.kubeconfigPath };
  const code = await runCli(['locks', ...args], [locksCommand()], {
    env,
    stdout: (line) => out.push(line),
    stderr: (line) => err.push(line),
  });
  return { code, out, err };
}

describe('vgpu-warden locks on a real apiserver', () => {
  // Nodes are cluster-scoped and other tests of the run leave locks behind, so each test checks
  // its own nodes' rows rather than the whole listing.
  async function lockedNodes() {
    const { core, namespace } = testCluster();
    const [held, stalled, orphaned, garbage, free] = await Promise.all([1, 2, 3, 4, 5].map(() => createGpuNode(core)));
    if (
      held === undefined ||
      stalled === undefined ||
      orphaned === undefined ||
      garbage === undefined ||
      free === undefined
    )
      throw new Error('unreachable');
    const fresh = await createPod(core, namespace, 'fresh');
    const waiting = await createPod(core, namespace, 'waiting', { nodeName: stalled, bindPhase: 'allocating' });
    await setLock(core, held, lockValue(fresh, 5_000));
    await setLock(core, stalled, lockValue(waiting, 6 * MINUTE));
    await setLock(core, orphaned, lockValue({ namespace, name: 'gone' }, 2 * MINUTE));
    await setLock(core, garbage, 'definitely,not a,lock');
    return { namespace, held, stalled, orphaned, garbage, free };
  }

  it('prints a kubectl-style table with holder, age, state and reason of every locked node', async () => {
    const nodes = await lockedNodes();

    const { code, out, err } = await locks([]);

    expect(err).to.deep.equal([]);
    expect(code).to.equal(EXIT_OK);
    const [header, ...rows] = out;
    expect(header).to.match(/^NODE +HOLDER +AGE +STATE +REASON$/);
    const row = (node: string) => {
      const line = rows.find((candidate) => candidate.startsWith(`${node} `));
      expect(line, `no row for ${node} in:\n${out.join('\n')}`).to.be.a('string');
      // Padded columns: every cell starts under its header.
      for (const column of ['HOLDER', 'AGE', 'STATE', 'REASON'])
        expect(line?.charAt(header?.indexOf(column) ?? -1)).to.not.equal(' ');
      return line?.split(/ +/) ?? [];
    };
    const [, heldHolder, heldAge, ...heldRest] = row(nodes.held);
    expect(heldHolder).to.equal(`${nodes.namespace}/fresh`);
    expect(heldAge).to.match(/^[5-9]s$/);
    expect(heldRest).to.deep.equal(['held', 'bind-in-progress']);
    const [, stalledHolder, stalledAge, ...stalledRest] = row(nodes.stalled);
    expect(stalledHolder).to.equal(`${nodes.namespace}/waiting`);
    expect(stalledAge).to.match(/^6m(\ds)?$/);
    expect(stalledRest).to.deep.equal(['stalled', 'awaiting-allocation-past-expiry']);
    const [, orphanHolder, orphanAge, ...orphanRest] = row(nodes.orphaned);
    expect(orphanHolder).to.equal(`${nodes.namespace}/gone`);
    expect(orphanAge).to.match(/^2m(\ds)?$/);
    expect(orphanRest).to.deep.equal(['releasable', 'owner-not-found']);
    expect(row(nodes.garbage).slice(1)).to.deep.equal(['<malformed>', '<unknown>', 'releasable', 'malformed']);
    expect(rows.some((line) => line.startsWith(`${nodes.free} `))).to.equal(false);
    // Sorted by node name, like kubectl.
    const names = rows.map((line) => line.split(' ')[0] ?? '');
    expect(names).to.deep.equal([...names].sort());
  });

  it('prints json with the raw value, holder, age in seconds, state, reason and the owner pod', async () => {
    const nodes = await lockedNodes();

    const { code, out, err } = await locks(['-o', 'json']);

    expect(err).to.deep.equal([]);
    expect(code).to.equal(EXIT_OK);
    const { items } = JSON.parse(out.join('\n')) as { items: LockRow[] };
    const item = (node: string) => items.find((candidate) => candidate.node === node);

    expect(item(nodes.held)).to.deep.include({
      holder: { namespace: nodes.namespace, name: 'fresh' },
      kind: 'owned',
      state: 'held',
      reason: 'bind-in-progress',
      owner: { exists: true, phase: 'Pending', node: null, bindPhase: null, deleting: false },
    });
    expect(item(nodes.held)?.value).to.match(
      new RegExp(`^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ,${nodes.namespace},fresh$`),
    );
    expect(item(nodes.held)?.ageSeconds).to.be.within(4, 15);
    expect(item(nodes.stalled)).to.deep.include({
      state: 'stalled',
      reason: 'awaiting-allocation-past-expiry',
      owner: { exists: true, phase: 'Pending', node: nodes.stalled, bindPhase: 'allocating', deleting: false },
    });
    expect(item(nodes.stalled)?.ageSeconds).to.be.within(359, 370);
    expect(item(nodes.orphaned)).to.deep.include({
      holder: { namespace: nodes.namespace, name: 'gone' },
      state: 'releasable',
      reason: 'owner-not-found',
      owner: { exists: false, phase: null, node: null, bindPhase: null, deleting: false },
    });
    expect(item(nodes.garbage)).to.deep.include({
      value: 'definitely,not a,lock',
      holder: null,
      kind: 'malformed',
      ageSeconds: null,
      state: 'releasable',
      reason: 'malformed',
      owner: null,
    });
    expect(item(nodes.garbage)?.problem).to.be.a('string');
    expect(item(nodes.free)).to.equal(undefined);
  });

  it('classifies with the configured expiry (--nodelock-expire), like the sweeper would', async () => {
    const nodes = await lockedNodes();

    const { code, out } = await locks(['-o', 'json', '--nodelock-expire', '10m']);

    expect(code).to.equal(EXIT_OK);
    const { items } = JSON.parse(out.join('\n')) as { items: LockRow[] };
    expect(items.find((candidate) => candidate.node === nodes.stalled)).to.deep.include({
      state: 'held',
      reason: 'awaiting-allocation',
    });
  });

  it('fails with exit 1 and one line naming the step when the cluster cannot be reached', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'locks-command-'));
    try {
      // A free port nobody listens on: the connection is refused at once.
      const port = await findFreePort('127.0.0.1');
      const kubeconfig = join(dir, 'kubeconfig');
      writeFileSync(
        kubeconfig,
        [
          'apiVersion: v1',
          'kind: Config',
          'current-context: dead',
          'clusters:',
          '- name: dead',
          '  cluster:',
          `    server: https://127.0.0.1:${port}`,
          '    insecure-skip-tls-verify: true',
          'users:',
          '- name: dead',
          '  user:',
          '    token: none',
          'contexts:',
          '- name: dead',
          '  context:',
          '    cluster: dead',
          '    user: dead',
        ].join('\n'),
      );
      const out: string[] = [];
      const err: string[] = [];
      const code = await runCli(['locks', '--kubeconfig', kubeconfig], [locksCommand()], {
        env: {},
        stdout: (line) => out.push(line),
        stderr: (line) => err.push(line),
      });
      expect(code).to.equal(1);
      expect(out).to.deep.equal([]);
      expect(err).to.have.length(1);
      expect(err[0]).to.match(/^vgpu-warden: could not list nodes: caused by: /);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
