import { resolve } from 'node:path';
import { expect } from 'chai';
import { plantedProblems, REPO_ROOT as root } from '../../support/planted-lint.js';

const RULE = 'boundary/no-src-imports';

const boundaryProblems = (filePath: string, code: string): Promise<string[]> => plantedProblems(RULE, filePath, code);

describe('eslint: the stand-ins package and the kubelet simulator import nothing from src/', function () {
  this.timeout(30_000);

  for (const file of ['packages/stand-ins/src/hami-plugin/probe.ts', 'test/support/kubelet-sim/nested/probe.ts']) {
    const up = file.split('/').length - 1;
    const src = `${'../'.repeat(up)}src`;
    it(`reports every way of reaching src/ from ${file}`, async () => {
      const code = [
        `import { NODE_LOCK_ANNOTATION } from '${src}/lock/lock-value.js';`,
        `import type { PodRef } from '${src}/lock/lock-value.js';`,
        `export { decodeAllocation } from '${src}/devices/allocation-codec.js';`,
        `export * from '${src}/devices/index.js';`,
        `const lazy = await import('${src}/config.js');`,
        `type Codec = typeof import('${src}/devices/allocation-codec.js');`,
        `import { x } from '${resolve(root, 'src', 'errors.js')}';`,
        `import dir from '${src}';`,
        'export const used: unknown[] = [NODE_LOCK_ANNOTATION, lazy, x, dir];',
        'export type Used = [PodRef, Codec];',
      ].join('\n');
      const problems = await boundaryProblems(file, code);
      expect(problems).to.have.length(8);
      expect(problems[0]).to.include(`"${src}/lock/lock-value.js" resolves into src/`);
    });
  }

  it('allows packages, node built-ins, the stand-in itself and (for the simulator) the rest of test/', async () => {
    const standIn = [
      "import { CoreV1Api } from '@kubernetes/client-node';",
      "import { setTimeout } from 'node:timers/promises';",
      "import { parseNodeLock } from './node-lock.js';",
      // A folder merely named like src/ elsewhere is not src/.
      "import { y } from './src/y.js';",
      'export const used: unknown[] = [CoreV1Api, setTimeout, parseNodeLock, y];',
    ].join('\n');
    expect(await boundaryProblems('packages/stand-ins/src/hami-plugin/probe.ts', standIn)).to.deep.equal([]);
    const simulator = [
      "import { HamiDevicePlugin } from '@vgpu-warden/stand-ins/hami-plugin';",
      "import { eventually } from '../test-cluster.js';",
      'export const used: unknown[] = [HamiDevicePlugin, eventually];',
    ].join('\n');
    expect(await boundaryProblems('test/support/kubelet-sim/probe.ts', simulator)).to.deep.equal([]);
  });

  it('the stand-ins may not reach src/ by a detour out of the package', async () => {
    const code = "import { x } from '../../../../packages/../src/local/node-mode.js';\nexport const used = x;";
    expect(await boundaryProblems('packages/stand-ins/src/hami-plugin/probe.ts', code)).to.have.length(1);
  });

  it('applies only to those two folders: the fixture wiring both sides may import src/', async () => {
    const code =
      "import { NODE_LOCK_ANNOTATION } from '../../src/lock/lock-value.js';\nexport const used = NODE_LOCK_ANNOTATION;";
    expect(await boundaryProblems('test/support/extender-fixture-probe.ts', code)).to.deep.equal([]);
  });
});

describe('eslint: src/ reaches the stand-ins package only lazily, from the local command', function () {
  this.timeout(30_000);
  const RULE_LAZY = 'boundary/stand-ins-only-lazily';
  const lazyProblems = (filePath: string, code: string): Promise<string[]> =>
    plantedProblems(RULE_LAZY, filePath, code);

  it('local-run may import() it and name its types', async () => {
    const code = [
      "import type { RealGpuFleet } from '@vgpu-warden/stand-ins/real-gpu-fleet';",
      "const real = await import('@vgpu-warden/stand-ins/real-gpu-fleet');",
      "type Node = typeof import('@vgpu-warden/stand-ins/real-node');",
      'export const used: unknown[] = [real];',
      'export type Used = [RealGpuFleet, Node];',
    ].join('\n');
    expect(await lazyProblems('src/commands/local-run.ts', code)).to.deep.equal([]);
  });

  it('local-run may not import it statically, nor re-export it', async () => {
    const code = [
      "import { RealGpuFleet } from '@vgpu-warden/stand-ins/real-gpu-fleet';",
      "export { TEST_IMAGE } from '@vgpu-warden/stand-ins/real-node';",
      'export const used: unknown[] = [RealGpuFleet];',
    ].join('\n');
    const problems = await lazyProblems('src/commands/local-run.ts', code);
    expect(problems).to.have.length(2);
    expect(problems[0]).to.include('load it with import()');
  });

  it('no other module of src/ may reach it, not even lazily', async () => {
    const code = [
      "import type { RealNode } from '@vgpu-warden/stand-ins/real-node';",
      "const real = await import('@vgpu-warden/stand-ins');",
      'export const used: unknown[] = [real];',
      'export type Used = RealNode;',
    ].join('\n');
    for (const file of ['src/local/probe.ts', 'src/commands/serve-run.ts']) {
      const problems = await lazyProblems(file, code);
      expect(problems, file).to.have.length(2);
      expect(problems[0]).to.include('only src/commands/local-run.ts may reach it');
    }
  });
});
