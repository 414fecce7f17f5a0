// tools/setup/setup.sh decides which Debian packages a machine lacks and installs them (root) or
// names them (anyone else). Run here on a fake machine: a PATH of stubs only (id, ldd, apt-get and
// the packages' commands) and a fake root for the file checks; apt-get is a stub that records its
// arguments and "installs" by creating the stubs, so nothing is installed for real.
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { expect } from 'chai';

const REPO = resolve(import.meta.dirname, '..', '..', '..');
const SCRIPT = join(REPO, 'tools', 'setup', 'setup.sh');
const ALL = ['tmux', 'buildah', 'debootstrap', 'containerd', 'runc', 'containernetworking-plugins', 'busybox-static'];
const COMMANDS = ['tmux', 'buildah', 'debootstrap', 'containerd', 'runc'];

interface FakeMachine {
  bin: string;
  root: string;
  calls: string;
  /** Makes a package present the way setup.sh looks for it. */
  install(pkg: string): void;
  run(
    args: string[],
    options: { uid: number; aptGet?: boolean },
  ): { code: number | null; stdout: string; stderr: string; aptCalls: string[] };
}

function executable(path: string, body: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `#!/bin/bash\n${body}\n`);
  chmodSync(path, 0o755);
}

function fakeMachine(dir: string): FakeMachine {
  const bin = join(dir, 'bin');
  const root = join(dir, 'root');
  const calls = join(dir, 'apt-calls');
  mkdirSync(bin, { recursive: true });
  mkdirSync(root, { recursive: true });
  // The few external commands setup.sh and tools/lib/steps.sh use besides the stubs.
  for (const tool of ['dirname', 'mkdir', 'env', 'tail', 'cat'])
    symlinkSync(
      spawnSync('/bin/bash', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim(),
      join(bin, tool),
    );
  // ldd answers (exit 0) only for a binary marked dynamic, as the real one does for a dynamic ELF.
  executable(join(bin, 'ldd'), '[[ -e "$1.dynamic" ]]');
  const install = (pkg: string): void => {
    if (pkg === 'containernetworking-plugins') executable(join(root, 'usr', 'lib', 'cni', 'loopback'), 'exit 0');
    else if (pkg === 'busybox-static') executable(join(root, 'bin', 'busybox'), '[[ "$1" == --list ]] && echo sh');
    else executable(join(bin, pkg), 'exit 0');
  };
  const aptGet = [
    // The stub's own tools come from the real system; setup.sh only sees the fake PATH.
    'PATH=/usr/bin:/bin',
    `echo "$*" >> ${JSON.stringify(calls)}`,
    '[[ "$1" == install ]] || exit 0',
    'for arg in "$@"; do',
    '  case "$arg" in',
    '    -*|install|FAILS) ;;',
    `    containernetworking-plugins) mkdir -p ${JSON.stringify(join(root, 'usr', 'lib', 'cni'))}; printf '#!/bin/bash\\n' > ${JSON.stringify(join(root, 'usr', 'lib', 'cni', 'loopback'))}; chmod +x ${JSON.stringify(join(root, 'usr', 'lib', 'cni', 'loopback'))} ;;`,
    `    busybox-static) mkdir -p ${JSON.stringify(join(root, 'bin'))}; printf '#!/bin/bash\\n[[ "$1" == --list ]] && echo sh\\n' > ${JSON.stringify(join(root, 'bin', 'busybox'))}; chmod +x ${JSON.stringify(join(root, 'bin', 'busybox'))}; rm -f ${JSON.stringify(join(root, 'bin', 'busybox.dynamic'))} ;;`,
    `    runc) [[ -e ${JSON.stringify(join(dir, 'runc-never-appears'))} ]] || { printf '#!/bin/bash\\n' > ${JSON.stringify(join(bin, 'runc'))}; chmod +x ${JSON.stringify(join(bin, 'runc'))}; } ;;`,
    `    *) printf '#!/bin/bash\\n' > ${JSON.stringify(bin)}/"$arg"; chmod +x ${JSON.stringify(bin)}/"$arg" ;;`,
    '  esac',
    'done',
  ].join('\n');
  return {
    bin,
    root,
    calls,
    install,
    run(args, { uid, aptGet: withAptGet = true }) {
      executable(join(bin, 'id'), `[[ "$1" == -u ]] && echo ${uid}`);
      if (withAptGet) executable(join(bin, 'apt-get'), aptGet);
      else rmSync(join(bin, 'apt-get'), { force: true });
      const result = spawnSync('/bin/bash', [SCRIPT, ...args], {
        encoding: 'utf8',
        env: { PATH: bin, HOME: dir, VGPU_WARDEN_SETUP_ROOT: root, VGPU_WARDEN_SETUP_LOG: join(dir, 'setup.log') },
      });
      const aptCalls = existsSync(calls) ? readFileSync(calls, 'utf8').trim().split('\n') : [];
      return { code: result.status, stdout: result.stdout, stderr: result.stderr, aptCalls };
    },
  };
}

describe('tools/setup/setup.sh: which Debian packages a machine lacks', () => {
  let dir: string;
  let machine: FakeMachine;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'setup-script-'));
    machine = fakeMachine(dir);
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('does nothing and says nothing on a machine that has every package', () => {
    for (const pkg of ALL) machine.install(pkg);
    const result = machine.run([], { uid: 0 });
    expect(result).to.deep.include({ code: 0, stdout: '', stderr: '' });
    expect(result.aptCalls).to.deep.equal([]);
  });

  it('as root on a bare machine, installs all seven with apt-get (update first) and says so', () => {
    const result = machine.run([], { uid: 0 });
    expect(result.code, result.stderr).to.equal(0);
    expect(result.aptCalls).to.deep.equal(['update -qq', `install -y -qq ${ALL.join(' ')}`]);
    expect(result.stdout).to.include(`[setup] installing with apt-get: ${ALL.join(' ')}`);
    expect(result.stdout).to.include(`[setup] installed: ${ALL.join(' ')}`);
    // A second run finds them all.
    expect(machine.run([], { uid: 0 })).to.deep.include({ code: 0, stdout: '', stderr: '' });
  });

  it('installs only what is missing, and takes a dynamic busybox for a missing busybox-static', () => {
    for (const pkg of ['tmux', 'buildah', 'debootstrap', 'runc', 'containernetworking-plugins', 'busybox-static'])
      machine.install(pkg);
    writeFileSync(join(machine.root, 'bin', 'busybox.dynamic'), '');
    const result = machine.run([], { uid: 0 });
    expect(result.code, result.stderr).to.equal(0);
    expect(result.aptCalls).to.deep.equal(['update -qq', 'install -y -qq containerd busybox-static']);
  });

  it('without root, stops in one line naming exactly the missing packages and the apt-get command, installing nothing', () => {
    for (const pkg of COMMANDS) machine.install(pkg);
    machine.install('busybox-static');
    writeFileSync(join(machine.root, 'bin', 'busybox.dynamic'), '');
    const result = machine.run([], { uid: 1000 });
    expect(result.code).to.equal(1);
    expect(result.stdout).to.equal('');
    expect(result.stderr).to.equal(
      '[setup] missing Debian packages for npm test: containernetworking-plugins busybox-static (not root); ' +
        'as root run: apt-get update && apt-get install -y containernetworking-plugins busybox-static\n',
    );
    expect(result.aptCalls).to.deep.equal([]);
  });

  it('as root without apt-get, stops in one line too', () => {
    const result = machine.run([], { uid: 0, aptGet: false });
    expect(result.code).to.equal(1);
    expect(result.stderr.trim().split('\n')).to.deep.equal([
      `[setup] missing Debian packages for npm test: ${ALL.join(' ')} (no apt-get on this machine); as root run: apt-get update && apt-get install -y ${ALL.join(' ')}`,
    ]);
  });

  it('fails naming the package when apt-get ran but its command is still not there', () => {
    writeFileSync(join(dir, 'runc-never-appears'), '');
    for (const pkg of ALL.filter((pkg) => pkg !== 'runc')) machine.install(pkg);
    const result = machine.run([], { uid: 0 });
    expect(result.code).to.equal(1);
    expect(result.stderr).to.include('apt-get installed runc but runc still not found');
  });

  it('for npm start wants only the real-node packages, and without root says simulated nodes will run, exiting 0', () => {
    const asUser = machine.run(['--for', 'start'], { uid: 1000 });
    expect(asUser.code).to.equal(0);
    expect(asUser.stderr).to.equal(
      '[setup] real nodes need root and containerd runc containernetworking-plugins busybox-static (not root): ' +
        'local mode runs simulated nodes; for real ones, as root: apt-get update && apt-get install -y containerd runc containernetworking-plugins busybox-static\n',
    );
    expect(asUser.aptCalls).to.deep.equal([]);
    const asRoot = machine.run(['--for', 'start'], { uid: 0 });
    expect(asRoot.code).to.equal(0);
    expect(asRoot.aptCalls).to.deep.equal([
      'update -qq',
      'install -y -qq containerd runc containernetworking-plugins busybox-static',
    ]);
  });

  it('for npm run release wants buildah and debootstrap only', () => {
    const result = machine.run(['--for=release', '--check'], { uid: 1000 });
    expect(result.code).to.equal(1);
    expect(result.stdout).to.equal(
      '[setup] missing Debian packages for release: buildah debootstrap (install: apt-get update && apt-get install -y buildah debootstrap)\n',
    );
  });

  it('--check installs nothing, even as root', () => {
    const result = machine.run(['--check'], { uid: 0 });
    expect(result.code).to.equal(1);
    expect(result.stdout).to.include(`missing Debian packages for test: ${ALL.join(' ')}`);
    expect(result.aptCalls).to.deep.equal([]);
  });

  it('refuses unknown arguments and purposes with exit code 2', () => {
    expect(machine.run(['--fast'], { uid: 0 }).code).to.equal(2);
    const bad = machine.run(['--for', 'deploy'], { uid: 0 });
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.include('--for must be test, start or release');
  });
});

describe('the set-up runs first: npm test, npm start, npm run release and CI', () => {
  const scripts = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> })
    .scripts;

  it('npm test starts with npm run setup, which runs setup.sh for the tests', () => {
    expect(scripts.test).to.match(/^npm run setup && /);
    expect(scripts.setup).to.equal('bash tools/setup/setup.sh --for test');
  });

  it('npm start and npm run release run it for their own needs first', () => {
    expect(scripts.start).to.match(/^bash tools\/setup\/setup\.sh --for start && /);
    expect(scripts.release).to.match(/^bash tools\/setup\/setup\.sh --for release && /);
  });

  it(".ci/run is the README's test command and nothing else", () => {
    const lines = readFileSync(join(REPO, '.ci', 'run'), 'utf8')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'));
    expect(lines).to.deep.equal(['set -euo pipefail', 'cd "$(dirname "$0")/.."', 'npm ci && npm test']);
    expect(readFileSync(join(REPO, 'README.md'), 'utf8')).to.include('```sh\nnpm ci && npm test\n```');
  });
});
