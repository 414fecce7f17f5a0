import { expect } from 'chai';
import { ALLOCATED_ANNOTATION } from '../../../src/hami/wire.js';
import { explanationJson, explanationText } from '../../../src/explain/render.js';
import { boundAnnotations, event, explainScenario, gpuNode, gpuPod, NOW, secondsAgo } from './scenario.js';

describe('explanation renderers', () => {
  it('text: the verdict first, then pod, webhook, filter, locks, bind and events', async () => {
    const other = gpuPod('x', {
      namespace: 'team-b',
      node: 'gpu-2',
      annotations: boundAnnotations('gpu-2', 'allocating'),
    });
    const nodes = [
      gpuNode({ name: 'gpu-1', gpus: 1, gpuMemoryMiB: 8000 }),
      gpuNode({ name: 'gpu-2', gpus: 1 }, { holder: { namespace: 'team-b', name: 'x' }, ageSeconds: 40 }),
    ];
    const events = [
      event('NodeLockWait', 'waiting for the lock on node gpu-2: locked by team-b/x', secondsAgo(2), { count: 3 }),
    ];
    const explanation = await explainScenario(gpuPod('p'), nodes, [other], events);

    const lines = explanationText(explanation, NOW);

    expect(lines[0]).to.equal('Verdict:   waiting for the lock on gpu-2 held by team-b/x (bind-in-progress, 40s)');
    expect(lines).to.include('Pod:       team-a/p  phase Pending  scheduler hami-scheduler  node <none>  age 5m');
    expect(lines).to.include('Requests:  main: 1 GPU, 12000 MiB, 30% cores');
    expect(lines).to.include(
      'Webhook:   applied: as the webhook leaves a GPU pod: schedulerName hami-scheduler, nothing left to add',
    );
    expect(lines).to.include('Filter:    1 of 2 nodes fit: gpu-2; locked by another pod: gpu-2');
    expect(lines).to.include('  CardInsufficientMemory  1 node: gpu-1');
    expect(lines).to.include(
      "  gpu-2: team-b/x (bind-in-progress, 40s), this pod's bind waits for it; holder Pending, bound to gpu-2, bind-phase allocating",
    );
    expect(lines).to.include('Bind:      not bound yet');
    const header = lines.findIndex((line) => line.startsWith('  AGE'));
    expect(lines[header]).to.match(/^ {2}AGE +TYPE +REASON +FROM +MESSAGE$/);
    expect(lines[header + 1]).to.match(
      /^ {2}2s +Normal +NodeLockWait \(x3\) +vgpu-warden +waiting for the lock on node gpu-2/,
    );
  });

  it('json: the same explanation as plain data', async () => {
    const explanation = await explainScenario(
      gpuPod('p', { node: 'gpu-1', annotations: boundAnnotations('gpu-1', 'success') }),
      [gpuNode({ name: 'gpu-1', gpus: 1 })],
    );
    const parsed = JSON.parse(explanationJson(explanation)) as typeof explanation;
    expect(parsed).to.deep.equal(explanation);
    expect(parsed.bind.allocated).to.deep.equal({
      containers: [{ container: 'main', gpus: [{ uuid: 'GPU-gpu-1-0', memoryMiB: 12000, cores: 30 }] }],
    });
  });

  it('stays one screen when the strings others wrote are huge', async () => {
    const huge = 'x'.repeat(200_000);
    const annotations = { ...boundAnnotations('gpu-1', 'allocating'), [ALLOCATED_ANNOTATION]: `${huge},x` };
    const pod = gpuPod('p', { node: 'gpu-1', annotations });
    const events = Array.from({ length: 50 }, (_, index) => event('BindingFailed', huge, secondsAgo(index)));
    const nodes = [gpuNode({ name: 'gpu-1', gpus: 1 }, { holder: { namespace: 'team-a', name: 'p' }, ageSeconds: 10 })];
    const explanation = await explainScenario(pod, nodes, [], events);

    const text = explanationText(explanation, NOW);

    expect(text.length).to.be.below(30);
    expect(text.join('\n').length).to.be.below(4000);
    expect(explanationJson(explanation).length).to.be.below(8000);
    expect(explanation.bind.allocated).to.have.property('error');
  });
});
