import { ApiException, KubeConfig, ResponseContext, type RequestContext } from '@kubernetes/client-node';
import { expect } from 'chai';
import { apiStatusOf, httpStatusOf } from '../../../src/kube/errors.js';
import { RawListError, readRawListPage, type RawHttp } from '../../../src/kube/raw-list.js';

function kubeConfig(server = 'https://127.0.0.1:6443'): KubeConfig {
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'secret-token' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return config;
}

/** An HTTP library that records the request and answers `status` with `text`. */
function answering(status: number, text: string): RawHttp & { sent: RequestContext[] } {
  const sent: RequestContext[] = [];
  return {
    sent,
    send(request) {
      sent.push(request);
      const response = new ResponseContext(
        status,
        { 'content-type': 'application/json' },
        { text: () => Promise.resolve(text), binary: () => Promise.resolve(Buffer.from(text)), stream: () => null },
      );
      return { toPromise: () => Promise.resolve(response) };
    },
  };
}

const page = { limit: 500, continueToken: undefined };
const signal = new AbortController().signal;

async function refusal(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the read to fail');
}

describe('readRawListPage', () => {
  it('asks for one JSON page with the kubeconfig credentials and the caller signal', async () => {
    const http = answering(200, JSON.stringify({ kind: 'PodList', metadata: { resourceVersion: '7' }, items: [] }));
    await readRawListPage(
      kubeConfig(),
      '/api/v1/pods',
      { limit: 250, continueToken: 'tok en&x', fieldSelector: 'spec.nodeName=n1' },
      signal,
      http,
    );
    const [request] = http.sent;
    const url = new URL(request?.getUrl() ?? '');
    expect(url.origin + url.pathname).to.equal('https://127.0.0.1:6443/api/v1/pods');
    expect(Object.fromEntries(url.searchParams)).to.deep.equal({
      limit: '250',
      continue: 'tok en&x',
      fieldSelector: 'spec.nodeName=n1',
    });
    expect(request?.getHeaders()).to.include({ Accept: 'application/json', Authorization: 'Bearer secret-token' });
    expect(request?.getSignal()).to.equal(signal);
  });

  it('answers the items as sent (dates stay strings), the resourceVersion and the continue token in the pager shape', async () => {
    const pod = {
      metadata: { name: 'p', namespace: 'ns', creationTimestamp: '2026-12-03T18:00:00Z' },
      spec: { nodeName: 'n1' },
    };
    const http = answering(
      200,
      JSON.stringify({ kind: 'PodList', metadata: { resourceVersion: '42', continue: 'next-page' }, items: [pod] }),
    );
    const result = await readRawListPage(kubeConfig(), '/api/v1/pods', page, signal, http);
    expect(result).to.deep.equal({ items: [pod], metadata: { resourceVersion: '42', _continue: 'next-page' } });
  });

  it('ends the pager on the last page: an empty continue token is no token, and items null is an empty page', async () => {
    const http = answering(
      200,
      JSON.stringify({ kind: 'NodeList', metadata: { resourceVersion: '5', continue: '' }, items: null }),
    );
    expect(await readRawListPage(kubeConfig(), '/api/v1/nodes', page, signal, http)).to.deep.equal({
      items: [],
      metadata: { resourceVersion: '5' },
    });
  });

  it('throws a refusal as the typed calls do: ApiException with the status code and the Status object', async () => {
    const status = {
      kind: 'Status',
      status: 'Failure',
      reason: 'Expired',
      message: 'The provided continue parameter is too old',
      code: 410,
    };
    const error = await refusal(
      readRawListPage(kubeConfig(), '/api/v1/pods', page, signal, answering(410, JSON.stringify(status))),
    );
    expect(error).to.be.instanceOf(ApiException);
    expect(httpStatusOf(error)).to.equal(410);
    expect(apiStatusOf(error)).to.deep.equal({
      reason: 'Expired',
      message: 'The provided continue parameter is too old',
    });
  });

  it('keeps at most 2 KiB of an error answer that is not JSON', async () => {
    const error = await refusal(
      readRawListPage(kubeConfig(), '/api/v1/pods', page, signal, answering(502, `<html>${'x'.repeat(100_000)}`)),
    );
    expect(httpStatusOf(error)).to.equal(502);
    expect(String(apiStatusOf(error)?.message).length).to.equal(2048);
  });

  it('refuses a 200 answer that is not JSON or not a list, naming the path', async () => {
    const notJson = await refusal(
      readRawListPage(kubeConfig(), '/api/v1/pods', page, signal, answering(200, '{"items": [')),
    );
    expect(notJson).to.be.instanceOf(RawListError);
    expect((notJson as Error).message).to.match(/^list \/api\/v1\/pods: the answer is not JSON/);
    const notList = await refusal(
      readRawListPage(kubeConfig(), '/api/v1/pods', page, signal, answering(200, '{"items": {"a": 1}}')),
    );
    expect(notList).to.be.instanceOf(RawListError);
    expect((notList as Error).message).to.equal('list /api/v1/pods: the answer is not a list');
  });

  it('refuses a kubeconfig without a current cluster before any request', async () => {
    const http = answering(200, '{}');
    const error = await refusal(readRawListPage(new KubeConfig(), '/api/v1/pods', page, signal, http));
    expect(error).to.be.instanceOf(RawListError);
    expect(http.sent).to.deep.equal([]);
  });
});
