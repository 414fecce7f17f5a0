import { readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadAllYaml, type V1Deployment } from '@kubernetes/client-node';
import { expect } from 'chai';

const ROOT = resolve(import.meta.dirname, '..', '..');

interface Instruction {
  keyword: string;
  args: string;
}

interface Stage {
  image: string;
  name: string | undefined;
  instructions: Instruction[];
}

/** Dockerfile instructions: comments and blank lines dropped, backslash continuations joined. */
function parseDockerfile(text: string): Instruction[] {
  const instructions: Instruction[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `;
      continue;
    }
    const full = pending + line;
    pending = '';
    const match = /^(\S+)\s*(.*)$/.exec(full);
    if (match) instructions.push({ keyword: match[1]!.toUpperCase(), args: match[2]!.trim() });
  }
  return instructions;
}

/** Global `ARG name=default` lines before the first FROM, which FROM lines may use as `${name}`. */
function globalArgs(instructions: Instruction[]): Map<string, string> {
  const args = new Map<string, string>();
  for (const instruction of instructions) {
    if (instruction.keyword === 'FROM') break;
    const match = /^(\w+)=(\S+)$/.exec(instruction.args);
    if (instruction.keyword === 'ARG' && match) args.set(match[1]!, match[2]!);
  }
  return args;
}

function stagesOf(instructions: Instruction[]): Stage[] {
  const stages: Stage[] = [];
  const args = globalArgs(instructions);
  for (const instruction of instructions) {
    if (instruction.keyword === 'FROM') {
      const [image, as, name] = instruction.args.split(/\s+/).filter((word) => !word.startsWith('--'));
      const resolved = (image ?? '').replace(/\$\{(\w+)\}/g, (whole, arg: string) => args.get(arg) ?? whole);
      stages.push({ image: resolved, name: as?.toUpperCase() === 'AS' ? name : undefined, instructions: [] });
    } else {
      const current = stages.at(-1);
      if (!current && instruction.keyword === 'ARG') continue;
      if (!current) throw new Error(`${instruction.keyword} before the first FROM`);
      current.instructions.push(instruction);
    }
  }
  return stages;
}

/** The exec (JSON array) form of ENTRYPOINT or CMD; the shell form would run under /bin/sh and swallow SIGTERM. */
function execForm(stage: Stage, keyword: string): unknown {
  const instruction = stage.instructions.filter((entry) => entry.keyword === keyword).at(-1);
  if (!instruction) throw new Error(`no ${keyword} in the final stage`);
  return JSON.parse(instruction.args);
}

const stages = stagesOf(parseDockerfile(readFileSync(resolve(ROOT, 'Dockerfile'), 'utf8')));
const build = stages[0]!;
const runtime = stages.at(-1)!;
const runs = (stage: Stage) =>
  stage.instructions
    .filter((entry) => entry.keyword === 'RUN')
    .map((entry) => entry.args)
    .join(' && ');

describe('Dockerfile', () => {
  it('builds in one node:24-slim stage and runs in another (the default of its NODE_IMAGE argument)', () => {
    expect(stages.length).to.be.at.least(2);
    for (const stage of stages) expect(stage.image).to.equal('node:24-slim');
    expect(build.name).to.be.a('string');
  });

  it('installs with npm ci, builds with npm run build and prunes the dev dependencies and the workspaces', () => {
    const commands = runs(build);
    expect(commands).to.match(/\bnpm ci\b/);
    expect(commands).to.match(/\bnpm run build\b/);
    expect(commands).to.match(/\bnpm prune\b[^&]*--omit=dev/);
    // The stand-ins workspace package (and its gRPC) is for tests and local mode: pruned with the workspaces.
    expect(commands).to.match(
      /\bnpm pkg delete workspaces\b.*\brm -rf packages node_modules\/@vgpu-warden\b.*\bnpm prune --omit=dev\b/s,
    );
    expect(commands.indexOf('npm ci')).to.be.below(commands.indexOf('npm run build'));
    expect(commands.indexOf('npm run build')).to.be.below(commands.indexOf('npm prune'));
  });

  it('copies only dist/, the pruned node_modules, package.json and the PATH wrapper from the build stage into the final one', () => {
    const copies = runtime.instructions.filter((entry) => entry.keyword === 'COPY' || entry.keyword === 'ADD');
    expect(
      copies.every((entry) => entry.args.startsWith(`--from=${build.name ?? ''} `)),
      'the runtime stage copies from the build stage only',
    ).to.equal(true);
    const sources = copies.map((entry) => entry.args.split(/\s+/)[1]);
    expect(sources).to.have.members([
      '/app/package.json',
      '/app/node_modules',
      '/app/dist',
      '/app/src/commands/vgpu-warden.sh',
    ]);
    expect(runs(runtime), 'the runtime stage installs nothing').to.equal('');
  });

  it('puts a vgpu-warden executable on the PATH that runs the same entry (kubectl exec deploy/vgpu-warden -- vgpu-warden locks)', () => {
    const copy = runtime.instructions.find(
      (entry) => entry.keyword === 'COPY' && entry.args.includes('vgpu-warden.sh'),
    );
    expect(copy?.args.split(/\s+/).at(-1)).to.equal('/usr/local/bin/vgpu-warden');
    const wrapper = resolve(ROOT, 'src', 'commands', 'vgpu-warden.sh');
    // COPY keeps the file's mode: it must be executable for everyone, as uid 10001 runs it.
    expect(statSync(wrapper).mode & 0o777).to.equal(0o755);
    const text = readFileSync(wrapper, 'utf8');
    expect(text.startsWith('#!/bin/sh\n')).to.equal(true);
    expect(text).to.match(/^exec node \/app\/dist\/bin\.js "\$@"$/m);
    // The wrapper names dist/bin.js under the runtime stage's WORKDIR.
    expect(runtime.instructions.filter((entry) => entry.keyword === 'WORKDIR').at(-1)?.args).to.equal('/app');
  });

  it('runs as a non-root numeric user in the final stage, the one the Deployment asks for', () => {
    const user = runtime.instructions.filter((entry) => entry.keyword === 'USER').at(-1)?.args ?? '';
    const uid = user.split(':')[0] ?? '';
    expect(uid).to.match(/^\d+$/, 'numeric, so that the kubelet can check runAsNonRoot');
    expect(Number(uid)).to.be.above(0);
    const [deployment] = loadAllYaml(
      readFileSync(resolve(ROOT, 'manifests', 'deployment.yaml'), 'utf8'),
    ) as V1Deployment[];
    const warden = deployment?.spec?.template.spec?.containers.find((container) => container.name === 'vgpu-warden');
    expect(warden?.securityContext?.runAsUser).to.equal(Number(uid));
  });

  it('starts the package bin (dist/bin.js, which checks the Node version first) with serve, in exec form', () => {
    expect(execForm(runtime, 'ENTRYPOINT')).to.deep.equal(['node', 'dist/bin.js']);
    expect(execForm(runtime, 'CMD')).to.deep.equal(['serve']);
  });

  it('sends the build only what it copies: .dockerignore allows those paths and nothing else', () => {
    const patterns = readFileSync(resolve(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'));
    expect(patterns[0]).to.equal('*');
    const allowed = patterns.slice(1).map((pattern) => {
      expect(pattern.startsWith('!'), `${pattern}: after *, only exceptions`).to.equal(true);
      return pattern.slice(1).replace(/\/$/, '');
    });
    const copied = build.instructions
      .filter((entry) => entry.keyword === 'COPY' && !entry.args.startsWith('--from='))
      .flatMap((entry) => entry.args.split(/\s+/).slice(0, -1));
    expect(allowed).to.have.members(copied);
  });
});
