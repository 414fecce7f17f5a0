import { expect } from 'chai';
import { chaosFailed, classifyStep, type ChaosResult } from '../../soak/step-outcome.js';
import { clip, lastMeaningfulLines, stripAnsi } from '../../soak/step-output.js';

const NPM_FAILURE = [
  'npm error Lifecycle script `lint` failed with error:',
  'npm error code 2',
  'npm error path /work/main',
  'npm error command failed',
  'npm error command sh -c eslint . && tsc -p tsconfig.json',
].join('\n');

describe('soak: step output and outcome', () => {
  it('strips colour, cursor and title sequences', () => {
    expect(stripAnsi('\u001b[31mred\u001b[0m \u001b[2K\u001b[1Gline \u001b]0;title\u0007done')).to.equal(
      'red line done',
    );
  });

  it("keeps the last non-empty lines before npm's own failure report", () => {
    const output = `\n> vgpu-warden@0.1.0 lint\n> eslint .\n\n/work/main/src/a.ts\n  3:1  error  Unexpected any\n\n\n\u001b[31m✖ 1 problem\u001b[0m\n${NPM_FAILURE}\n`;
    expect(lastMeaningfulLines(output, 3)).to.deep.equal([
      '/work/main/src/a.ts',
      '  3:1  error  Unexpected any',
      '✖ 1 problem',
    ]);
    // When npm's report is all there is, it is better than nothing.
    expect(lastMeaningfulLines(NPM_FAILURE, 2)).to.deep.equal([
      'npm error command failed',
      'npm error command sh -c eslint . && tsc -p tsconfig.json',
    ]);
    expect(lastMeaningfulLines('', 5)).to.deep.equal([]);
  });

  it('clips a line to 160 characters and flattens whitespace', () => {
    expect(clip('a\tb   c\nd')).to.equal('a b c d');
    const long = clip('x'.repeat(1000));
    expect(long).to.have.length(160);
    expect(long.endsWith('…')).to.equal(true);
  });

  it('classifies a pass, mocha test failures, and a step that failed as a whole', () => {
    expect(classifyStep({ code: 0, signal: null }, 'anything')).to.deep.equal({ kind: 'passed' });
    const mocha = '  1 passing (1s)\n  1 failing\n\n  1) s\n       t:\n     Error: e\n' + NPM_FAILURE;
    expect(classifyStep({ code: 1, signal: null }, mocha)).to.deep.equal({
      kind: 'tests',
      failing: 1,
      failures: [{ title: 's › t', error: 'Error: e' }],
    });
    const lint = '/work/main/src/a.ts\n  3:1  error  Unexpected any\n✖ 1 problem\n' + NPM_FAILURE;
    expect(classifyStep({ code: 2, signal: null }, lint)).to.deep.equal({
      kind: 'step',
      exit: 'exit 2',
      lastLines: ['/work/main/src/a.ts', '  3:1  error  Unexpected any', '✖ 1 problem'],
    });
    // Mocha that crashed before its summary, or listed no entry, is the step's failure.
    expect(classifyStep({ code: null, signal: 'SIGKILL' }, '  1 passing (1s)\n  2 failing\n')).to.include({
      kind: 'step',
      exit: 'signal SIGKILL',
    });
    // A non-zero exit with a green mocha summary (a coverage threshold, say) is the step's too.
    expect(
      classifyStep({ code: 1, signal: null }, '  5 passing (1s)\nERROR: Coverage for lines (79%) does not meet 80%\n'),
    ).to.deep.equal({
      kind: 'step',
      exit: 'exit 1',
      lastLines: ['  5 passing (1s)', 'ERROR: Coverage for lines (79%) does not meet 80%'],
    });
  });

  it('counts a chaos run as failed only when it exited non-zero on its own', () => {
    const base: ChaosResult = {
      seed: 1,
      durationMs: 1,
      exit: { code: 0, signal: null },
      stoppedBySoak: false,
      lastLines: [],
      logPath: '/x',
    };
    expect(chaosFailed(base)).to.equal(false);
    expect(chaosFailed({ ...base, exit: { code: 1, signal: null } })).to.equal(true);
    expect(chaosFailed({ ...base, exit: { code: null, signal: 'SIGSEGV' } })).to.equal(true);
    expect(chaosFailed({ ...base, exit: { code: 143, signal: null }, stoppedBySoak: true })).to.equal(false);
  });
});
