import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { EXIT_FAILURE, EXIT_OK, runCli } from '../../src/commands/cli.js';
import { explainCommand } from '../../src/commands/explain-command.js';
import { locksCommand } from '../../src/commands/locks-command.js';
import { formatLockValue } from '../../src/lock/lock-value.js';
import { createGpuNode, setLock } from '../support/lock-helpers.js';
import { testCluster } from '../support/test-cluster.js';

/**
 * A kubeconfig with two contexts as an operator's often has: `broken` (the current-context, an
 * apiserver that refuses connections) and `test` (the test control plane).
 */
function twoContexts(server: string, caPem: string, token: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: broken',
    '  cluster:',
    '    server: https://127.0.0.1:2',
    '- name: test',
    '  cluster:',
    `    server: ${server}`,
    `    certificate-authority-data: ${Buffer.from(caPem).toString('base64')}`,
    'users:',
    '- name: admin',
    '  user:',
    `    token: ${token}`,
    'contexts:',
    '- name: broken',
    '  context:',
    '    cluster: broken',
    '    user: admin',
    '- name: test',
    '  context:',
    '    cluster: test',
    '    user: admin',
    'current-context: broken',
    '',
  ].join('\n');
}

async function cli(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, [locksCommand(), explainCommand()], {
    env,
    stdout: (line) => out.push(line),
    stderr: (line) => err.push(line),
  });
  return { code, out, err };
}

describe('--context on a real apiserver', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'cli-context-'));
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('locks --context <name> reads the cluster of that context, not the broken current-context, from --kubeconfig or KUBECONFIG', async () => {
    const { core, namespace, controlPlane } = testCluster();
    const node = await createGpuNode(core);
    await setLock(core, node, formatLockValue(new Date(), { namespace, name: 'gone' }));
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, twoContexts(controlPlane.server, controlPlane.caPem, controlPlane.token), {
      mode: 0o600,
    });

    // The current-context is the broken one: without --context, locks fails naming the cause.
    const current = await cli(['locks', '--kubeconfig', kubeconfig], {});
    expect(current.code).to.equal(EXIT_FAILURE);
    expect(current.err.join('\n')).to.include('could not list nodes').and.include('127.0.0.1:2');

    for (const [args, env] of [
      [['locks', '--kubeconfig', kubeconfig, '--context', 'test', '-o', 'json'], {}],
      [['locks', '--context=test', '-o', 'json'], { KUBECONFIG: kubeconfig }],
    ] as const) {
      const { code, out, err } = await cli([...args], { ...env });
      expect(err, args.join(' ')).to.deep.equal([]);
      expect(code, args.join(' ')).to.equal(EXIT_OK);
      const { items } = JSON.parse(out.join('\n')) as {
        items: { node: string; holder?: unknown; state: string; reason: string }[];
      };
      expect(
        items.find((row) => row.node === node),
        args.join(' '),
      ).to.deep.include({ holder: { namespace, name: 'gone' }, state: 'releasable', reason: 'owner-not-found' });
    }
  });

  it("explain --context <name> reads the pod from that context's cluster", async () => {
    const { core, namespace, controlPlane } = testCluster();
    await core.createNamespacedPod({
      namespace,
      body: { metadata: { name: 'plain' }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
    });
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, twoContexts(controlPlane.server, controlPlane.caPem, controlPlane.token), {
      mode: 0o600,
    });
    const { code, out, err } = await cli(
      ['explain', `${namespace}/plain`, '--kubeconfig', kubeconfig, '--context', 'test', '-o', 'json'],
      {},
    );
    expect(err).to.deep.equal([]);
    expect(code).to.equal(EXIT_OK);
    expect(out.join('\n')).to.include('"plain"');
  });
});
