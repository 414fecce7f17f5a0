import { expect } from 'chai';
import { DEFAULT_CHAOS_MINUTES, DEFAULT_CHAOS_SEED, parseSoakArgs } from '../../soak/soak-args.js';
import { SoakUsageError } from '../../soak/soak-errors.js';

describe('soak: parseSoakArgs', () => {
  it('reads every flag', () => {
    expect(
      parseSoakArgs([
        '--runs',
        '3',
        '--load',
        '--steps',
        'test:unit, test:integration',
        '--fail-fast',
        '--log-dir',
        '/tmp/x',
        '--chaos-seed',
        '7',
        '--chaos-minutes',
        '2.5',
      ]),
    ).to.deep.equal({
      runs: 3,
      load: true,
      steps: ['test:unit', 'test:integration'],
      failFast: true,
      logDir: '/tmp/x',
      chaosSeed: 7,
      chaosMinutes: 2.5,
      help: false,
    });
  });

  it('defaults to all steps, no load, every run even after a failure, and chaos seed 1 for 15 minutes', () => {
    expect(parseSoakArgs(['--runs=2'])).to.deep.equal({
      runs: 2,
      load: false,
      steps: undefined,
      failFast: false,
      logDir: undefined,
      chaosSeed: DEFAULT_CHAOS_SEED,
      chaosMinutes: DEFAULT_CHAOS_MINUTES,
      help: false,
    });
  });

  it('answers --help without --runs', () => {
    expect(parseSoakArgs(['--help']).help).to.equal(true);
  });

  it('refuses a missing or bad --runs, unknown flags, positionals, empty step names and chaos flags without --load', () => {
    const refused = (argv: string[]) => {
      try {
        parseSoakArgs(argv);
      } catch (error) {
        expect(error).to.be.instanceOf(SoakUsageError);
        return (error as Error).message;
      }
      throw new Error(`accepted ${argv.join(' ')}`);
    };
    expect(refused([])).to.match(/--runs N is required/);
    expect(refused(['--runs', '0'])).to.match(/positive integer/);
    expect(refused(['--runs', '2x'])).to.match(/positive integer/);
    expect(refused(['--runs', '2', '--bogus'])).to.match(/bogus/);
    expect(refused(['--runs', '2', 'lint'])).to.match(/lint/);
    expect(refused(['--runs', '2', '--steps', 'lint,,test:unit'])).to.match(/comma-separated/);
    expect(refused(['--runs', '2', '--chaos-seed', '3'])).to.match(/only apply with --load/);
    expect(refused(['--runs', '2', '--load', '--chaos-minutes', '0'])).to.match(/positive number/);
    expect(refused(['--runs', '2', '--load', '--chaos-seed', '1.5'])).to.match(/integer/);
  });

  it('keeps the parse error as the cause', () => {
    try {
      parseSoakArgs(['--runs']);
      expect.fail('accepted --runs without a value');
    } catch (error) {
      expect(error).to.be.instanceOf(SoakUsageError);
      expect((error as Error).cause).to.be.instanceOf(Error);
    }
  });
});
