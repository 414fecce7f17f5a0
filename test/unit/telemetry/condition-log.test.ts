import { expect } from 'chai';
import { ConditionLog } from '../../../src/telemetry/condition-log.js';

const MIN = 60_000;

function setup(context?: (condition: string) => string | undefined) {
  let now = 0;
  const lines: string[] = [];
  const conditions = new ConditionLog({
    clock: () => now,
    emit: (level, message, condition) => {
      lines.push(`${level} [${condition}] ${message}`);
    },
    ...(context ? { context } : {}),
  });
  return {
    conditions,
    lines,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe('ConditionLog (one warning per persistent condition)', () => {
  it('warns once, then only after 1, 2, 4, 8 and at most every 10 minutes, counting what it left out', () => {
    const { conditions, lines, advance } = setup();
    const lease = conditions.reporter('leader election');
    // A retry every 2 s for 40 minutes.
    for (let elapsed = 0; elapsed <= 40 * MIN; elapsed += 2_000) {
      lease.fail('lease namespace missing', 'namespace "nope" does not exist');
      advance(2_000);
    }
    expect(lines).to.have.length(7);
    expect(lines[0]).to.equal('warn [lease namespace missing] namespace "nope" does not exist');
    expect(lines[1]).to.equal(
      'warn [lease namespace missing] namespace "nope" does not exist (still, for 60s; 29 more not logged)',
    );
    expect(lines[2]).to.match(/\(still, for 3m; 59 more not logged\)$/);
    expect(lines[3]).to.match(/\(still, for 7m; 119 more not logged\)$/);
    expect(lines[4]).to.match(/\(still, for 15m; 239 more not logged\)$/);
    // Capped: 10 minutes after the 8-minute step, not 16.
    expect(lines[5]).to.match(/\(still, for 25m; 299 more not logged\)$/);
    expect(lines[6]).to.match(/\(still, for 35m; 299 more not logged\)$/);
  });

  it('is one condition for every component that hits it, and recovers (one info line) only when all of them succeed', () => {
    const { conditions, lines, advance } = setup((condition) =>
      condition === 'apiserver unreachable' ? '(apiserver https://10.0.0.1:6443)' : undefined,
    );
    const nodes = conditions.reporter('nodes');
    const pods = conditions.reporter('pods');
    const lease = conditions.reporter('lease');
    nodes.fail('apiserver unreachable', 'apiserver unreachable (nodes list): connect ECONNREFUSED');
    pods.fail('apiserver unreachable', 'apiserver unreachable (pods list): connect ECONNREFUSED');
    lease.fail('apiserver unreachable', 'apiserver unreachable (lease): connect ECONNREFUSED');
    advance(5_000);
    nodes.ok();
    pods.ok();
    expect(conditions.active().map((active) => active.condition)).to.deep.equal(['apiserver unreachable']);
    advance(70_000);
    lease.ok();
    expect(lines).to.deep.equal([
      'warn [apiserver unreachable] apiserver unreachable (nodes list): connect ECONNREFUSED (apiserver https://10.0.0.1:6443)',
      'info [apiserver unreachable] recovered after 75s: apiserver unreachable',
    ]);
    expect(conditions.active()).to.deep.equal([]);
  });

  it('a component moving to another condition releases the first (which recovers) and warns about the second', () => {
    const { conditions, lines } = setup();
    const lease = conditions.reporter('lease');
    lease.fail('apiserver unreachable', 'cannot reach it');
    lease.fail('lease namespace missing', 'namespace "x" does not exist');
    lease.fail('lease namespace missing', 'namespace "x" does not exist');
    expect(lines).to.deep.equal([
      'warn [apiserver unreachable] cannot reach it',
      'info [apiserver unreachable] recovered after 0s: apiserver unreachable',
      'warn [lease namespace missing] namespace "x" does not exist',
    ]);
  });

  it('a flapping condition stays inside its backoff: no warn/info pair per flap', () => {
    const { conditions, lines, advance } = setup();
    const pods = conditions.reporter('pods');
    for (let flap = 0; flap < 30; flap++) {
      pods.fail('pods watch failing', 'pods watch failing: reset');
      advance(1_000);
      pods.ok();
      advance(3_000);
    }
    // 120 s of flapping: the first occurrence and the one after the first minute, each with its recovery.
    expect(lines.filter((line) => line.startsWith('warn'))).to.have.length(2);
    expect(lines.filter((line) => line.startsWith('info'))).to.have.length(2);
    expect(lines[2]).to.match(/\(again; 14 more not logged since the last line\)$/);
  });

  it('forgets the backoff after a quiet period as long as the longest repeat', () => {
    const { conditions, lines, advance } = setup();
    const lease = conditions.reporter('lease');
    lease.fail('c', 'm');
    advance(MIN);
    lease.fail('c', 'm');
    lease.ok();
    advance(10 * MIN);
    lease.fail('c', 'm');
    expect(lines.filter((line) => line.startsWith('warn'))).to.deep.equal([
      'warn [c] m',
      'warn [c] m (still, for 60s)',
      'warn [c] m',
    ]);
  });

  it('says nothing on recovery from a condition it never announced, and nothing on ok() without a failure', () => {
    const { conditions, lines } = setup();
    const pods = conditions.reporter('pods');
    pods.ok();
    expect(lines).to.deep.equal([]);
  });
});
