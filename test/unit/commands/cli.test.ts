import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import {
  EXIT_FAILURE,
  EXIT_OK,
  EXIT_USAGE,
  runCli,
  type Command,
  type CommandContext,
} from '../../../src/commands/cli.js';
import { explainCommand } from '../../../src/commands/explain-command.js';
import { locksCommand } from '../../../src/commands/locks-command.js';
import { serveCommand } from '../../../src/commands/serve-command.js';
import { certsCommand } from '../../../src/commands/certs-command.js';
import { packageVersion } from '../../../src/telemetry/build-info.js';

function recorder(env: Record<string, string> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { env, stdout: (line: string) => out.push(line), stderr: (line: string) => err.push(line) }, out, err };
}

function echoCommand(seen: CommandContext[]): Command {
  return {
    name: 'echo',
    summary: 'records what it was given',
    usesConfig: true,
    flags: {
      count: { type: 'string', description: 'a number' },
      loud: { type: 'boolean', description: 'a switch' },
      'nodelock-expire': { type: 'string', description: 'expiry' },
    },
    run: (context) => {
      seen.push(context);
      return Promise.resolve(EXIT_OK);
    },
  };
}

// Not the real planned commands: those disappear as their issues land, the CLI's handling stays.
function plannedCommand(): Command {
  return {
    name: 'later',
    summary: 'arrives with a future issue',
    plannedIn: 99,
    usesConfig: true,
    flags: {},
    run: () => Promise.reject(new Error('unreachable')),
  };
}

describe('cli', () => {
  it('lists every subcommand in --help and exits 0', async () => {
    const { io, out } = recorder();
    const code = await runCli(['--help'], [plannedCommand(), echoCommand([])], io);
    expect(code).to.equal(EXIT_OK);
    const text = out.join('\n');
    expect(text).to.include('(not available yet: issue #99)');
    for (const name of ['later', 'echo']) expect(text).to.match(new RegExp(`^  ${name}\\b`, 'm'));
  });

  it('exits 2 with one clear line for an unknown subcommand', async () => {
    const { io, err } = recorder();
    const code = await runCli(['frobnicate'], [echoCommand([])], io);
    expect(code).to.equal(EXIT_USAGE);
    expect(err).to.deep.equal(['vgpu-warden: unknown command "frobnicate"; commands: echo (see "vgpu-warden --help")']);
  });

  it('exits 2 with one clear line for an unknown flag, before running anything', async () => {
    const seen: CommandContext[] = [];
    const { io, err } = recorder();
    const code = await runCli(['echo', '--colour', 'red'], [echoCommand(seen)], io);
    expect(code).to.equal(EXIT_USAGE);
    expect(err).to.have.length(1);
    expect(err[0]).to.equal('vgpu-warden: unknown flag --colour for "echo"; see "vgpu-warden echo --help"');
    expect(seen).to.have.length(0);
  });

  it('exits 2 for an unknown top-level flag and for a stray positional', async () => {
    const first = recorder();
    expect(await runCli(['--verbose'], [echoCommand([])], first.io)).to.equal(EXIT_USAGE);
    expect(first.err[0]).to.include('unknown flag --verbose');
    const second = recorder();
    expect(await runCli(['echo', 'stray'], [echoCommand([])], second.io)).to.equal(EXIT_USAGE);
    expect(second.err[0]).to.include('unexpected argument "stray"');
  });

  it('hands the positional arguments to a command that declares them, and shows them in its usage line', async () => {
    const seen: CommandContext[] = [];
    const command: Command = { ...echoCommand(seen), usesConfig: false, arguments: '<namespace>/<pod>' };
    const { io } = recorder();
    expect(await runCli(['echo', 'team-a/trainer', '--loud'], [command], io)).to.equal(EXIT_OK);
    expect(seen[0]?.positionals).to.deep.equal(['team-a/trainer']);
    expect(seen[0]?.flags.loud).to.equal(true);
    const help = recorder();
    await runCli(['echo', '--help'], [command], help.io);
    expect(help.out[0]).to.equal('Usage: vgpu-warden echo <namespace>/<pod> [flags]');
    // A command without `arguments` gets an empty list, never a stray word.
    const plain: CommandContext[] = [];
    expect(await runCli(['echo'], [{ ...echoCommand(plain), usesConfig: false }], recorder().io)).to.equal(EXIT_OK);
    expect(plain[0]?.positionals).to.deep.equal([]);
  });

  it('exits 2 naming the variable when the configuration is invalid, before running anything', async () => {
    const seen: CommandContext[] = [];
    const { io, err } = recorder({ NODELOCK_EXPIRE: 'forever' });
    const code = await runCli(['echo'], [echoCommand(seen)], io);
    expect(code).to.equal(EXIT_USAGE);
    expect(err).to.deep.equal([
      'vgpu-warden: invalid NODELOCK_EXPIRE (env) = "forever": expected a positive duration such as 5m',
    ]);
    expect(seen).to.have.length(0);
  });

  it('refuses an extender off loopback without client authentication with exit 2 and one line, running nothing', async () => {
    const seen: CommandContext[] = [];
    const { io, err, out } = recorder({ EXTENDER_HOST: '0.0.0.0' });
    expect(await runCli(['echo'], [echoCommand(seen)], io)).to.equal(EXIT_USAGE);
    expect(err).to.deep.equal([
      'vgpu-warden: EXTENDER_HOST (env) = 0.0.0.0 is not a loopback address, so EXTENDER_CLIENT_AUTH=true is required: without client certificates anyone who reaches the extender could bind pods',
    ]);
    expect(out).to.deep.equal([]);
    expect(seen).to.have.length(0);
  });

  it('passes parsed flags and the validated config (flag over env) to the command', async () => {
    const seen: CommandContext[] = [];
    const { io } = recorder({ NODELOCK_EXPIRE: '10m' });
    const code = await runCli(['echo', '--count', '3', '--loud', '--nodelock-expire', '20m'], [echoCommand(seen)], io);
    expect(code).to.equal(EXIT_OK);
    expect(seen[0]?.flags).to.deep.include({ count: '3', loud: true });
    expect(seen[0]?.config().nodeLockExpireMs).to.equal(1_200_000);
  });

  it('shows per-command help with its flags', async () => {
    const { io, out } = recorder();
    expect(await runCli(['echo', '--help'], [echoCommand([])], io)).to.equal(EXIT_OK);
    expect(out.join('\n')).to.include('--count <value>').and.include('--loud');
  });

  it('says which issue brings a planned command and exits 1', async () => {
    const { io, err } = recorder();
    const code = await runCli(['later'], [plannedCommand()], io);
    expect(code).to.equal(EXIT_FAILURE);
    expect(err).to.deep.equal(['vgpu-warden: "later" is not available yet (issue #99)']);
  });

  it('accepts a one-letter alias for a flag that declares one, and shows it in the help', async () => {
    const seen: CommandContext[] = [];
    const withShort: Command = {
      name: 'show',
      summary: 'has -o',
      usesConfig: false,
      flags: {
        output: { type: 'string', short: 'o', description: 'format' },
        verbose: { type: 'boolean', description: 'more' },
      },
      run: (context) => {
        seen.push(context);
        return Promise.resolve(EXIT_OK);
      },
    };
    for (const args of [['-o', 'json'], ['-ojson'], ['--output', 'json'], ['--output=json']]) {
      expect(await runCli(['show', ...args], [withShort], recorder().io)).to.equal(EXIT_OK);
    }
    expect(seen.map((context) => context.flags.output)).to.deep.equal(['json', 'json', 'json', 'json']);
    const help = recorder();
    await runCli(['show', '--help'], [withShort], help.io);
    expect(help.out).to.include.members(['  -o, --output <value>  format', '      --verbose         more']);
    const unknown = recorder();
    expect(await runCli(['show', '-x'], [withShort], unknown.io)).to.equal(EXIT_USAGE);
    expect(unknown.err[0]).to.include('unknown flag -x');
  });

  describe('flags that need another flag', () => {
    function demoCommand(seen: CommandContext[]): Command {
      return {
        name: 'local',
        summary: 'has a dependent flag',
        usesConfig: false,
        flags: {
          demo: { type: 'string', description: 'which demo' },
          'exit-after-demo': { type: 'boolean', description: 'stop after the demo', requires: 'demo' },
        },
        run: (context) => {
          seen.push(context);
          return Promise.resolve(EXIT_OK);
        },
      };
    }

    it('refuses the dependent flag alone with exit 2 and one line, running nothing', async () => {
      const seen: CommandContext[] = [];
      const { io, err, out } = recorder();
      expect(await runCli(['local', '--exit-after-demo'], [demoCommand(seen)], io)).to.equal(EXIT_USAGE);
      expect(err).to.deep.equal([
        'vgpu-warden: --exit-after-demo needs --demo for "local"; see "vgpu-warden local --help"',
      ]);
      expect(out).to.deep.equal([]);
      expect(seen).to.have.length(0);
    });

    it('accepts it with the flag it needs, and says so in the help', async () => {
      const seen: CommandContext[] = [];
      expect(
        await runCli(['local', '--demo', 'seed', '--exit-after-demo'], [demoCommand(seen)], recorder().io),
      ).to.equal(EXIT_OK);
      expect(seen[0]?.flags).to.deep.include({ demo: 'seed', 'exit-after-demo': true });
      const help = recorder();
      expect(await runCli(['local', '--exit-after-demo', '--help'], [demoCommand([])], help.io)).to.equal(EXIT_OK);
      expect(help.out.join('\n')).to.match(/--exit-after-demo +stop after the demo \(needs --demo\)$/m);
    });
  });

  describe('settings a command uses', () => {
    function lockReader(seen: CommandContext[]): Command {
      return {
        name: 'reader',
        summary: 'reads the lock rules only',
        usesConfig: true,
        settings: ['cluster', 'lockRules'],
        flags: { 'nodelock-expire': { type: 'string', description: 'expiry' } },
        run: (context) => {
          seen.push(context);
          return Promise.resolve(EXIT_OK);
        },
      };
    }

    it('is not stopped by a bad value of a setting it does not use', async () => {
      const seen: CommandContext[] = [];
      const { io, err } = recorder({
        SWEEP_SCHEDULE: 'whenever',
        WEBHOOK_PORT: 'x',
        EXTENDER_HOST: '0.0.0.0',
        NODELOCK_EXPIRE: '10m',
      });
      expect(await runCli(['reader'], [lockReader(seen)], io)).to.equal(EXIT_OK);
      expect(err).to.deep.equal([]);
      expect(seen[0]?.config().nodeLockExpireMs).to.equal(600_000);
    });

    it('is stopped by a bad value of a setting it uses, named with its source', async () => {
      const { io, err } = recorder();
      expect(await runCli(['reader', '--nodelock-expire', '30s'], [lockReader([])], io)).to.equal(EXIT_USAGE);
      expect(err).to.deep.equal([
        'vgpu-warden: NODELOCK_EXPIRE (flag --nodelock-expire) = 30s must be longer than BIND_GRACE (default 60s), or a bind in progress would count as expired; raise it or set BIND_GRACE',
      ]);
    });

    it('checks every setting for a command that names no groups', async () => {
      const { io, err } = recorder({ SWEEP_SCHEDULE: 'whenever' });
      expect(await runCli(['echo'], [echoCommand([])], io)).to.equal(EXIT_USAGE);
      expect(err[0]).to.equal(
        'vgpu-warden: invalid SWEEP_SCHEDULE (env) = "whenever": expected a cron expression with 5 or 6 fields such as "*/30 * * * * *"',
      );
    });
  });

  it('turns a failing command into exit 1 with the cause chain on one line', async () => {
    const failing: Command = {
      name: 'boom',
      summary: 'fails',
      usesConfig: false,
      flags: {},
      run: () => Promise.reject(new Error('outer', { cause: new Error('inner') })),
    };
    const { io, err } = recorder();
    expect(await runCli(['boom'], [failing], io)).to.equal(EXIT_FAILURE);
    expect(err).to.deep.equal(['vgpu-warden: outer: caused by: inner']);
  });

  describe('--version', () => {
    it("prints the version it is given (main: package.json's, read once) and exits 0", async () => {
      const { io, out, err } = recorder();
      expect(await runCli(['--version'], [echoCommand([])], io, { version: '1.2.3' })).to.equal(EXIT_OK);
      expect(out).to.deep.equal(['1.2.3']);
      expect(err).to.deep.equal([]);
    });

    it("is package.json's version, read from beside the build", () => {
      const pkg = JSON.parse(readFileSync(resolve(import.meta.dirname, '..', '..', '..', 'package.json'), 'utf8')) as {
        version: string;
      };
      expect(packageVersion())
        .to.equal(pkg.version)
        .and.match(/^\d+\.\d+\.\d+/);
      expect(packageVersion(new URL('file:///nonexistent/package.json'))).to.equal('unknown');
    });

    it('takes no arguments, and --help says it exists', async () => {
      const { io, out, err } = recorder();
      expect(await runCli(['--version', 'locks'], [echoCommand([])], io, { version: '1.2.3' })).to.equal(EXIT_USAGE);
      expect(out).to.deep.equal([]);
      expect(err).to.deep.equal(['vgpu-warden: --version takes no arguments (got "locks"); see "vgpu-warden --help"']);
      const help = recorder();
      await runCli(['--help'], [echoCommand([])], help.io);
      expect(help.out.join('\n')).to.include('"vgpu-warden --version" for the version');
    });
  });

  describe('--context', () => {
    const commands = [
      serveCommand({ waitForStopSignal: () => new Promise(() => undefined) }),
      certsCommand(),
      locksCommand(),
      explainCommand(),
    ];

    it('is a flag of every command that talks to a cluster, next to --kubeconfig, and not of certs (files only)', () => {
      for (const name of ['serve', 'locks', 'explain']) {
        const command = commands.find((candidate) => candidate.name === name);
        expect(command?.flags, name).to.include.keys('context', 'kubeconfig');
        expect(command?.flags.context?.type, name).to.equal('string');
      }
      expect(certsCommand().flags).not.to.have.property('context');
    });

    it('picks the named context of the kubeconfig, and names the flag when the context is not there: exit 2, one line', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'cli-context-'));
      try {
        const kubeconfig = join(dir, 'kubeconfig');
        // Both clusters refuse connections at once; which one was asked for shows in the error.
        writeFileSync(
          kubeconfig,
          [
            'apiVersion: v1',
            'kind: Config',
            'clusters:',
            '- name: one',
            '  cluster:',
            '    server: https://127.0.0.1:2',
            '- name: two',
            '  cluster:',
            '    server: https://127.0.0.2:2',
            'users:',
            '- name: u',
            '  user:',
            '    token: t',
            'contexts:',
            '- name: one',
            '  context:',
            '    cluster: one',
            '    user: u',
            '- name: two',
            '  context:',
            '    cluster: two',
            '    user: u',
            'current-context: one',
            '',
          ].join('\n'),
        );
        for (const args of [
          ['locks', '--context', 'prod'],
          ['explain', 'team-a/train-0', '--context=prod'],
          ['serve', '--context', 'prod'],
        ]) {
          const { io, out, err } = recorder({ KUBECONFIG: kubeconfig, CERT_DIR: join(dir, 'certs') });
          expect(await runCli(args, commands, io), args.join(' ')).to.equal(EXIT_USAGE);
          expect(out, args.join(' ')).to.deep.equal([]);
          expect(err, args.join(' ')).to.deep.equal([
            `vgpu-warden: KUBECONFIG (env): ${kubeconfig}: context (flag --context) "prod" is not among its contexts (one, two)`,
          ]);
        }
        const picked = recorder({ KUBECONFIG: kubeconfig });
        expect(await runCli(['locks', '--context', 'two'], commands, picked.io)).to.equal(EXIT_FAILURE);
        expect(picked.err.join('\n')).to.include('could not list nodes').and.include('127.0.0.2:2');
        const current = recorder({ KUBECONFIG: kubeconfig });
        expect(await runCli(['locks'], commands, current.io)).to.equal(EXIT_FAILURE);
        expect(current.err.join('\n')).to.include('127.0.0.1').and.not.include('127.0.0.2:2');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('needs a value', async () => {
      const { io, err } = recorder({ KUBECONFIG: '/nonexistent/kubeconfig' });
      expect(await runCli(['locks', '--context'], commands, io)).to.equal(EXIT_USAGE);
      expect(err).to.deep.equal([
        'vgpu-warden: --context needs a value (or takes none) for "locks"; see "vgpu-warden locks --help"',
      ]);
    });
  });
});
