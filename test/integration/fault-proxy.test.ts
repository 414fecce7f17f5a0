import { ApiException, CoreV1Api, Watch, type V1ConfigMap } from '@kubernetes/client-node';
import { expect } from 'chai';
import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { withSignal } from '../../src/kube/call-options.js';
import { httpStatusOf, isNotFound } from '../../src/kube/errors.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { eventually, notYet, sharedControlPlane, testCluster, wakeOn } from '../support/test-cluster.js';

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

function configMap(name: string): V1ConfigMap {
  return { metadata: { name }, data: { key: 'value' } };
}

interface WatchEvent {
  type: string;
  object: { kind?: string; code?: number; reason?: string; metadata?: { name?: string } };
}

/**
 * A watch through `proxy` on the configmaps of `namespace`, recording events and how it ended;
 * `arrivals` emits 'event' on each, so a wait for one wakes at once.
 */
async function watchConfigMaps(
  proxy: FaultProxy,
  namespace: string,
): Promise<{ events: WatchEvent[]; arrivals: EventEmitter; done: Promise<unknown>; abort: () => void }> {
  const events: WatchEvent[] = [];
  const arrivals = new EventEmitter();
  let finish: (error: unknown) => void = () => undefined;
  const done = new Promise<unknown>((resolve) => {
    finish = resolve;
  });
  const controller = await new Watch(proxy.kubeConfig()).watch(
    `/api/v1/namespaces/${namespace}/configmaps`,
    {},
    (type: string, object: WatchEvent['object']) => {
      events.push({ type, object });
      arrivals.emit('event');
    },
    (error: unknown) => {
      finish(error ?? null);
    },
  );
  return {
    events,
    arrivals,
    done,
    abort: () => {
      controller.abort();
    },
  };
}

/** What a watch has delivered so far, for a wait: how many events and the last few. */
function describeWatchEvents(events: WatchEvent[]): string {
  return `${events.length} watch events${
    events.length === 0
      ? ''
      : `, the last: ${events
          .slice(-3)
          .map((event) => `${event.type} ${event.object.metadata?.name ?? event.object.reason ?? '?'}`)
          .join(', ')}`
  }`;
}

async function settlesWithin<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`did not settle within ${ms} ms`));
    }, ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

describe('FaultProxy in front of the real kube-apiserver', () => {
  let proxy: FaultProxy;
  let core: CoreV1Api;

  before(async () => {
    proxy = await FaultProxy.start({ upstream: sharedControlPlane() });
    core = proxy.kubeConfig().makeApiClient(CoreV1Api);
  });

  afterEach(() => {
    proxy.clearRules();
    proxy.clearLog();
  });

  after(async () => {
    await proxy.stop();
  });

  it('forwards requests with the admin token through a kubeconfig that points at the proxy', async () => {
    const { namespace, controlPlane } = testCluster();
    const kubeconfig = readFileSync(proxy.kubeconfigPath, 'utf8');
    expect(kubeconfig).to.contain(proxy.url).and.not.contain(controlPlane.server);

    const read = await core.readNamespace({ name: namespace });
    await core.createNamespacedConfigMap({ namespace, body: configMap('through-proxy') });
    const list = await core.listNamespacedConfigMap({ namespace });

    expect(read.metadata?.name).to.equal(namespace);
    expect(list.items.map((item) => item.metadata?.name)).to.include('through-proxy');
    expect(proxy.requests.map((entry) => [entry.method, entry.path, entry.status, entry.forwarded])).to.deep.equal([
      ['GET', `/api/v1/namespaces/${namespace}`, 200, true],
      ['POST', `/api/v1/namespaces/${namespace}/configmaps`, 201, true],
      ['GET', `/api/v1/namespaces/${namespace}/configmaps`, 200, true],
    ]);
  });

  it('forwards chunked request bodies and large gzip-encoded answers unchanged', async () => {
    const { namespace, core: direct, controlPlane } = testCluster();
    const big = 'x'.repeat(200_000);
    for (const name of ['big-1', 'big-2'])
      await direct.createNamespacedConfigMap({ namespace, body: { metadata: { name }, data: { big } } });

    const list = await core.listNamespacedConfigMap({ namespace });
    expect(list.items.map((item) => item.data?.big?.length)).to.deep.equal([200_000, 200_000]);

    // A body sent in chunks without Content-Length, straight over node:https.
    const answer = await new Promise<{ status: number | undefined; body: string }>((resolve, reject) => {
      const req = httpsRequest(
        `${proxy.url}/api/v1/namespaces/${namespace}/configmaps`,
        {
          method: 'POST',
          ca: proxy.caPem,
          agent: false,
          headers: {
            authorization: `Bearer ${controlPlane.token}`,
            'content-type': 'application/json',
            'transfer-encoding': 'chunked',
          },
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            body += chunk;
          });
          res.on('end', () => {
            resolve({ status: res.statusCode, body });
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      const json = JSON.stringify(configMap('chunked-body'));
      req.write(json.slice(0, 10));
      setTimeout(() => {
        req.end(json.slice(10));
      }, 50);
    });
    expect(answer.status, answer.body).to.equal(201);
    expect((await direct.readNamespacedConfigMap({ namespace, name: 'chunked-body' })).data).to.deep.equal({
      key: 'value',
    });
  });

  it('fail: answers 503 itself and nothing reaches the apiserver', async () => {
    const { namespace, core: direct } = testCluster();
    const rule = proxy.addRule({
      match: { method: 'POST', path: /\/configmaps$/ },
      action: { kind: 'fail', status: 503 },
    });

    const error = await rejection(core.createNamespacedConfigMap({ namespace, body: configMap('never-created') }));

    expect(error).to.be.instanceOf(ApiException);
    expect(httpStatusOf(error)).to.equal(503);
    expect(rule.hits).to.equal(1);
    expect(isNotFound(await rejection(direct.readNamespacedConfigMap({ namespace, name: 'never-created' })))).to.equal(
      true,
    );
    expect(proxy.requestsWhere({ fault: 'fail' }).map((entry) => [entry.status, entry.forwarded])).to.deep.equal([
      [503, false],
    ]);
  });

  it('fail: carries a custom Status body and headers (a 429 with Retry-After)', async () => {
    const { namespace } = testCluster();
    const body = {
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      reason: 'TooManyRequests',
      code: 429,
      message: 'slow down',
    };
    proxy.addRule({
      match: { method: 'GET' },
      action: { kind: 'fail', status: 429, body, headers: { 'retry-after': '1' } },
    });

    const error = await rejection(core.readNamespace({ name: namespace }));

    expect(httpStatusOf(error)).to.equal(429);
    expect(JSON.stringify((error as ApiException<unknown>).body)).to.contain('slow down');
    expect((error as ApiException<unknown>).headers['retry-after']).to.equal('1');
  });

  it('drop-after-commit: the client gets an error, yet the ConfigMap was created', async () => {
    const { namespace, core: direct } = testCluster();
    const rule = proxy.addRule({
      match: { method: 'POST', path: /\/configmaps$/ },
      action: { kind: 'drop-after-commit' },
    });

    const error = await settlesWithin(
      rejection(core.createNamespacedConfigMap({ namespace, body: configMap('lost-answer') })),
      10_000,
    );

    expect(error).to.be.instanceOf(Error).and.not.be.instanceOf(ApiException);
    expect(httpStatusOf(error)).to.equal(undefined);
    expect(rule.hits).to.equal(1);
    const created = await direct.readNamespacedConfigMap({ namespace, name: 'lost-answer' });
    expect(created.data).to.deep.equal({ key: 'value' });
    const [entry] = proxy.requestsWhere({ fault: 'drop-after-commit' });
    expect(entry).to.include({ status: 'dropped', upstreamStatus: 201, forwarded: true });
    // The client recovers on a new connection.
    expect((await core.readNamespacedConfigMap({ namespace, name: 'lost-answer' })).metadata?.name).to.equal(
      'lost-answer',
    );
  });

  it('delay: forwards the request after the delay', async () => {
    const { namespace } = testCluster();
    proxy.addRule({
      match: { method: 'GET', path: /^\/api\/v1\/namespaces\/[^/]+$/ },
      action: { kind: 'delay', ms: 400 },
    });

    const started = Date.now();
    const read = await core.readNamespace({ name: namespace });
    const elapsed = Date.now() - started;

    expect(read.metadata?.name).to.equal(namespace);
    expect(elapsed).to.be.at.least(390);
    expect(proxy.requestsWhere({ fault: 'delay' }).map((entry) => [entry.status, entry.forwarded])).to.deep.equal([
      [200, true],
    ]);
  });

  it('hang: never answers until the client aborts, and the write never reaches the apiserver', async () => {
    const { namespace, core: direct } = testCluster();
    const rule = proxy.addRule({ match: { method: 'POST' }, action: { kind: 'hang' } });
    const controller = new AbortController();

    const pending = rejection(
      core.createNamespacedConfigMap({ namespace, body: configMap('hung') }, withSignal(controller.signal)),
    );
    await rule.whenHit();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(proxy.hungRequests).to.equal(1);
    controller.abort();
    const error = await settlesWithin(pending, 5_000);

    expect((error as Error).name).to.equal('AbortError');
    await eventually(
      'the proxy to notice the abort',
      () => Promise.resolve(proxy.hungRequests === 0 ? true : notYet(`${proxy.hungRequests} hung requests`)),
      5_000,
      20,
    );
    expect(isNotFound(await rejection(direct.readNamespacedConfigMap({ namespace, name: 'hung' })))).to.equal(true);
    expect(proxy.requestsWhere({ fault: 'hang' }).map((entry) => [entry.status, entry.forwarded])).to.deep.equal([
      ['hung', false],
    ]);
  });

  it('reset: the client gets a connection error at once and nothing is forwarded', async () => {
    const { namespace } = testCluster();
    proxy.addRule({
      match: { method: 'GET', path: /^\/api\/v1\/namespaces\/[^/]+$/ },
      action: { kind: 'reset' },
      times: 1,
    });

    const error = await settlesWithin(rejection(core.readNamespace({ name: namespace })), 5_000);

    expect(error).to.be.instanceOf(Error).and.not.be.instanceOf(ApiException);
    expect(proxy.requestsWhere({ fault: 'reset' }).map((entry) => [entry.status, entry.forwarded])).to.deep.equal([
      ['reset', false],
    ]);
    expect((await core.readNamespace({ name: namespace })).metadata?.name).to.equal(namespace);
  });

  it('times: 1 applies the rule to the first matching request only', async () => {
    const { namespace } = testCluster();
    const rule = proxy.addRule({
      match: { method: ['get'], path: /^\/api\/v1\/namespaces\/[^/]+$/ },
      action: { kind: 'fail', status: 500 },
      times: 1,
    });

    const first = await rejection(core.readNamespace({ name: namespace }));
    const second = await core.readNamespace({ name: namespace });

    expect(httpStatusOf(first)).to.equal(500);
    expect(second.metadata?.name).to.equal(namespace);
    expect(rule.hits).to.equal(1);
    expect(rule.spent).to.equal(true);
    expect(proxy.requests.map((entry) => entry.status)).to.deep.equal([500, 200]);
  });

  it('applies rules in the order they were added and stops applying a removed one', async () => {
    const { namespace } = testCluster();
    const first = proxy.addRule({
      match: { path: /^\/api\/v1\/namespaces\/[^/]+$/ },
      action: { kind: 'fail', status: 500 },
      times: 1,
    });
    const second = proxy.addRule({
      match: { path: /^\/api\/v1\/namespaces\/[^/]+$/ },
      action: { kind: 'fail', status: 503 },
    });

    const status = (): Promise<number | undefined> =>
      core.readNamespace({ name: namespace }).then(() => 200, httpStatusOf);
    const statuses = [await status(), await status()];
    second.remove();
    statuses.push(await status());

    expect(statuses).to.deep.equal([500, 503, 200]);
    expect(second.spent).to.equal(true);
    expect([first.hits, second.hits]).to.deep.equal([1, 1]);
  });

  it('forwards a watch stream and its events', async () => {
    const { namespace, core: direct } = testCluster();
    const watch = await watchConfigMaps(proxy, namespace);
    try {
      await direct.createNamespacedConfigMap({ namespace, body: configMap('watched') });
      await eventually(
        'the ADDED event through the proxy',
        () =>
          Promise.resolve(
            watch.events.find((event) => event.type === 'ADDED' && event.object.metadata?.name === 'watched') ??
              notYet(describeWatchEvents(watch.events)),
          ),
        10_000,
        20,
        wakeOn(watch.arrivals, 'event'),
      );
      expect(proxy.openWatches).to.equal(1);
      expect(proxy.requestsWhere({ watch: true }).map((entry) => [entry.status, entry.forwarded])).to.deep.equal([
        [200, true],
      ]);
    } finally {
      watch.abort();
    }
    await settlesWithin(watch.done, 5_000);
    await eventually(
      'the proxy to close the watch',
      () => Promise.resolve(proxy.openWatches === 0 ? true : notYet(`${proxy.openWatches} open watches`)),
      5_000,
      20,
    );
  });

  it('expire-watch: delivers one 410 Expired ERROR event and ends the stream', async () => {
    const { namespace } = testCluster();
    const rule = proxy.addRule({ match: { watch: true }, action: { kind: 'expire-watch' }, times: 1 });

    const watch = await watchConfigMaps(proxy, namespace);
    const ended = await settlesWithin(watch.done, 5_000);

    expect(ended).to.equal(null);
    expect(watch.events).to.deep.equal([
      {
        type: 'ERROR',
        object: {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          reason: 'Expired',
          code: 410,
          message: 'too old resource version',
        },
      },
    ]);
    expect(rule.hits).to.equal(1);
    expect(proxy.requestsWhere({ fault: 'expire-watch' })[0]).to.include({ forwarded: false, watch: true });
  });

  it('breakWatches() ends every open watch stream, and new watches still work', async () => {
    const { namespace, core: direct } = testCluster();
    const [one, two] = [await watchConfigMaps(proxy, namespace), await watchConfigMaps(proxy, namespace)];
    await eventually(
      'both watches open',
      () => Promise.resolve(proxy.openWatches === 2 ? true : notYet(`${proxy.openWatches} open watches`)),
      5_000,
      20,
    );

    expect(proxy.breakWatches()).to.equal(2);
    expect(await settlesWithin(one.done, 5_000)).to.equal(null);
    expect(await settlesWithin(two.done, 5_000)).to.equal(null);
    expect(proxy.openWatches).to.equal(0);

    const again = await watchConfigMaps(proxy, namespace);
    try {
      await direct.createNamespacedConfigMap({ namespace, body: configMap('after-break') });
      await eventually(
        'an event on the new watch',
        () =>
          Promise.resolve(
            again.events.find((event) => event.object.metadata?.name === 'after-break') ??
              notYet(describeWatchEvents(again.events)),
          ),
        10_000,
        20,
        wakeOn(again.arrivals, 'event'),
      );
    } finally {
      again.abort();
    }
    await settlesWithin(again.done, 5_000);
  });

  it('breakWatches("reset") cuts the connection of open watches', async () => {
    const { namespace } = testCluster();
    const watch = await watchConfigMaps(proxy, namespace);
    await eventually(
      'the watch open',
      () => Promise.resolve(proxy.openWatches === 1 ? true : notYet(`${proxy.openWatches} open watches`)),
      5_000,
      20,
    );

    expect(proxy.breakWatches('reset')).to.equal(1);
    const ended = await settlesWithin(watch.done, 5_000);

    expect(ended).to.be.instanceOf(Error);
  });

  it('logs requests so tests can count API calls by method and path', async () => {
    const { namespace } = testCluster();
    proxy.addRule({ match: { method: 'DELETE' }, action: { kind: 'fail', status: 500 }, times: 1 });
    const watch = await watchConfigMaps(proxy, namespace);
    try {
      await core.createNamespacedConfigMap({ namespace, body: configMap('counted') });
      await core.readNamespacedConfigMap({ namespace, name: 'counted' });
      await core.readNamespacedConfigMap({ namespace, name: 'counted' });
      await rejection(core.deleteNamespacedConfigMap({ namespace, name: 'counted' }));
    } finally {
      watch.abort();
    }
    await settlesWithin(watch.done, 5_000);
    const base = `/api/v1/namespaces/${namespace}/configmaps`;

    expect(proxy.tally({ watch: false })).to.deep.equal({
      [`POST ${base}`]: 1,
      [`GET ${base}/counted`]: 2,
      [`DELETE ${base}/counted`]: 1,
    });
    expect(proxy.countRequests({ watch: true })).to.equal(1);
    expect(proxy.countRequests({ method: 'GET', watch: false, status: 200 })).to.equal(2);
    expect(proxy.countRequests({ fault: null, watch: false })).to.equal(3);
    expect(proxy.countRequests({ status: [500, 201] })).to.equal(2);
    const [first, last] = [proxy.requests[0]!, proxy.requests.at(-1)!];
    expect(first.seq).to.be.lessThan(last.seq);
    expect(first.at).to.be.at.most(last.at);
    expect(last.url).to.equal(`${base}/counted`);

    proxy.clearLog();
    expect(proxy.requests).to.deep.equal([]);
  });

  it('stop() ends open watches and hung requests, closes its connections and refuses new ones', async () => {
    const { namespace } = testCluster();
    const own = await FaultProxy.start({ upstream: sharedControlPlane() });
    const ownCore = own.kubeConfig().makeApiClient(CoreV1Api);
    const hang = own.addRule({ match: { method: 'GET', watch: false }, action: { kind: 'hang' } });
    const watch = await watchConfigMaps(own, namespace);
    const hung = rejection(ownCore.readNamespace({ name: namespace }));
    await hang.whenHit();
    expect(own.openConnections).to.be.at.least(2);

    await settlesWithin(own.stop(), 5_000);

    await settlesWithin(watch.done, 5_000);
    expect(await settlesWithin(hung, 5_000)).to.be.instanceOf(Error);
    expect(own.openConnections).to.equal(0);
    expect(own.openWatches).to.equal(0);
    // A client made before stop() finds nothing listening any more.
    const refused = await rejection(ownCore.readNamespace({ name: namespace }));
    expect(refused).to.be.instanceOf(Error).and.not.be.instanceOf(ApiException);
  });

  it('accepts an explicit upstream URL, CA and token', async () => {
    const { namespace } = testCluster();
    const plane = sharedControlPlane();
    const own = await FaultProxy.start({ upstream: { url: plane.server, caPem: plane.caPem, token: plane.token } });
    try {
      const read = await own.kubeConfig().makeApiClient(CoreV1Api).readNamespace({ name: namespace });
      expect(read.metadata?.name).to.equal(namespace);
    } finally {
      await own.stop();
    }
  });
});
