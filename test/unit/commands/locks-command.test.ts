import { expect } from 'chai';
import { EXIT_OK, EXIT_USAGE, runCli } from '../../../src/commands/cli.js';
import { locksCommand } from '../../../src/commands/locks-command.js';
import { SETTINGS, settingsOf } from '../../../src/config/settings.js';

async function run(args: string[], extraEnv: Record<string, string> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  // A kubeconfig that does not exist: these cases must fail or finish before any API call.
  const env = { KUBECONFIG: '/nonexistent/kubeconfig', ...extraEnv };
  const code = await runCli(['locks', ...args], [locksCommand()], {
    env,
    stdout: (line) => out.push(line),
    stderr: (line) => err.push(line),
  });
  return { code, out, err };
}

describe('vgpu-warden locks (without a cluster)', () => {
  for (const args of [['-o', 'yaml'], ['--output', 'wide'], ['-oyaml']]) {
    it(`refuses ${args.join(' ')} with exit 2 before touching the cluster`, async () => {
      const { code, out, err } = await run(args);
      expect(code).to.equal(EXIT_USAGE);
      expect(out).to.deep.equal([]);
      expect(err).to.have.length(1);
      expect(err[0]).to.match(
        /^vgpu-warden: unknown output format "(yaml|wide)" for "locks"; expected one of table, json$/,
      );
    });
  }

  it('shows -o, --output in its help', async () => {
    const { code, out } = await run(['--help']);
    expect(code).to.equal(EXIT_OK);
    expect(out.join('\n')).to.match(/^ {2}-o, --output <value> +output format: table \(default\) or json$/m);
    expect(out.join('\n')).to.match(/^ {6}--kubeconfig <value>/m);
  });

  it('names KUBECONFIG and its source when the file is missing: exit 2, one line', async () => {
    const { code, out, err } = await run([]);
    expect(code).to.equal(EXIT_USAGE);
    expect(out).to.deep.equal([]);
    expect(err).to.deep.equal(['vgpu-warden: KUBECONFIG (env): /nonexistent/kubeconfig: no such file']);
  });

  it('names --kubeconfig when the flag named the file', async () => {
    const { err } = await run(['--kubeconfig', '/nonexistent/other']);
    expect(err).to.deep.equal(['vgpu-warden: KUBECONFIG (flag --kubeconfig): /nonexistent/other: no such file']);
  });

  it('is not stopped by settings it does not use: it gets as far as the kubeconfig', async () => {
    const { err } = await run([], { SWEEP_SCHEDULE: 'whenever', WEBHOOK_PORT: 'x', CERT_VALIDITY: '1h' });
    expect(err).to.deep.equal(['vgpu-warden: KUBECONFIG (env): /nonexistent/kubeconfig: no such file']);
  });

  it('is stopped by a lock rule, blaming the one the user set', async () => {
    const { code, err } = await run([], { HAMI_NODELOCK_EXPIRE: '30s' });
    expect(code).to.equal(EXIT_USAGE);
    expect(err).to.deep.equal([
      'vgpu-warden: NODELOCK_EXPIRE (env HAMI_NODELOCK_EXPIRE) = 30s must be longer than BIND_GRACE (default 60s), or a bind in progress would count as expired; raise it or set BIND_GRACE',
    ]);
  });

  it('declares every setting its flags set', () => {
    const command = locksCommand();
    const used = new Set<string>(settingsOf(command.settings ?? []));
    const flagged = SETTINGS.filter((spec) => spec.flag in command.flags).map((spec) => spec.key);
    expect(flagged).to.have.length(4);
    expect(flagged.filter((key) => !used.has(key))).to.deep.equal([]);
  });
});
