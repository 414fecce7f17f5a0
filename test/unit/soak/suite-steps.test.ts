import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect } from 'chai';
import { SuiteShapeError, UnknownStepError } from '../../soak/soak-errors.js';
import { selectSteps, splitTestScript } from '../../soak/suite-steps.js';

const scripts = (test: string) => ({ test, lint: 'eslint .', 'test:unit': 'mocha', 'k8s:build': 'bash x.sh' });

function shapeError(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).to.be.instanceOf(SuiteShapeError);
    return (error as Error).message;
  }
  throw new Error('no error');
}

describe('soak: suite steps from the "test" script', () => {
  it('splits the real package.json "test" script into npm run steps', () => {
    const packageJson = JSON.parse(
      readFileSync(resolve(import.meta.dirname, '..', '..', '..', 'package.json'), 'utf8'),
    ) as { scripts: Record<string, string> };
    const steps = splitTestScript(packageJson.scripts);
    expect(steps).to.include.members(['lint', 'test:unit']);
    expect(steps.join(' && ')).to.equal(
      packageJson.scripts.test
        ?.replaceAll('npm run ', '')
        .split(/\s*&&\s*/)
        .join(' && '),
    );
  });

  it('splits on && with any spacing', () => {
    expect(splitTestScript(scripts('npm run lint&&npm run test:unit  &&   npm run k8s:build'))).to.deep.equal([
      'lint',
      'test:unit',
      'k8s:build',
    ]);
  });

  it('refuses any other shape, naming the part', () => {
    expect(shapeError(() => splitTestScript(scripts('npm run lint || npm run test:unit')))).to.match(
      /part 1 \("npm run lint \|\| npm run test:unit"\)/,
    );
    expect(shapeError(() => splitTestScript(scripts('npm run lint && mocha')))).to.match(
      /part 2 \("mocha"\).*npm run <name>/,
    );
    expect(shapeError(() => splitTestScript(scripts('npm run lint; npm run test:unit')))).to.match(/part 1/);
    expect(shapeError(() => splitTestScript(scripts('npm run lint -- --fix')))).to.match(/part 1/);
    expect(shapeError(() => splitTestScript(scripts('npm run lint && ')))).to.match(/part 2 \(""\)/);
    expect(shapeError(() => splitTestScript(scripts('npm run lint && npm run nope')))).to.match(/names no script/);
    expect(shapeError(() => splitTestScript(scripts('npm run lint && npm run lint')))).to.match(/repeats step "lint"/);
    expect(shapeError(() => splitTestScript(scripts('npm run test')))).to.match(/runs "test" itself/);
    expect(shapeError(() => splitTestScript({ lint: 'eslint' }))).to.match(/no "test" script/);
    expect(shapeError(() => splitTestScript(undefined))).to.match(/no "scripts"/);
  });

  it('selects a subset in the suite order, and names an unknown step', () => {
    const suite = ['lint', 'test:unit', 'k8s:build', 'test:integration'];
    expect(selectSteps(suite, undefined)).to.deep.equal(suite);
    expect(selectSteps(suite, ['test:integration', 'test:unit'])).to.deep.equal(['test:unit', 'test:integration']);
    expect(() => selectSteps(suite, ['test:unit', 'test:intgration'])).to.throw(
      UnknownStepError,
      /unknown step "test:intgration".*lint, test:unit/,
    );
  });
});
