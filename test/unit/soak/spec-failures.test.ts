import { expect } from 'chai';
import { parseSpecFailures } from '../../soak/spec-failures.js';

// Recorded from mocha 12's spec reporter (no colour) on a fixture suite, trimmed of stack frames.
const RECORDED = `
  outer suite
    ✔ passes
    inner
      1) fails deep
      2) has a: colon in the middle

  hooky
    3) "before all" hook for "x"


  1 passing (30ms)
  3 failing

  1) outer suite
       inner
         fails deep:

      AssertionError: expected { a: 1 } to deeply equal { a: 2 }
      + expected - actual

       {
      -  "a": 1
      +  "a": 2
       }
      
      at Context.<anonymous> (/tmp/fx.test.ts:4:55)

  2) outer suite
       inner
         has a: colon in the middle:
     Error: boom: bad thing
second line
      at Context.<anonymous> (/tmp/fx.test.ts:5:52)

  3) hooky
       "before all" hook for "x":
     Error: setup broke
      at Context.<anonymous> (/tmp/fx.test.ts:10:24)


`;

describe('soak: parseSpecFailures', () => {
  it('reads nested suites, a title with a colon in the middle, a hook failure, and a diff-style error', () => {
    expect(parseSpecFailures(RECORDED)).to.deep.equal({
      failing: 3,
      complete: true,
      failures: [
        {
          title: 'outer suite › inner › fails deep',
          error: 'AssertionError: expected { a: 1 } to deeply equal { a: 2 }',
        },
        { title: 'outer suite › inner › has a: colon in the middle', error: 'Error: boom: bad thing' },
        { title: 'hooky › "before all" hook for "x"', error: 'Error: setup broke' },
      ],
    });
  });

  it('reads the example from the soak brief, with the failure list after c8 and npm noise too', () => {
    const output = [
      '  12 passing (3s)',
      '  2 failing',
      '',
      '  1) device-plugin liveness through the real kube-scheduler',
      "       a dead plugin's node gets no pods:",
      '     Error: timed out after 60000 ms waiting for node gpu-1',
      '      at waitFor (test/support/pod-waits.ts:10:5)',
      '',
      '  2) suite',
      '       "before all" hook for "x":',
      '     Error: no cluster',
      '      at ...',
      '',
      '=============================== Coverage summary ===============================',
      'Statements   : 91.2% ( 4000/4385 )',
      'npm error Lifecycle script `test:unit` failed with error:',
    ].join('\n');
    const list = parseSpecFailures(output);
    expect(list?.failures).to.deep.equal([
      {
        title: "device-plugin liveness through the real kube-scheduler › a dead plugin's node gets no pods",
        error: 'Error: timed out after 60000 ms waiting for node gpu-1',
      },
      { title: 'suite › "before all" hook for "x"', error: 'Error: no cluster' },
    ]);
    expect(list?.complete).to.equal(true);
  });

  it('reads a root hook failure and a top-level test (a one-line title)', () => {
    const output =
      '  0 passing (1ms)\n  2 failing\n\n  1) "before all" hook in "{root}":\n     Error: root\n\n  2) lonely test:\n     TypeError: x is not a function\n';
    expect(parseSpecFailures(output)?.failures).to.deep.equal([
      { title: '"before all" hook in "{root}"', error: 'Error: root' },
      { title: 'lonely test', error: 'TypeError: x is not a function' },
    ]);
  });

  it('strips ANSI colour codes', () => {
    const coloured = [
      '\u001b[92m \u001b[0m\u001b[32m 1 passing\u001b[0m\u001b[90m (27ms)\u001b[0m',
      '\u001b[31m  1 failing\u001b[0m',
      '',
      '\u001b[0m  1) outer suite',
      '       inner: with colon',
      '         has a: colon in the middle:',
      '\u001b[0m\u001b[31m     Error: boom: bad thing\u001b[0m\u001b[90m',
      '      at Context.<anonymous> (/tmp/fx.test.ts:5:52)',
    ].join('\n');
    expect(parseSpecFailures(coloured)).to.deep.equal({
      failing: 1,
      complete: true,
      failures: [
        { title: 'outer suite › inner: with colon › has a: colon in the middle', error: 'Error: boom: bad thing' },
      ],
    });
  });

  it('reports no failures for a green run, and nothing at all for output that is not mocha', () => {
    expect(parseSpecFailures('  outer\n    ✔ works\n\n\n  12 passing (3s)\n  1 pending\n\n')).to.deep.equal({
      failing: 0,
      failures: [],
      complete: true,
    });
    expect(parseSpecFailures('src/a.ts:1:1 error Unexpected any\n✖ 1 problem\n')).to.equal(undefined);
    expect(parseSpecFailures('')).to.equal(undefined);
  });

  it('finds the failing count after a pending count, and ignores numbered lines inside errors', () => {
    const output =
      '  3 passing (2s)\n  1 pending\n  2 failing\n\n  1) a\n       b:\n     Error: steps were:\n        2) not an entry:\n      at x\n\n  2) c:\n     Error: two\n';
    expect(parseSpecFailures(output)).to.deep.equal({
      failing: 2,
      complete: true,
      failures: [
        { title: 'a › b', error: 'Error: steps were:' },
        { title: 'c', error: 'Error: two' },
      ],
    });
  });

  it('keeps what it could read of a list cut mid-way, and says it is incomplete', () => {
    const head =
      '  5 passing (9s)\n  3 failing\n\n  1) suite\n       first:\n     Error: one\n      at a\n\n  2) suite\n';
    expect(parseSpecFailures(`${head}       nested`)).to.deep.equal({
      failing: 3,
      complete: false,
      failures: [{ title: 'suite › first', error: 'Error: one' }],
    });
    // Cut after a title, before its error: the title is kept with an empty error.
    expect(parseSpecFailures(`${head}       second:\n`)).to.deep.equal({
      failing: 3,
      complete: false,
      failures: [
        { title: 'suite › first', error: 'Error: one' },
        { title: 'suite › second', error: '' },
      ],
    });
    // Cut right after the count.
    expect(parseSpecFailures('  0 passing (1s)\n  2 failing\n')).to.deep.equal({
      failing: 2,
      complete: false,
      failures: [],
    });
  });

  it('reads the last of several mocha summaries in one output', () => {
    const output =
      '  1 passing (1s)\n  1 failing\n\n  1) old:\n     Error: old\n\nlater run\n  2 passing (1s)\n  1 failing\n\n  1) new:\n     Error: new\n';
    expect(parseSpecFailures(output)?.failures).to.deep.equal([{ title: 'new', error: 'Error: new' }]);
  });

  it('reads entries numbered past 9 and titles split by \\r\\n line ends', () => {
    const entries = Array.from(
      { length: 10 },
      (_, i) => `  ${i + 1}) s\r\n       t${i + 1}:\r\n     Error: e${i + 1}\r\n`,
    ).join('\r\n');
    const list = parseSpecFailures(`  0 passing (1s)\r\n  10 failing\r\n\r\n${entries}`);
    expect(list?.complete).to.equal(true);
    expect(list?.failures.at(-1)).to.deep.equal({ title: 's › t10', error: 'Error: e10' });
  });
});
