import { expect } from 'chai';
import type { BindingArgs, FilterArgs } from '../../../src/extender/protocol.js';
import { timedAdmissionHandler, timedExtenderHandlers } from '../../../src/server/timed-handlers.js';

/** Each call of the clock moves it 250 ms on: every timed call lasts exactly 0.25 s. */
function steppingClock(): () => number {
  let now = 0;
  return () => (now += 250) - 250;
}

const filterArgs: FilterArgs = { pod: {}, nodeNames: ['n1'] };
const bindArgs: BindingArgs = { podName: 'p', podNamespace: 'ns', podUid: 'u', node: 'n1' };
const signal = new AbortController().signal;

describe('timed handlers', () => {
  it('time filter, and bind by outcome: answered, answered with an Error, thrown', async () => {
    const seen: [string, number, string?][] = [];
    const metrics = {
      observeFilter: (seconds: number) => {
        seen.push(['filter', seconds]);
      },
      observeBind: (seconds: number, outcome: string) => {
        seen.push(['bind', seconds, outcome]);
      },
    };
    const answers = [{ Error: '' }, { Error: 'no fit' }];
    const handlers = timedExtenderHandlers(
      {
        filter: (args) =>
          Promise.resolve({
            Nodes: null,
            NodeNames: args.nodeNames,
            FailedNodes: null,
            FailedAndUnresolvableNodes: null,
            Error: '',
          }),
        prioritize: () => Promise.resolve([{ Host: 'n1', Score: 3 }]),
        bind: () => {
          const answer = answers.shift();
          return answer ? Promise.resolve(answer) : Promise.reject(new Error('boom'));
        },
      },
      metrics,
      steppingClock(),
    );

    expect((await handlers.filter(filterArgs, signal)).NodeNames).to.deep.equal(['n1']);
    expect(await handlers.prioritize(filterArgs, signal)).to.deep.equal([{ Host: 'n1', Score: 3 }]);
    expect(await handlers.bind(bindArgs, signal)).to.deep.equal({ Error: '' });
    expect(await handlers.bind(bindArgs, signal)).to.deep.equal({ Error: 'no fit' });
    const thrown = await handlers.bind(bindArgs, signal).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(thrown).to.be.instanceOf(Error);
    expect(seen).to.deep.equal([
      ['filter', 0.25],
      ['bind', 0.25, 'success'],
      ['bind', 0.25, 'error'],
      ['bind', 0.25, 'error'],
    ]);
  });

  it('time admission reviews by operation, folding unknown operations into "other"', async () => {
    const seen: [string, number][] = [];
    const handler = timedAdmissionHandler(
      { handle: (request) => Promise.resolve({ uid: request.uid, allowed: true }) },
      {
        observeAdmission: (operation, seconds) => {
          seen.push([operation, seconds]);
        },
      },
      steppingClock(),
    );
    expect(await handler.handle({ uid: '1', operation: 'DELETE' }, signal)).to.deep.equal({ uid: '1', allowed: true });
    await handler.handle({ uid: '2', operation: 'CREATE' }, signal);
    await handler.handle({ uid: '3', operation: 'FROBNICATE' }, signal);
    expect(seen).to.deep.equal([
      ['DELETE', 0.25],
      ['CREATE', 0.25],
      ['other', 0.25],
    ]);
  });
});
