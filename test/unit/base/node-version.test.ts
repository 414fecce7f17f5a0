import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { expect } from 'chai';
import {
  isAtLeast,
  MINIMUM_NODE_VERSION,
  nodeVersionProblem,
  TESTED_NODE_MAJOR,
} from '../../../src/base/node-version.js';

const root = resolve(import.meta.dirname, '..', '..', '..');

describe('Node.js version check', () => {
  it('compares major, minor and patch numerically', () => {
    expect(isAtLeast('24.21.0', '22.19.0')).to.equal(true);
    expect(isAtLeast('22.19.0', '22.19.0')).to.equal(true);
    expect(isAtLeast('v22.20.1', '22.19.0')).to.equal(true);
    expect(isAtLeast('22.18.9', '22.19.0')).to.equal(false);
    expect(isAtLeast('22.9.0', '22.19.0')).to.equal(false);
    expect(isAtLeast('20.11.1', '22.19.0')).to.equal(false);
    expect(isAtLeast('100.0.0', '22.19.0')).to.equal(true);
    expect(isAtLeast('not a version', '22.19.0')).to.equal(false);
  });

  it('says nothing for a Node it runs on', () => {
    expect(nodeVersionProblem('24.21.0')).to.equal(undefined);
    expect(nodeVersionProblem(MINIMUM_NODE_VERSION)).to.equal(undefined);
  });

  it('refuses an older Node with one line naming the version it needs and how to get it', () => {
    expect(nodeVersionProblem('20.11.1')).to.equal(
      `vgpu-warden needs Node.js >= ${MINIMUM_NODE_VERSION} (found 20.11.1): install Node.js 24, or run it from the repository with npx vgpu-warden, which uses the pinned node@24`,
    );
    expect(nodeVersionProblem('x'.repeat(10_000))?.length).to.be.below(300);
  });

  it('keeps its minimum at or above what the HTTP stack declares (undici, which crashes at import below it)', () => {
    const require = createRequire(resolve(root, 'node_modules', '@kubernetes', 'client-node', 'package.json'));
    const undici = JSON.parse(readFileSync(require.resolve('undici/package.json'), 'utf8')) as {
      engines?: { node?: string };
    };
    const floor = /^>=\s*(\d+\.\d+\.\d+)$/.exec(undici.engines?.node ?? '')?.[1];
    expect(floor, `undici engines: ${undici.engines?.node}`).to.be.a('string');
    expect(isAtLeast(MINIMUM_NODE_VERSION, floor ?? '')).to.equal(true);
  });

  it('names the Node major the repository pins (the node devDependency)', () => {
    const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as {
      devDependencies: Record<string, string>;
    };
    expect(pkg.devDependencies.node).to.match(new RegExp(`^\\^?${TESTED_NODE_MAJOR}\\.`));
  });
});
