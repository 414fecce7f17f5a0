import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect } from 'chai';
import { startupModules } from '../../support/startup-modules.js';

const SRC = resolve(import.meta.dirname, '..', '..', '..', 'src');

// Issue #44: `serve` loaded 23 modules (2,349 lines) of src/local at start, the control-plane runner
// and stand-ins for other products it never uses.
describe('what a production process loads at start (src/main.ts, before any dynamic import)', () => {
  it('no module of src/local: the local command loads its run lazily', () => {
    const loaded = startupModules(SRC, 'main.ts');
    expect(loaded).to.include('commands/serve-command.ts');
    expect(loaded.filter((module) => module.startsWith('local/'))).to.deep.equal([]);
  });

  it('nothing of the stand-ins package: src/ names it only in the lazily loaded local run', () => {
    const loaded = startupModules(SRC, 'main.ts');
    const naming = loaded.filter((module) =>
      readFileSync(resolve(SRC, module), 'utf8').includes('@vgpu-warden/stand-ins'),
    );
    expect(naming).to.deep.equal([]);
    expect(loaded).to.not.include('commands/local-run.ts');
  });

  it('the local command still reaches its run through a dynamic import', () => {
    expect(startupModules(SRC, 'commands/local-run.ts')).to.include('local/control-plane.ts');
  });
});
