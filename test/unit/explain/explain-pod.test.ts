import { expect } from 'chai';
import { TO_ALLOCATE_ANNOTATION } from '../../../src/hami/wire.js';
import { simulatedGpuNode } from '../../../src/local/simulated-gpu-node.js';
import { boundAnnotations, event, explainScenario, gpuNode, gpuPod, NOW, secondsAgo } from './scenario.js';

const holder = { namespace: 'team-b', name: 'x' };

describe('explainPod: the verdict for each situation', () => {
  it('fits nowhere: names the node count and HAMi reason names, most frequent first', async () => {
    const pod = gpuPod('p', { memoryMiB: 30000 });
    const nodes = [
      simulatedGpuNode({ name: 'gpu-1', gpus: 1 }),
      simulatedGpuNode({ name: 'gpu-2', gpus: 2 }),
      simulatedGpuNode({ name: 'cpu-1', gpus: 0, register: false }),
    ];

    const explanation = await explainScenario(pod, nodes);

    expect(explanation.situation).to.equal('fits-nowhere');
    expect(explanation.verdict).to.equal('Pending: fits no node (3 nodes: 2 CardInsufficientMemory, 1 NoGpuInventory)');
    expect(explanation.placement?.failing[0]).to.deep.equal({
      reason: 'CardInsufficientMemory',
      count: 2,
      nodes: [
        { node: 'gpu-1', detail: '1/1 CardInsufficientMemory' },
        { node: 'gpu-2', detail: '2/2 CardInsufficientMemory' },
      ],
    });
    expect(explanation.placement?.failing[1]?.nodes[0]?.detail).to.match(/^no GPU inventory on node/);
  });

  it('fits nowhere because other pods use the GPUs: their usage comes from the store, as filter sees it', async () => {
    const pod = gpuPod('p', { memoryMiB: 20000 });
    const running = gpuPod('busy', {
      node: 'gpu-1',
      phase: 'Running',
      annotations: boundAnnotations('gpu-1', 'success', 20000),
    });

    const explanation = await explainScenario(pod, [simulatedGpuNode({ name: 'gpu-1', gpus: 1 })], [running]);

    expect(explanation.verdict).to.equal('Pending: fits no node (1 node: 1 CardInsufficientMemory)');
  });

  it('waits for a lock: the node its NodeLockWait event names, held by a bound, allocating pod', async () => {
    const pod = gpuPod('p');
    const other = gpuPod('x', {
      namespace: 'team-b',
      node: 'gpu-2',
      annotations: boundAnnotations('gpu-2', 'allocating'),
    });
    const nodes = [
      gpuNode({ name: 'gpu-1', gpus: 1 }),
      gpuNode({ name: 'gpu-2', gpus: 2 }, { holder, ageSeconds: 40 }),
    ];
    const events = [
      event('FailedScheduling', 'earlier', secondsAgo(100)),
      event(
        'NodeLockWait',
        'waiting for the lock on node gpu-2: node gpu-2 is locked by team-b/x (held: bind-in-progress)',
        secondsAgo(3),
      ),
    ];

    const explanation = await explainScenario(pod, nodes, [other], events);

    expect(explanation.situation).to.equal('waiting-for-lock');
    expect(explanation.verdict).to.equal('waiting for the lock on gpu-2 held by team-b/x (bind-in-progress, 40s)');
    expect(explanation.locks).to.have.length(1);
    expect(explanation.locks[0]).to.deep.include({
      node: 'gpu-2',
      relation: 'waited-for',
      state: 'held',
      reason: 'bind-in-progress',
      ageSeconds: 40,
      owner: { exists: true, phase: 'Pending', node: 'gpu-2', bindPhase: 'allocating', deleting: false },
    });
  });

  it("waits for kubelet: the lock of the node its NodeLockWait event names is free, but the node's kubelet has not acknowledged an earlier pod", async () => {
    const pod = gpuPod('p');
    const nodes = [gpuNode({ name: 'gpu-2', gpus: 2 })];
    const events = [
      event(
        'NodeLockWait',
        "waiting for the lock on node gpu-2: node gpu-2 is free, but its kubelet has not acknowledged the allocation of team-b/x (3s): restarted now, kubelet would call Allocate for it again and be served the next pod's GPUs; team-a/p must wait",
        secondsAgo(2),
      ),
    ];

    const explanation = await explainScenario(pod, nodes, [], events);

    expect(explanation.situation).to.equal('waiting-for-kubelet');
    expect(explanation.verdict).to.equal(
      "Pending: gpu-2's lock is free, but its kubelet has not acknowledged team-b/x's allocation yet (no status.startTime): restarted now, it would call Allocate for that pod again and be served this pod's GPUs, so the bind waits",
    );
  });

  it('waits for a lock held past the bind grace: the holder is awaiting allocation', async () => {
    const pod = gpuPod('p');
    const other = gpuPod('x', {
      namespace: 'team-b',
      node: 'gpu-2',
      annotations: boundAnnotations('gpu-2', 'allocating'),
    });
    const nodes = [gpuNode({ name: 'gpu-2', gpus: 2 }, { holder, ageSeconds: 90 })];
    const events = [event('NodeLockWait', 'waiting for the lock on node gpu-2: locked', secondsAgo(1))];

    const explanation = await explainScenario(pod, nodes, [other], events);

    expect(explanation.verdict).to.equal('waiting for the lock on gpu-2 held by team-b/x (awaiting-allocation, 90s)');
  });

  it('waits for a lock without any event when every node it fits is locked by another pod', async () => {
    const pod = gpuPod('p');
    const other = gpuPod('x', {
      namespace: 'team-b',
      node: 'gpu-2',
      annotations: boundAnnotations('gpu-2', 'allocating'),
    });
    const nodes = [gpuNode({ name: 'gpu-2', gpus: 1 }, { holder, ageSeconds: 400 })];

    const explanation = await explainScenario(pod, nodes, [other]);

    expect(explanation.verdict).to.equal(
      'waiting for the lock on gpu-2 held by team-b/x (stalled: awaiting-allocation-past-expiry, 6m40s)',
    );
    expect(explanation.locks[0]?.relation).to.equal('on-a-fitting-node');
  });

  it('is not waiting when its last bind event is older than a BindingFailed: it reports the failure', async () => {
    const pod = gpuPod('p');
    const events = [
      event('NodeLockWait', 'waiting for the lock on node gpu-1: locked', secondsAgo(30)),
      event('BindingFailed', 'binding team-a/p to gpu-1 failed: gave up waiting', secondsAgo(10)),
    ];

    const explanation = await explainScenario(pod, [gpuNode({ name: 'gpu-1', gpus: 1 })], [], events);

    expect(explanation.situation).to.equal('bind-failed');
    expect(explanation.verdict).to.equal(
      'Pending: fits 1 node; the last bind failed: binding team-a/p to gpu-1 failed: gave up waiting',
    );
    expect(explanation.locks).to.deep.equal([]);
  });

  it('schedulable: lists the first nodes it fits', async () => {
    const nodes = Array.from({ length: 7 }, (_, index) => gpuNode({ name: `gpu-${index}`, gpus: 1 }));

    const explanation = await explainScenario(gpuPod('p'), nodes);

    expect(explanation.situation).to.equal('schedulable');
    expect(explanation.verdict).to.equal(
      'Pending: fits 7 nodes (gpu-0, gpu-1, gpu-2, gpu-3, gpu-4, …); waiting for kube-scheduler to bind it',
    );
  });

  it('bound and allocating: progress from the to-allocate annotation and the age of its own lock', async () => {
    const pod = gpuPod('p', { node: 'gpu-1', annotations: boundAnnotations('gpu-1', 'allocating') });
    const nodes = [gpuNode({ name: 'gpu-1', gpus: 1 }, { holder: { namespace: 'team-a', name: 'p' }, ageSeconds: 40 })];

    const explanation = await explainScenario(pod, nodes);

    expect(explanation.situation).to.equal('bound-allocating');
    expect(explanation.verdict).to.equal('bound to gpu-1, allocating (0/1 containers allocated, lock held 40s)');
    expect(explanation.placement).to.equal(null);
    expect(explanation.locks[0]).to.deep.include({
      node: 'gpu-1',
      relation: 'held-by-this-pod',
      state: 'held',
      reason: 'bind-in-progress',
    });
    expect(explanation.bind).to.deep.include({
      phase: 'allocating',
      vgpuNode: 'gpu-1',
      progress: { done: 0, total: 1 },
    });
    expect(explanation.bind.bindTime).to.equal(
      new Date(Math.floor(secondsAgo(40).getTime() / 1000) * 1000).toISOString(),
    );
  });

  it('bound and allocating, a container already consumed by the device plugin', async () => {
    const annotations = { ...boundAnnotations('gpu-1', 'allocating'), [TO_ALLOCATE_ANNOTATION]: ';' };
    const pod = gpuPod('p', { node: 'gpu-1', annotations });

    const explanation = await explainScenario(pod, [gpuNode({ name: 'gpu-1', gpus: 1 })]);

    expect(explanation.verdict).to.equal(
      'bound to gpu-1, allocating (1/1 containers allocated; no lock on gpu-1 names it)',
    );
  });

  it('allocation stalled: its lock is past NODELOCK_EXPIRE', async () => {
    const pod = gpuPod('p', { node: 'gpu-1', annotations: boundAnnotations('gpu-1', 'allocating') });
    const nodes = [
      gpuNode({ name: 'gpu-1', gpus: 1 }, { holder: { namespace: 'team-a', name: 'p' }, ageSeconds: 360 }),
    ];

    const explanation = await explainScenario(pod, nodes);

    expect(explanation.situation).to.equal('allocation-stalled');
    expect(explanation.verdict).to.equal(
      'bound to gpu-1, allocation stalled: its lock is 6m old, past NODELOCK_EXPIRE, and the device plugin has not finished (0/1 containers allocated)',
    );
  });

  it('allocated: names the GPUs bind gave it', async () => {
    const annotations = { ...boundAnnotations('gpu-1', 'success'), [TO_ALLOCATE_ANNOTATION]: ';;' };
    const pod = gpuPod('p', { node: 'gpu-1', phase: 'Running', annotations });

    const explanation = await explainScenario(pod, [gpuNode({ name: 'gpu-1', gpus: 1 })]);

    expect(explanation.situation).to.equal('allocated');
    expect(explanation.verdict).to.equal('allocated on gpu-1: GPU-gpu-1-0 (12000 MiB, 30% cores)');
    expect(explanation.bind.progress).to.deep.equal({ done: 1, total: 1 });
  });

  it('allocation failed: the device plugin set bind-phase=failed', async () => {
    const pod = gpuPod('p', { node: 'gpu-1', annotations: boundAnnotations('gpu-1', 'failed') });
    const explanation = await explainScenario(pod, [gpuNode({ name: 'gpu-1', gpus: 1 })]);
    expect(explanation.verdict).to.equal('allocation failed on gpu-1: the device plugin set hami.io/bind-phase=failed');
  });

  it('bound without our annotations: placed by someone else', async () => {
    const explanation = await explainScenario(gpuPod('p', { node: 'gpu-1' }), [gpuNode({ name: 'gpu-1', gpus: 1 })]);
    expect(explanation.situation).to.equal('bound-without-allocation');
  });

  it('another scheduler: the extender never sees it', async () => {
    const explanation = await explainScenario(gpuPod('p', { schedulerName: 'volcano' }), [
      gpuNode({ name: 'gpu-1', gpus: 1 }),
    ]);
    expect(explanation.verdict).to.equal(
      'Pending: spec.schedulerName is "volcano", not hami-scheduler, so vgpu-warden\'s extender never sees it',
    );
    expect(explanation.webhook.state).to.equal('skipped');
  });

  it('an unreadable request: filter answers with an Error and no node verdicts', async () => {
    const pod = gpuPod('p', { cores: 150 });
    const explanation = await explainScenario(pod, [gpuNode({ name: 'gpu-1', gpus: 1 })]);
    expect(explanation.situation).to.equal('unreadable-request');
    expect(explanation.verdict).to.match(
      new RegExp(
        /^Pending: unreadable GPU request: invalid nvidia\.com\/gpucores value "150" in container main: /.source +
          /.* \(filter refuses the pod\)$/.source,
      ),
    );
    expect(explanation.pod.requestProblems).to.have.length(1);
  });

  it('a pod without GPUs is not placed by vgpu-warden', async () => {
    const pod = gpuPod('p');
    pod.spec = { containers: [{ name: 'main', image: 'x' }] };
    const explanation = await explainScenario(pod, [gpuNode({ name: 'gpu-1', gpus: 1 })]);
    expect(explanation.verdict).to.equal('Pending, requests no GPU: vgpu-warden does not place it');
    expect(explanation.placement).to.equal(null);
  });

  it('a finished pod and a pod being deleted say so first', async () => {
    const finished = await explainScenario(gpuPod('p', { node: 'gpu-1', phase: 'Succeeded' }), [
      gpuNode({ name: 'gpu-1', gpus: 1 }),
    ]);
    expect(finished.verdict).to.equal('finished: Succeeded on gpu-1');
    const deleting = await explainScenario(gpuPod('p', { memoryMiB: 99999, deleting: true }), [
      gpuNode({ name: 'gpu-1', gpus: 1 }),
    ]);
    expect(deleting.verdict).to.equal('being deleted; Pending: fits no node (1 node: 1 CardInsufficientMemory)');
  });

  it('reads the GPU requests as filter does and leaves out GPU-less containers', async () => {
    const pod = gpuPod('p');
    pod.spec?.containers.push({ name: 'sidecar', image: 'x' });
    pod.spec!.initContainers = [
      {
        name: 'setup',
        image: 'x',
        resources: { limits: { 'nvidia.com/gpu': '2', 'nvidia.com/gpumem-percentage': '50' } },
      },
    ];
    const explanation = await explainScenario(pod, [gpuNode({ name: 'gpu-1', gpus: 2 })]);
    expect(explanation.pod.requests).to.deep.equal([
      { container: 'setup', init: true, gpus: 2, memoryMiB: null, memoryPercentage: 50, cores: 0 },
      { container: 'main', init: false, gpus: 1, memoryMiB: 12000, memoryPercentage: null, cores: 30 },
    ]);
  });

  it('keeps only the events of this incarnation, oldest first, and the latest few', async () => {
    const events = Array.from({ length: 12 }, (_, index) =>
      event('FailedScheduling', `attempt ${index}`, secondsAgo(100 - index)),
    );
    events.push(
      event('FilteringFailed', 'old pod', secondsAgo(1), {
        involvedObject: { kind: 'Pod', name: 'p', uid: 'another-uid' },
      }),
    );
    const explanation = await explainScenario(gpuPod('p'), [gpuNode({ name: 'gpu-1', gpus: 1 })], [], events.reverse());
    expect(explanation.events.omitted).to.equal(4);
    expect(explanation.events.items.map((item) => item.message)).to.deep.equal([
      'attempt 4',
      'attempt 5',
      'attempt 6',
      'attempt 7',
      'attempt 8',
      'attempt 9',
      'attempt 10',
      'attempt 11',
    ]);
    expect(explanation.events.items.at(-1)?.ageSeconds).to.equal(89);
    expect(NOW.getTime() - new Date(explanation.events.items.at(-1)?.time ?? 0).getTime()).to.equal(89_000);
  });
});
