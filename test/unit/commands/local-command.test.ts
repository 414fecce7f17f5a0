import { expect } from 'chai';
import { EXIT_USAGE, runCli } from '../../../src/commands/cli.js';
import { localCommand } from '../../../src/commands/local-command.js';
import type { ShutdownTarget } from '../../../src/local/shutdown-hooks.js';

/** A shutdown target that fails the test if anything registers on it (nothing may start). */
const untouchable: ShutdownTarget = {
  on: () => {
    throw new Error('something started');
  },
  off: () => undefined,
  exit: () => {
    throw new Error('exit called');
  },
};

describe('vgpu-warden local flags', () => {
  it('refuses --exit-after-demo without --demo with exit 2 and one line, before anything starts', async () => {
    const stdout: string[] = [];
    const stderr: string[] = [];
    const code = await runCli(
      ['local', '--exit-after-demo', '--no-view'],
      [localCommand({ repoRoot: '/nonexistent', shutdownTarget: untouchable })],
      {
        env: {},
        stdout: (line) => {
          stdout.push(line);
        },
        stderr: (line) => {
          stderr.push(line);
        },
      },
    );
    expect(code).to.equal(EXIT_USAGE);
    expect(stdout).to.deep.equal([]);
    expect(stderr).to.have.length(1);
    expect(stderr[0]).to.equal(
      'vgpu-warden: --exit-after-demo needs --demo for "local"; see "vgpu-warden local --help"',
    );
  });

  it('says in its help that --exit-after-demo needs --demo', async () => {
    const stdout: string[] = [];
    await runCli(['local', '--help'], [localCommand({ repoRoot: '/nonexistent', shutdownTarget: untouchable })], {
      env: {},
      stdout: (line) => {
        stdout.push(line);
      },
      stderr: () => undefined,
    });
    expect(stdout.find((line) => line.includes('--exit-after-demo'))).to.include('(needs --demo)');
  });

  it('refuses a --nodes value that names no mode with exit 2 and one clipped line, before anything starts', async () => {
    const stderr: string[] = [];
    const code = await runCli(
      ['local', `--nodes=${'x'.repeat(500)}`, '--no-view'],
      [localCommand({ repoRoot: '/nonexistent', shutdownTarget: untouchable })],
      {
        env: {},
        stdout: () => undefined,
        stderr: (line) => {
          stderr.push(line);
        },
      },
    );
    expect(code, stderr.join('\n')).to.equal(EXIT_USAGE);
    expect(stderr).to.have.length(1);
    expect(stderr[0]).to.match(/^vgpu-warden: invalid --nodes="x{40}": expected "real" or "simulated"/);
  });
});
