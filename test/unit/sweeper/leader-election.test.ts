import { ApiException, type CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import { expect } from 'chai';
import { LeaderElector } from '../../../src/sweeper/leader-election.js';
import { ConditionLog } from '../../../src/telemetry/condition-log.js';
import { until } from '../../support/eventually.js';

function status(code: number, reason: string, message: string): ApiException<string> {
  const body = JSON.stringify({ kind: 'Status', code, reason, message });
  return new ApiException(
    code,
    `HTTP-Code: ${code}\nMessage: Unknown API Status Code!\nBody: ${body}\nHeaders: {"audit-id":"x"}`,
    body,
    {},
  );
}

/** The three Lease calls the elector makes, scripted per test: no server, the elector's own logic only. */
class ScriptedLeases {
  lease: V1Lease | undefined;
  namespaceExists = false;
  unreachable = false;
  /** Calls that never answer, as a half-open connection does; they ignore the abort signal too. */
  hangNext = 0;
  calls = 0;

  readonly api = {
    readNamespacedLease: () =>
      this.answer(() => {
        if (this.lease === undefined) throw status(404, 'NotFound', 'leases.coordination.k8s.io "warden" not found');
        return structuredClone(this.lease);
      }),
    createNamespacedLease: ({ body }: { body: V1Lease }) =>
      this.answer(() => {
        if (!this.namespaceExists) throw status(404, 'NotFound', 'namespaces "nope" not found');
        this.lease = structuredClone(body);
        return body;
      }),
    replaceNamespacedLease: ({ body }: { body: V1Lease }) =>
      this.answer(() => {
        this.lease = structuredClone(body);
        return body;
      }),
  } as unknown as CoordinationV1Api;

  private answer<T>(result: () => T): Promise<T> {
    this.calls++;
    if (this.hangNext > 0) {
      this.hangNext--;
      return new Promise<T>(() => undefined);
    }
    if (this.unreachable)
      return Promise.reject(
        new TypeError('fetch failed', {
          cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' }),
        }),
      );
    return new Promise<T>((resolve) => {
      resolve(result());
    });
  }
}

describe('LeaderElector: a Lease loop that cannot work says so once, and readiness says why', () => {
  let elector: LeaderElector | undefined;
  afterEach(async () => {
    await elector?.stop({ release: false });
    elector = undefined;
  });

  function build(leases: ScriptedLeases, clock: () => number = Date.now) {
    const lines: string[] = [];
    const conditions = new ConditionLog({
      clock,
      emit: (level, message) => {
        lines.push(`${level}: ${message}`);
      },
    });
    elector = new LeaderElector({
      api: leases.api,
      namespace: 'nope',
      name: 'warden',
      identity: 'replica-a',
      namespaceSetting: 'POD_NAMESPACE',
      retryPeriodMs: 5,
      leaseDurationMs: 60,
      renewDeadlineMs: 40,
      clock,
      conditions: conditions.reporter('leader election'),
    });
    return { elector, lines };
  }

  it('a missing namespace: one warning naming POD_NAMESPACE however often it retries, readiness at once, then leads once it exists', async () => {
    const leases = new ScriptedLeases();
    const { elector, lines } = build(leases);
    elector.start();
    await until('ten Lease calls', () => leases.calls >= 10);
    const expected =
      'namespace "nope" (POD_NAMESPACE) does not exist, so Lease warden cannot be created; the lock sweeper does not run until it does';
    expect(lines).to.deep.equal([`warn: leader election cannot work: ${expected}`]);
    expect(elector.problem()).to.equal(`leader election cannot work: ${expected}`);
    expect(elector.isLeader()).to.equal(false);

    leases.namespaceExists = true;
    await until('leadership', () => elector.isLeader());
    expect(elector.problem()).to.equal(undefined);
    expect(lines).to.have.length(2);
    expect(lines[1]).to.match(/^info: recovered after \d+s: lease namespace missing$/);
  });

  it('backs off while it keeps failing as a follower (no more than a lease duration apart)', async () => {
    const leases = new ScriptedLeases();
    build(leases).elector.start();
    await new Promise((resolve) => setTimeout(resolve, 300));
    // At a fixed 5 ms period it would have made ~120 calls (read + create each round) in 300 ms.
    expect(leases.calls).to.be.below(40);
  });

  it('an unreachable apiserver: one warning at once, but readiness only after a whole lease duration of failures', async () => {
    let now = 1_000_000;
    const leases = new ScriptedLeases();
    leases.unreachable = true;
    const { elector, lines } = build(leases, () => now);
    elector.start();
    await until('three attempts', () => leases.calls >= 3);
    expect(lines).to.have.length(1);
    expect(lines[0]).to.equal(
      'warn: apiserver unreachable (leader election (Lease nope/warden)): fetch failed: connect ECONNREFUSED 127.0.0.1:6443',
    );
    expect(elector.problem(), 'a blip is not a readiness problem').to.equal(undefined);
    now += 60;
    expect(elector.problem()).to.equal(lines[0]?.slice('warn: '.length));
  });

  it('a Lease call that never answers costs one round deadline, then the loop goes on and leads', async () => {
    const leases = new ScriptedLeases();
    leases.namespaceExists = true;
    leases.hangNext = 2;
    const lines: string[] = [];
    const conditions = new ConditionLog({
      emit: (level, message) => {
        lines.push(`${level}: ${message}`);
      },
    });
    elector = new LeaderElector({
      api: leases.api,
      namespace: 'ns',
      name: 'warden',
      identity: 'replica-a',
      retryPeriodMs: 5,
      leaseDurationMs: 60,
      renewDeadlineMs: 40,
      roundTimeoutMs: 30,
      conditions: conditions.reporter('leader election'),
    });
    const started = Date.now();
    elector.start();
    await until('leadership after two hung rounds', () => elector?.isLeader() === true);
    // Two rounds of 30 ms each (plus backoff) before the third answers; without the deadline, never.
    expect(Date.now() - started).to.be.at.least(55);
    expect(lines[0]).to.equal(
      'warn: leader election (Lease ns/warden) failing: acquiring or renewing Lease ns/warden got no answer within 30 ms',
    );
  });
});

describe('LeaderElector: leadership as terms, each a signal that aborts when it ends', () => {
  let elector: LeaderElector | undefined;
  afterEach(async () => {
    await elector?.stop({ release: false });
    elector = undefined;
  });

  function leading(leases: ScriptedLeases, timing: { renewDeadlineMs: number; roundTimeoutMs: number }) {
    leases.namespaceExists = true;
    elector = new LeaderElector({
      api: leases.api,
      namespace: 'ns',
      name: 'warden',
      identity: 'replica-a',
      retryPeriodMs: 5,
      leaseDurationMs: 1_000,
      ...timing,
    });
    return elector;
  }

  it('hands each term to the listeners, at once to one that comes late, and aborts it on stop', async () => {
    const leases = new ScriptedLeases();
    const elector = leading(leases, { renewDeadlineMs: 500, roundTimeoutMs: 200 });
    const terms: AbortSignal[] = [];
    elector.onElected((term) => terms.push(term));
    elector.start();
    await until('leadership', () => elector.isLeader());
    expect(terms).to.have.length(1);
    const late: AbortSignal[] = [];
    const unsubscribe = elector.onElected((term) => late.push(term));
    expect(late).to.deep.equal(terms);
    unsubscribe();
    expect(terms[0]?.aborted).to.equal(false);
    await elector.stop({ release: false });
    expect(terms[0]?.aborted).to.equal(true);
    expect((terms[0]?.reason as Error).message).to.equal('replica-a is no longer the leader of lease ns/warden');
  });

  it('ends the term when the renew deadline passes, before the hung round gives up', async () => {
    const leases = new ScriptedLeases();
    const elector = leading(leases, { renewDeadlineMs: 80, roundTimeoutMs: 2_000 });
    let term: AbortSignal | undefined;
    elector.onElected((signal) => {
      term = signal;
    });
    elector.start();
    await until('leadership', () => elector.isLeader());
    leases.hangNext = 1_000;
    const hungAt = Date.now();
    await until('the term to end', () => term?.aborted === true);
    expect(Date.now() - hungAt).to.be.below(1_000);
    expect(elector.isLeader()).to.equal(false);
  });
});
