import { AuthorizationV1Api, CoreV1Api, RbacAuthorizationV1Api, type CoreV1Event } from '@kubernetes/client-node';
import { expect } from 'chai';
import { ClusterCache } from '../../src/cluster/cluster-cache.js';
import { DEFAULT_REQUEST_DEFAULTS } from '../../src/devices/requests.js';
import { Binder } from '../../src/extender/binder.js';
import { ExtenderService } from '../../src/extender/extender-service.js';
import { KubeNodeLockApi } from '../../src/lock/kube-node-lock-api.js';
import { NodeLocks } from '../../src/lock/node-locks.js';
import { EventRecorder } from '../../src/telemetry/events.js';
import { impersonating } from '../support/impersonation.js';
import { accessReview, applyShippedIdentities, serviceAccountSubject } from '../support/shipped-identities.js';
import { eventually, notYet, testCluster } from '../support/test-cluster.js';
import { kubeSources } from '../../src/cluster/kube-list-watch.js';

const INTERVAL_MS = 2_000;
const defaults = {
  nodePolicy: 'binpack' as const,
  gpuPolicy: 'spread' as const,
  requestDefaults: DEFAULT_REQUEST_DEFAULTS,
};

async function createPod(core: CoreV1Api, namespace: string, name: string): Promise<string> {
  const pod = await core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name },
      spec: {
        schedulerName: 'nobody-schedules-this',
        containers: [
          { name: 'main', image: 'registry.invalid/none:1', resources: { limits: { 'nvidia.com/gpu': '1' } } },
        ],
      },
    },
  });
  return pod.metadata?.uid ?? '';
}

/** The FilteringFailed Events about one pod, read back from the apiserver. */
async function filteringFailed(namespace: string, pod: string): Promise<CoreV1Event[]> {
  const list = await testCluster().core.listNamespacedEvent({
    namespace,
    fieldSelector: `involvedObject.name=${pod},reason=FilteringFailed`,
  });
  return list.items;
}

/** What a wait saw of the FilteringFailed Events: how many and their counts. */
function describeCounts(items: CoreV1Event[]): string {
  return `${items.length} FilteringFailed Events, counts [${items.map((item) => item.count ?? '?').join(', ')}]`;
}

/** The recorder's own report lines, for a wait: a failed write explains a missing Event. */
function describeLines(lines: string[]): string {
  return lines.length === 0
    ? 'no recorder lines'
    : `${lines.length} recorder lines, the last: ${lines.at(-1)?.slice(0, 200) ?? ''}`;
}

/** Ten records 100 ms apart: the extender filtering one unschedulable pod ten times in a second. */
async function tenInOneSecond(record: (attempt: number) => void | Promise<void>): Promise<void> {
  for (let attempt = 1; attempt <= 10; attempt++) {
    await record(attempt);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('Event aggregation on a real apiserver', function () {
  this.timeout(60_000);

  it('10 FilteringFailed records for one pod in one second are one Event with count 10 and the latest message', async () => {
    const { core, namespace } = testCluster();
    const uid = await createPod(core, namespace, 'too-big');
    const problems: string[] = [];
    const events = new EventRecorder(core, 'vgpu-warden', (line) => problems.push(line), { intervalMs: INTERVAL_MS });

    await tenInOneSecond((attempt) => {
      events.record(
        { kind: 'Pod', namespace, name: 'too-big', uid },
        'Warning',
        'FilteringFailed',
        `no available node (attempt ${attempt})`,
      );
    });

    const event = await eventually(
      'the Event to reach count 10',
      async () => {
        const items = await filteringFailed(namespace, 'too-big');
        return items.length === 1 && items[0]?.count === 10
          ? items[0]
          : notYet(`${describeCounts(items)}; ${describeLines(problems)}`);
      },
      10_000,
      200,
    );
    expect(event.message).to.equal('no available node (attempt 10)');
    expect(event.type).to.equal('Warning');
    expect(event.involvedObject).to.deep.include({ kind: 'Pod', namespace, name: 'too-big', uid });
    expect(event.source?.component).to.equal('vgpu-warden');
    expect(event.firstTimestamp?.getTime()).to.be.at.most(event.lastTimestamp?.getTime() ?? 0);
    // Nothing more is written once the count is out.
    await sleep(INTERVAL_MS + 500);
    expect((await filteringFailed(namespace, 'too-big')).map((item) => item.count)).to.deep.equal([10]);
    expect(problems).to.deep.equal([]);
  });

  it('the extender filtering one pod that fits nowhere 10 times in a second writes one FilteringFailed Event with count 10', async () => {
    const { core, kubeConfig, namespace } = testCluster();
    const uid = await createPod(core, namespace, 'fits-nowhere');
    const cache = new ClusterCache({ sources: kubeSources(kubeConfig) });
    await cache.start();
    try {
      const events = new EventRecorder(core, 'vgpu-warden', undefined, { intervalMs: INTERVAL_MS });
      const locks = new NodeLocks({
        api: new KubeNodeLockApi(core),
        view: cache.lockView,
        config: { bindGraceMs: 60_000, expireMs: 300_000 },
      });
      const binder = new Binder({ core, cache, locks, events, defaults, lockWaitMs: 5_000, timeoutMs: 10_000 });
      // No wait for the unknown names: ten filters have to fit in one second.
      const service = new ExtenderService({ cache, binder, events, defaults, syncWaitMs: 5_000, unseenNodeWaitMs: 0 });
      const pod = {
        metadata: { name: 'fits-nowhere', namespace, uid },
        spec: {
          containers: [{ name: 'main', resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '1000' } } }],
        },
      };

      await tenInOneSecond(async () => {
        const result = await service.filter({ pod, nodeNames: ['no-such-node-a', 'no-such-node-b'] });
        expect(result.Error).to.match(/^vgpu-warden has not seen 2 nodes/);
      });

      const event = await eventually(
        'one FilteringFailed Event with count 10',
        async () => {
          const items = await filteringFailed(namespace, 'fits-nowhere');
          return items.length === 1 && items[0]?.count === 10 ? items[0] : notYet(describeCounts(items));
        },
        10_000,
        200,
      );
      expect(event.message).to.match(
        /^vgpu-warden has not seen 2 nodes \(no-such-node-a, no-such-node-b\) yet .*; retry: 2 nodes do not meet: /,
      );
    } finally {
      await cache.stop();
    }
  });

  it('where RBAC grants only create: one new Event per interval carrying the occurrences since the last, and one line saying why', async () => {
    const { core, kubeConfig, namespace } = testCluster();
    const rbac = kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace,
      body: {
        metadata: { name: 'events-create-only' },
        rules: [{ apiGroups: [''], resources: ['events'], verbs: ['create'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'events-create-only' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'events-create-only' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'event-writer' }],
      },
    });
    const authorization = kubeConfig.makeApiClient(AuthorizationV1Api);
    const writer = { user: 'event-writer', groups: ['system:authenticated'] };
    await eventually(
      'the Role to take effect',
      async () =>
        (await accessReview(authorization, writer, { verb: 'create', resource: 'events', namespace }))
          ? true
          : notYet('event-writer may not create events yet'),
      10_000,
      100,
    );
    expect(await accessReview(authorization, writer, { verb: 'patch', resource: 'events', namespace })).to.equal(false);
    const uid = await createPod(core, namespace, 'create-only');
    const lines: string[] = [];
    const events = new EventRecorder(
      impersonating(kubeConfig, 'event-writer').makeApiClient(CoreV1Api),
      'vgpu-warden',
      (line) => lines.push(line),
      { intervalMs: INTERVAL_MS },
    );

    await tenInOneSecond(() => {
      events.record(
        { kind: 'Pod', namespace, name: 'create-only', uid },
        'Warning',
        'FilteringFailed',
        'no available node',
      );
    });

    const items = await eventually(
      'the second Event, with the other 9',
      async () => {
        const found = await filteringFailed(namespace, 'create-only');
        return found.length === 2 ? found : notYet(`${describeCounts(found)}; ${describeLines(lines)}`);
      },
      10_000,
      200,
    );
    expect(items.map((item) => item.count).sort()).to.deep.equal([1, 9]);
    expect(lines).to.have.length(1);
    expect(lines[0]).to.match(
      new RegExp(
        /^cannot patch Events \(HTTP 403 Forbidden: .*\): /.source +
          /repeats now create one new Event per 2 s instead of counting on one; grant "patch" on events/.source,
      ),
    );
    await sleep(INTERVAL_MS + 500);
    expect(await filteringFailed(namespace, 'create-only')).to.have.length(2);
  });

  it('with the shipped RBAC (manifests/), the 10 occurrences all reach the API, in at most two Events', async () => {
    const { kubeConfig, namespace } = testCluster();
    const cleanup = await applyShippedIdentities(kubeConfig, namespace);
    try {
      const warden = impersonating(kubeConfig, serviceAccountSubject(namespace, 'vgpu-warden').user).makeApiClient(
        CoreV1Api,
      );
      const uid = await createPod(testCluster().core, namespace, 'shipped');
      const lines: string[] = [];
      const events = new EventRecorder(warden, 'vgpu-warden', (line) => lines.push(line), { intervalMs: INTERVAL_MS });

      await tenInOneSecond(() => {
        events.record(
          { kind: 'Pod', namespace, name: 'shipped', uid },
          'Warning',
          'FilteringFailed',
          'no available node',
        );
      });

      // One Event with count 10 where the ServiceAccount may patch Events, 1 + 9 where it may only create them.
      const items = await eventually(
        'all 10 occurrences in the API',
        async () => {
          const found = await filteringFailed(namespace, 'shipped');
          return found.reduce((sum, item) => sum + (item.count ?? 0), 0) === 10
            ? found
            : notYet(`${describeCounts(found)}; ${describeLines(lines)}`);
        },
        10_000,
        200,
      );
      expect(items.length).to.be.within(1, 2);
      expect(lines.filter((line) => !line.startsWith('cannot patch Events'))).to.deep.equal([]);
    } finally {
      await cleanup();
    }
  });
});
