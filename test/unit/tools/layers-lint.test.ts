import { readdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { expect } from 'chai';
import { cycles, folderEdges, importGraph } from '../../support/import-graph.js';
import { plantedProblems, REPO_ROOT as root } from '../../support/planted-lint.js';

const RULE = 'layers/imports-follow-layers';
// The table itself, from eslint.config.js (plain JS, so read by URL and typed here).
const { LAYERS } = (await import(pathToFileURL(resolve(root, 'eslint.config.js')).href)) as { LAYERS: string[][] };

const layerProblems = (filePath: string, code: string): Promise<string[]> => plantedProblems(RULE, filePath, code);

describe('eslint: imports in src/ follow the layer table', function () {
  this.timeout(30_000);

  it('reports a planted upward import, in every form an import can take', async () => {
    const code = [
      "import { NodeLocks } from '../lock/node-locks.js';",
      "import type { Config } from '../config/setting-spec.js';",
      "export { SETTINGS } from '../config/settings.js';",
      "const lazy = await import('../serve/start-server.js');",
      "type Main = typeof import('../main.js');",
      'export const used: unknown[] = [NodeLocks, lazy];',
      'export type Used = [Config, Main];',
    ].join('\n');
    const problems = await layerProblems('src/base/probe.ts', code);
    expect(problems).to.have.length(5);
    expect(problems[0]).to.include('"../lock/node-locks.js" reaches lock/, a layer above base/');
  });

  it('reports one feature importing another', async () => {
    const problems = await layerProblems(
      'src/sweeper/probe.ts',
      "import { nodeOfRelease } from '../admission/delete-release.js';\nexport const used = nodeOfRelease;",
    );
    expect(problems).to.have.length(1);
    expect(problems[0]).to.include('features never import each other');
  });

  it('reports a folder the table does not list', async () => {
    const problems = await layerProblems(
      'src/newroom/probe.ts',
      "import { isRecord } from '../base/json.js';\nexport const used = isRecord;",
    );
    expect(problems).to.deep.equal([
      'newroom/ is not in the layer table (LAYERS in eslint.config.js): give it its place.',
    ]);
  });

  it('allows its own folder, earlier layers, packages and the entry importing anything', async () => {
    const code = [
      "import { isRecord } from '../base/json.js';",
      "import { NODE_LOCK_ANNOTATION } from '../hami/wire.js';",
      "import { classifyLock } from './lock-rules.js';",
      "import { KubeConfig } from '@kubernetes/client-node';",
      'export const used: unknown[] = [isRecord, NODE_LOCK_ANNOTATION, classifyLock, KubeConfig];',
    ].join('\n');
    expect(await layerProblems('src/lock/probe.ts', code)).to.deep.equal([]);
    expect(
      await layerProblems('src/probe.ts', "import { run } from './commands/cli.js';\nexport const used = run;"),
    ).to.deep.equal([]);
  });

  it('lists every folder of src/ once', () => {
    const listed = LAYERS.flat();
    expect(new Set(listed).size).to.equal(listed.length);
    const folders = readdirSync(resolve(root, 'src'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name);
    expect(folders).to.have.length(listed.length);
    for (const folder of folders) expect(listed, folder).to.include(folder);
  });
});

describe('the import graph of src/', () => {
  const graph = importGraph(resolve(root, 'src'));

  it('has no cycle between modules', () => {
    expect(cycles(graph.edges)).to.deep.equal([]);
  });

  it('has no cycle between folders', () => {
    expect(cycles(folderEdges(graph))).to.deep.equal([]);
  });

  it('finds a planted cycle (the check can fail)', () => {
    const planted = new Map([...graph.edges, ['base/a.ts', ['base/b.ts']], ['base/b.ts', ['base/a.ts']]]);
    expect(cycles(planted)).to.deep.equal([['base/a.ts', 'base/b.ts']]);
  });
});
