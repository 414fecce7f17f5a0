import { expect } from 'chai';
import { EXIT_OK, EXIT_USAGE, runCli } from '../../../src/cli.js';
import { locksCommand } from '../../../src/commands/locks-command.js';

async function run(args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  // A kubeconfig that does not exist: these cases must fail or finish before any API call.
  const env = { KUBECONFIG: '/nonexistent/kubeconfig' };
  const code = await runCli(['locks', ...args], [locksCommand()], { env, stdout: (line) => out.push(line), stderr: (line) => err.push(line) });
  return { code, out, err };
}

describe('vgpu-warden locks (without a cluster)', () => {
  for (const args of [['-o', 'yaml'], ['--output', 'wide'], ['-oyaml']]) {
    it(`refuses ${args.join(' ')} with exit 2 before touching the cluster`, async () => {
      const { code, out, err } = await run(args);
      expect(code).to.equal(EXIT_USAGE);
      expect(out).to.deep.equal([]);
      expect(err).to.have.length(1);
      expect(err[0]).to.match(/^vgpu-warden: unknown output format "(yaml|wide)" for "locks"; expected one of table, json$/);
    });
  }

  it('shows -o, --output in its help', async () => {
    const { code, out } = await run(['--help']);
    expect(code).to.equal(EXIT_OK);
    expect(out.join('\n')).to.match(/^ {2}-o, --output <value> +output format: table \(default\) or json$/m);
    expect(out.join('\n')).to.match(/^ {6}--kubeconfig <value>/m);
  });
});
