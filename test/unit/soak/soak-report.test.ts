import { expect } from 'chai';
import { chaosLine, formatSeconds, formatWallTime, progressLine, renderSummary } from '../../soak/soak-report.js';
import { median, SoakTally } from '../../soak/soak-tally.js';
import type { ChaosResult, StepResult } from '../../soak/step-outcome.js';

const passed = (run: number, step: string, seconds: number): StepResult => ({
  run,
  step,
  durationMs: seconds * 1000,
  outcome: { kind: 'passed' },
});
const testsFailed = (
  run: number,
  step: string,
  seconds: number,
  failures: { title: string; error: string }[],
  failing = failures.length,
): StepResult => ({ run, step, durationMs: seconds * 1000, outcome: { kind: 'tests', failing, failures } });
const chaos = (seed: number, code: number | null, stoppedBySoak = false): ChaosResult => ({
  seed,
  durationMs: 900_000,
  exit: { code, signal: null },
  stoppedBySoak,
  lastLines: ['[chaos] 2 violation(s); replay with: npm run chaos -- --seed 1 --minutes 15'],
  logPath: '/x',
});

describe('soak: tally and report', () => {
  it('formats progress lines', () => {
    expect(progressLine(passed(2, 'test:e2e', 312), 3)).to.equal('run 2/3 test:e2e: passed in 312 s');
    expect(progressLine(testsFailed(2, 'test:e2e', 330.4, [{ title: 'a', error: 'e' }], 2), 3)).to.equal(
      'run 2/3 test:e2e: failed (2 tests) in 330 s',
    );
    expect(progressLine(testsFailed(1, 'test:unit', 4.24, [{ title: 'a', error: 'e' }]), 3)).to.equal(
      'run 1/3 test:unit: failed (1 test) in 4.2 s',
    );
    expect(
      progressLine(
        { run: 1, step: 'lint', durationMs: 61_000, outcome: { kind: 'step', exit: 'exit 2', lastLines: [] } },
        1,
      ),
    ).to.equal('run 1/1 lint: failed (exit 2) in 61 s');
    expect(chaosLine(chaos(4, 1))).to.match(
      /^chaos beside \(seed 4\): failed \(exit 1\) after 900 s: \[chaos\] 2 violation/,
    );
    expect(chaosLine(chaos(4, 143, true))).to.equal(
      'chaos beside (seed 4): stopped by the soak after 900 s (exit 143)',
    );
    expect(formatSeconds(999)).to.equal('1.0 s');
    expect(formatWallTime(3_725_000)).to.equal('1 h 2 min 5 s');
    expect(formatWallTime(59_400)).to.equal('59 s');
  });

  it('counts failures per test over the runs of its step, latest error first-line, most failures first', () => {
    const tally = new SoakTally();
    tally.recordStep(passed(1, 'lint', 60));
    tally.recordStep(
      testsFailed(1, 'test:e2e', 300, [{ title: 'liveness › dead node', error: 'Error: timed out (run 1)' }]),
    );
    tally.recordStep(passed(2, 'lint', 70));
    tally.recordStep(
      testsFailed(2, 'test:e2e', 330, [
        { title: 'quota › denies', error: 'AssertionError: once' },
        { title: 'liveness › dead node', error: 'Error: timed out (run 2)' },
        // The same title twice in one run is one failing run.
        { title: 'liveness › dead node', error: 'Error: second error of the same test' },
      ]),
    );
    tally.recordStep({
      run: 3,
      step: 'lint',
      durationMs: 65_000,
      outcome: { kind: 'step', exit: 'exit 2', lastLines: ['src/a.ts', '  1:1 error x'] },
    });
    tally.recordStep(
      testsFailed(3, 'test:e2e', 320, [{ title: 'liveness › dead node', error: 'Error: timed out (run 3)' }], 3),
    );
    tally.recordChaos(chaos(1, 0));
    tally.recordChaos(chaos(2, 1));
    tally.recordChaos(chaos(3, 143, true));

    const rows = tally.failureRows();
    expect(rows.map((row) => [row.step, row.test, `${row.failures}/${row.runs}`, row.latest[0]])).to.deep.equal([
      ['test:e2e', 'liveness › dead node', '3/3', 'Error: timed out (run 3)'],
      ['test:e2e', 'quota › denies', '1/3', 'AssertionError: once'],
      ['lint', undefined, '1/3', 'exit 2'],
      ['test:e2e', undefined, '1/3', 'mocha reported 3 failing but its list ended after 1'],
      ['chaos', 'chaos beside (seed 2)', '1/1', 'exit 1'],
    ]);
    expect(tally.failureCount()).to.equal(7);
    expect(tally.durations(['lint', 'test:unit', 'test:e2e'])).to.deep.equal([
      { step: 'lint', runs: 3, minMs: 60_000, medianMs: 65_000, maxMs: 70_000 },
      { step: 'test:e2e', runs: 3, minMs: 300_000, medianMs: 320_000, maxMs: 330_000 },
    ]);

    const summary = renderSummary({
      rows,
      durations: tally.durations(['lint', 'test:e2e']),
      chaos: tally.chaosResults(),
      failureCount: tally.failureCount(),
      runsDone: 3,
      runsPlanned: 3,
      wallMs: 1_300_000,
      logDir: '/tmp/soak',
      endedEarly: undefined,
    });
    expect(summary).to.include(
      '  failed  step      test\n  3/3     test:e2e  liveness › dead node\n                      Error: timed out (run 3)\n',
    );
    expect(summary).to.include(
      '  1/3     lint      (the step itself)\n                      exit 2\n                      src/a.ts\n                      1:1 error x\n',
    );
    expect(summary).to.include('  1/1     chaos     chaos beside (seed 2)\n');
    expect(summary).to.include(
      'step durations (min / median / max over 3 runs):\n  lint          60 s      65 s      70 s\n  test:e2e     300 s     320 s     330 s',
    );
    expect(summary).to.include('chaos beside: 3 run(s) (seeds 1..3): 1 passed, 1 failed, 1 stopped by the soak');
    expect(summary).to.include('total wall time: 21 min 40 s; logs in /tmp/soak');
    expect(summary.endsWith('7 failures in 3 runs')).to.equal(true);
  });

  it("clips long titles and errors, and bounds a row's lines", () => {
    const tally = new SoakTally();
    tally.recordStep(testsFailed(1, 'test:unit', 5, [{ title: 't'.repeat(500), error: `Error: ${'e'.repeat(5000)}` }]));
    const summary = renderSummary({
      rows: tally.failureRows(),
      durations: tally.durations(['test:unit']),
      chaos: undefined,
      failureCount: 1,
      runsDone: 1,
      runsPlanned: 1,
      wallMs: 5000,
      logDir: '/tmp/soak',
      endedEarly: undefined,
    });
    expect(Math.max(...summary.split('\n').map((line) => line.length))).to.be.below(200);
    expect(summary.endsWith('1 failure in 1 run')).to.equal(true);
  });

  it('says all green, or why the soak ended early', () => {
    const tally = new SoakTally();
    tally.recordStep(passed(1, 'lint', 60));
    const input = {
      rows: tally.failureRows(),
      durations: tally.durations(['lint']),
      chaos: undefined,
      failureCount: 0,
      runsDone: 1,
      runsPlanned: 2,
      wallMs: 60_000,
      logDir: '/l',
    };
    const green = renderSummary({ ...input, runsPlanned: 1, endedEarly: undefined });
    expect(green).to.not.include('failures (');
    expect(green.endsWith('all green: 1 run')).to.equal(true);
    const stopped = renderSummary({ ...input, endedEarly: 'interrupted by SIGINT' });
    expect(stopped).to.include('ended early after run 1 of 2: interrupted by SIGINT');
    expect(stopped.endsWith('0 failures in 1 run')).to.equal(true);
  });

  it('takes the median of an even count as the mean of the middle two', () => {
    expect(median([1, 2, 3, 10])).to.equal(2.5);
    expect(median([4])).to.equal(4);
    expect(median([])).to.equal(0);
  });
});
