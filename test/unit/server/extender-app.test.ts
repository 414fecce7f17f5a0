import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { BindingArgs, FilterArgs } from '../../../src/extender/protocol.js';
import { createExtenderApp } from '../../../src/server/extender-app.js';

function call(
  server: Server,
  path: string,
  body: string,
): Promise<{ status: number; json: Record<string, unknown> | unknown[] }> {
  return new Promise((done, fail) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: (server.address() as AddressInfo).port,
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => {
          text += chunk.toString();
        });
        res.on('end', () => {
          done({ status: res.statusCode ?? 0, json: JSON.parse(text) as Record<string, unknown> });
        });
      },
    );
    req.on('error', fail);
    req.end(body);
  });
}

/** A filter answer passing every name. */
function passing(nodeNames: string[]) {
  return { Nodes: null, NodeNames: nodeNames, FailedNodes: null, FailedAndUnresolvableNodes: null, Error: '' };
}

describe('extender HTTP adapter', () => {
  const seen: { filter: FilterArgs[]; bind: BindingArgs[] } = { filter: [], bind: [] };
  let server: Server;
  before(async () => {
    const app = createExtenderApp({
      handlers: {
        filter: (args) => {
          seen.filter.push(args);
          return Promise.resolve(passing(args.nodeNames));
        },
        prioritize: (args) => Promise.resolve(args.nodeNames.map((Host) => ({ Host, Score: 5 }))),
        bind: (args) =>
          args.podName === 'explode'
            ? Promise.reject(new Error('boom'))
            : (seen.bind.push(args), Promise.resolve({ Error: '' })),
      },
      readiness: () => ({ ready: true, reasons: [] }),
    });
    server = createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  after(() => {
    server.close();
  });

  const pod = { metadata: { name: 'p', namespace: 'ns', uid: 'u' } };

  it('passes valid filter args through (Go casing, case-insensitive keys)', async () => {
    const answer = await call(server, '/filter', JSON.stringify({ pod, nodenames: ['n1', 'n2'] }));
    expect(answer).to.deep.equal({
      status: 200,
      json: { Nodes: null, NodeNames: ['n1', 'n2'], FailedNodes: null, FailedAndUnresolvableNodes: null, Error: '' },
    });
    expect(seen.filter.at(-1)?.nodeNames).to.deep.equal(['n1', 'n2']);
  });

  it('reads node names from Nodes when the scheduler is not node-cache capable', async () => {
    const answer = await call(
      server,
      '/filter',
      JSON.stringify({ Pod: pod, Nodes: { items: [{ metadata: { name: 'a' } }] } }),
    );
    expect((answer.json as { NodeNames: string[] }).NodeNames).to.deep.equal(['a']);
  });

  const badFilters: [string, string, string][] = [
    ['an empty body', '', 'malformed request: empty request body'],
    ['invalid JSON', '{"Pod":', 'malformed request:'],
    ['a JSON array', '[]', 'extender args must be a JSON object'],
    ['no pod', JSON.stringify({ NodeNames: ['n1'] }), 'extender args missing pod'],
    [
      'node names that are not strings',
      JSON.stringify({ Pod: pod, NodeNames: [1] }),
      'NodeNames must be a list of node names',
    ],
    ['neither NodeNames nor Nodes', JSON.stringify({ Pod: pod }), 'extender args have neither NodeNames nor Nodes'],
    // Names longer than Kubernetes allows never get further than here, and are echoed clipped.
    [
      'an 8 MiB pod name',
      JSON.stringify({ Pod: { metadata: { name: 'p'.repeat(8 << 20) } }, NodeNames: ['n1'] }),
      `extender args: pod name "${'p'.repeat(63)}…" is not a valid pod name`,
    ],
    [
      'a pod name that is not a DNS subdomain',
      JSON.stringify({ Pod: { metadata: { name: 'Not_A_Pod' } }, NodeNames: ['n1'] }),
      'extender args: pod name "Not_A_Pod" is not a valid pod name',
    ],
    [
      'a namespace that is not a DNS label',
      JSON.stringify({ Pod: { metadata: { name: 'p', namespace: 'a.b' } }, NodeNames: ['n1'] }),
      'extender args: pod namespace "a.b" is not a valid namespace',
    ],
    [
      'a node name over 253 characters',
      JSON.stringify({ Pod: pod, NodeNames: ['n1', 'n'.repeat(100_000)] }),
      `NodeNames entry 1 ("${'n'.repeat(63)}…") is longer than 253 characters`,
    ],
    [
      'an empty node name',
      JSON.stringify({ Pod: pod, NodeNames: ['n1', ''] }),
      'NodeNames must be a list of node names (entry 1 is "")',
    ],
  ];
  for (const [title, body, error] of badFilters) {
    it(`answers a filter with ${title} with HTTP 200 and an Error`, async () => {
      const answer = await call(server, '/filter', body);
      expect(answer.status).to.equal(200);
      expect((answer.json as { Error: string; NodeNames: unknown }).Error).to.include(error);
      expect((answer.json as { NodeNames: unknown }).NodeNames).to.equal(null);
    });
  }

  it('answers bad prioritize args with HTTP 400 (kube-scheduler ignores that extender score)', async () => {
    expect((await call(server, '/prioritize', '{}')).status).to.equal(400);
    expect((await call(server, '/prioritize', JSON.stringify({ Pod: pod, NodeNames: ['n1'] }))).json).to.deep.equal([
      { Host: 'n1', Score: 5 },
    ]);
  });

  it('validates binding args field by field and folds handler failures into Error', async () => {
    const full = { PodName: 'p', PodNamespace: 'ns', PodUID: 'u', Node: 'n1' };
    expect((await call(server, '/bind', JSON.stringify(full))).json).to.deep.equal({ Error: '' });
    expect(seen.bind.at(-1)).to.deep.equal({ podName: 'p', podNamespace: 'ns', podUid: 'u', node: 'n1' });
    for (const missing of ['PodName', 'PodNamespace', 'PodUID', 'Node']) {
      const partial = Object.fromEntries(Object.entries(full).filter(([key]) => key !== missing));
      const answer = await call(server, '/bind', JSON.stringify(partial));
      expect(answer).to.deep.equal({ status: 200, json: { Error: `binding args missing ${missing}` } });
    }
    expect((await call(server, '/bind', JSON.stringify({ ...full, PodName: 'explode' }))).json).to.deep.equal({
      Error: 'bind failed: boom',
    });
    const huge = 'x'.repeat(8 << 20);
    const invalid: [Record<string, string>, string][] = [
      [{ ...full, PodName: huge }, `binding args: PodName "${'x'.repeat(63)}…" is not a valid pod name`],
      [{ ...full, PodNamespace: 'NS' }, 'binding args: PodNamespace "NS" is not a valid namespace'],
      [{ ...full, PodUID: huge }, `binding args: PodUID "${'x'.repeat(63)}…" is not a valid UID`],
      [{ ...full, Node: huge }, `binding args: Node "${'x'.repeat(63)}…" is not a valid node name`],
    ];
    for (const [args, error] of invalid)
      expect(await call(server, '/bind', JSON.stringify(args))).to.deep.equal({ status: 200, json: { Error: error } });
  });

  it('answers a large filter in full, written in pieces', async () => {
    const nodeNames = Array.from({ length: 50_000 }, (_, index) => `node-${index}`);
    const answer = await call(server, '/filter', JSON.stringify({ Pod: pod, NodeNames: nodeNames }));
    expect((answer.json as { NodeNames: string[] }).NodeNames).to.deep.equal(nodeNames);
  });
});

describe('extender HTTP adapter: where a call spends its time', () => {
  it('reports each well-formed call by verb and phase (read, decode, handle, answer), bad ones not at all', async () => {
    // A clock that steps 1 ms per reading, plus what the handler "spends": the phases come out exact.
    let now = 0;
    const clock = () => (now += 1);
    const served: [string, Record<string, number>][] = [];
    const app = createExtenderApp({
      handlers: {
        filter: (args) => {
          now += 40;
          return Promise.resolve(passing(args.nodeNames));
        },
        prioritize: () => Promise.reject(new Error('no scores')),
        bind: () => Promise.resolve({ Error: '' }),
      },
      readiness: () => ({ ready: true, reasons: [] }),
      clock,
      onServed: (verb, phases) => served.push([verb, { ...phases }]),
    });
    const server = createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const pod = { metadata: { name: 'p', namespace: 'ns', uid: 'u' } };
      await call(server, '/filter', JSON.stringify({ Pod: pod, NodeNames: ['n1'] }));
      expect(served).to.deep.equal([['filter', { read: 1, decode: 1, handle: 41, answer: 1 }]]);
      await call(server, '/prioritize', JSON.stringify({ Pod: pod, NodeNames: ['n1'] }));
      expect(served[1]?.[0]).to.equal('prioritize');
      expect(served[1]?.[1]).to.include.keys('read', 'decode', 'handle', 'answer');
      await call(server, '/bind', '{"PodName":"p"}');
      await call(server, '/filter', 'not json');
      expect(served).to.have.length(2);
    } finally {
      server.close();
    }
  });
});
