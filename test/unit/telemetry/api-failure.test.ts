import { ApiException } from '@kubernetes/client-node';
import { expect } from 'chai';
import { WatchFailedError } from '../../../src/cluster/kube-list-watch.js';
import { apiCondition, failureText, isUnreachable } from '../../../src/telemetry/api-failure.js';

/** What client-node 1.x/2.x throws for a 404: its message is a multi-line dump with every header. */
function notFound(): ApiException<string> {
  const body = JSON.stringify({
    kind: 'Status',
    status: 'Failure',
    reason: 'NotFound',
    code: 404,
    message: 'namespaces "nope" not found',
  });
  return new ApiException(
    404,
    `HTTP-Code: 404\nMessage: Unknown API Status Code!\nBody: ${body}\nHeaders: {"audit-id":"1f2e","cache-control":"no-cache, private"}`,
    body,
    { 'audit-id': '1f2e' },
  );
}

function refused(): Error {
  const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' });
  return new TypeError('fetch failed', { cause });
}

describe('API failure text and conditions', () => {
  it('renders an ApiException as status, reason and the Status message on one line: never the HTTP-Code/Headers dump', () => {
    const text = failureText(new Error('cannot create lease', { cause: notFound() }));
    expect(text).to.equal('cannot create lease: HTTP 404 NotFound: namespaces "nope" not found');
    expect(text).not.to.match(/\n|Headers|audit-id/);
  });

  it('follows a network failure to its cause, and clips a huge message', () => {
    expect(failureText(refused())).to.equal('fetch failed: connect ECONNREFUSED 127.0.0.1:6443');
    const huge = failureText(new Error(`proxy said ${'x'.repeat(100_000)}`));
    expect(huge.length).to.be.at.most(301);
    expect(huge.endsWith('…')).to.equal(true);
  });

  it('tells "no answer at all" from an answer that is an error', () => {
    expect(isUnreachable(refused())).to.equal(true);
    expect(
      isUnreachable(Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError' })),
    ).to.equal(true);
    expect(isUnreachable(notFound())).to.equal(false);
    expect(isUnreachable(new ApiException(503, 'HTTP-Code: 503', '', {}))).to.equal(false);
    // A watch refused with an HTTP status (client-node puts it in statusCode) got an answer.
    expect(
      isUnreachable(
        new WatchFailedError('watch /api/v1/pods failed: HTTP 403', {
          cause: Object.assign(new Error('Forbidden'), { statusCode: 403 }),
        }),
      ),
    ).to.equal(false);
    // A bug of ours is not the apiserver being down.
    expect(isUnreachable(new Error('list /api/v1/pods returned no resourceVersion'))).to.equal(false);
  });

  it("names one shared condition for an unreachable apiserver, and the component's own for anything else", () => {
    expect(apiCondition('pods list', refused())).to.deep.equal({
      condition: 'apiserver unreachable',
      message: 'apiserver unreachable (pods list): fetch failed: connect ECONNREFUSED 127.0.0.1:6443',
    });
    expect(
      apiCondition(
        'pods list',
        new ApiException(
          403,
          'HTTP-Code: 403',
          JSON.stringify({ reason: 'Forbidden', message: 'pods is forbidden' }),
          {},
        ),
      ),
    ).to.deep.equal({
      condition: 'pods list failing',
      message: 'pods list failing: HTTP 403 Forbidden: pods is forbidden',
    });
  });
});
