import { expect } from 'chai';
import { EXIT_OK, EXIT_USAGE, runCli, UsageError, type CommandContext } from '../../../src/commands/cli.js';
import { explainCommand, parsePodArgument } from '../../../src/commands/explain-command.js';
import { loadConfig } from '../../../src/config/load.js';

async function run(args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  // A kubeconfig that does not exist: these cases must fail or finish before any API call.
  const env = { KUBECONFIG: '/nonexistent/kubeconfig' };
  const code = await runCli(['explain', ...args], [explainCommand()], {
    env,
    stdout: (line) => out.push(line),
    stderr: (line) => err.push(line),
  });
  return { code, out, err };
}

/** Runs the command with positionals, as the CLI hands them over. */
async function runWith(positionals: string[], flags: CommandContext['flags'] = {}) {
  const err: string[] = [];
  const context = {
    io: { env: {}, stdout: () => undefined, stderr: (line: string) => err.push(line) },
    flags,
    config: () => loadConfig({ KUBECONFIG: '/nonexistent/kubeconfig' }),
    positionals,
  };
  try {
    return await explainCommand().run(context);
  } catch (error) {
    return error;
  }
}

describe('vgpu-warden explain (without a cluster)', () => {
  it('reads <namespace>/<pod>', () => {
    expect(parsePodArgument(['team-a/train-0'])).to.deep.equal({ namespace: 'team-a', name: 'train-0' });
    expect(parsePodArgument(['kube-system/a.b-c'])).to.deep.equal({ namespace: 'kube-system', name: 'a.b-c' });
  });

  for (const [args, message] of [
    [[], /^"explain" needs one argument <namespace>\/<pod>, e\.g\. explain team-a\/train-0$/],
    [['a/b', 'c/d'], /^"explain" takes one argument <namespace>\/<pod>, got 2$/],
    [['train-0'], /^"train-0" is not <namespace>\/<pod>/],
    [['a/b/c'], /^"a\/b\/c" is not <namespace>\/<pod>/],
    [['Team/x'], /is not <namespace>\/<pod>/],
    [['/x'], /is not <namespace>\/<pod>/],
    [[`ns/${'x'.repeat(100_000)}`], /^"ns\/x{60}…" is not <namespace>\/<pod>/],
  ] as const) {
    it(`refuses ${JSON.stringify(args).slice(0, 40)} with a one-line usage error`, () => {
      expect(() => parsePodArgument(args)).to.throw(UsageError, message);
    });
  }

  it('a bad argument is a usage error before any API call', async () => {
    const outcome = await runWith(['nope']);
    expect(outcome).to.be.instanceOf(UsageError);
  });

  for (const args of [['-o', 'yaml'], ['--output', 'wide'], ['-otable']]) {
    it(`refuses ${args.join(' ')} with exit 2 before touching the cluster`, async () => {
      const { code, out, err } = await run(args);
      expect(code).to.equal(EXIT_USAGE);
      expect(out).to.deep.equal([]);
      expect(err).to.have.length(1);
      expect(err[0]).to.match(
        /^vgpu-warden: unknown output format "(yaml|wide|table)" for "explain"; expected one of text, json$/,
      );
    });
  }

  it('without an argument: exit 2 and one line saying what it needs', async () => {
    const { code, err } = await run([]);
    expect(code).to.equal(EXIT_USAGE);
    expect(err).to.deep.equal([
      'vgpu-warden: "explain" needs one argument <namespace>/<pod>, e.g. explain team-a/train-0',
    ]);
  });

  it('its help names the argument and -o, and reads the same as a kubectl plugin', async () => {
    const { code, out } = await run(['--help']);
    expect(code).to.equal(EXIT_OK);
    const help = out.join('\n');
    expect(help).to.match(/why a GPU pod is Pending or where it went: explain <namespace>\/<pod>/);
    expect(help).to.match(/^ {2}-o, --output <value> +output format: text \(default\) or json$/m);
    expect(help).to.match(/^ {6}--scheduler-name <value>/m);
  });
});
