import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect } from 'chai';
import { parseSoakArgs } from '../../soak/soak-args.js';

// docs/testing.md shows these commands; every command a doc shows is run by a test.
const root = resolve(import.meta.dirname, '..', '..', '..');
const doc = readFileSync(resolve(root, 'docs', 'testing.md'), 'utf8');
const shown = [...doc.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((block) =>
  (block[1] ?? '').split('\n').filter((line) => line.trim() !== ''),
);

describe('docs/testing.md commands', () => {
  it('shows the soak commands, and the soak takes their arguments', () => {
    const soaks = shown.filter((line) => line.startsWith('npm run test:soak -- '));
    expect(soaks).to.deep.equal(['npm run test:soak -- --runs 3', 'npm run test:soak -- --runs 3 --load']);
    for (const line of soaks) {
      const options = parseSoakArgs(line.slice('npm run test:soak -- '.length).split(' '));
      expect(options.runs).to.equal(3);
    }
  });

  it('runs one test file the way it shows', function () {
    this.timeout(60_000);
    const [command] = shown.filter((line) => line.startsWith('npx mocha '));
    expect(command, 'the one-file command').to.be.a('string');
    // `npx mocha <args>`: the project's own mocha, as npx would find it.
    const args = (command ?? '').split(' ').slice(2);
    const run = spawnSync(resolve(root, 'node_modules', '.bin', 'mocha'), args, { cwd: root, encoding: 'utf8' });
    expect(run.status, run.stderr).to.equal(0);
    expect(run.stdout)
      .to.match(/\d+ passing/)
      .and.not.match(/failing/);
    // Only that file ran, not the whole unit suite.
    expect(run.stdout).to.include('eventually (test support)').and.not.include('ExtenderService');
  });
});
