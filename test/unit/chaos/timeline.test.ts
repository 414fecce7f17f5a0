import { expect } from 'chai';
import { subjectsMentioned, Timeline } from '../../chaos/timeline.js';

describe('chaos timeline', () => {
  it('subjectsMentioned: pod keys and the known nodes a log line names, not annotation keys or longer node names', () => {
    const nodes = ['chaos-node-1', 'chaos-node-2'];
    expect(
      subjectsMentioned('patching hami.io/bind-phase=success on chaos/g-74 failed: connect ECONNREFUSED', nodes),
    ).to.deep.equal(['chaos/g-74']);
    expect(subjectsMentioned('releasing the lock on chaos-node-2 for chaos/g-7 failed', nodes)).to.deep.equal([
      'chaos/g-7',
      'node/chaos-node-2',
    ]);
    expect(
      subjectsMentioned('Allocate on chaos-node-12 for devices a,b failed', nodes),
      'chaos-node-1 is not chaos-node-12',
    ).to.deep.equal([]);
    expect(
      subjectsMentioned('GET https://127.0.0.1:6443/api/v1/nodes/chaos-node-1 failed', nodes),
      'a URL path is no pod key',
    ).to.deep.equal(['node/chaos-node-1']);
  });

  it("explain merges the subjects' lines with faults and kubelet in time order", () => {
    const timeline = new Timeline({ started: 0 });
    timeline.add(['ns/p'], 'created', 1_000);
    timeline.add(['faults'], 'apiserver down', 500);
    timeline.add(['ns/q'], 'other pod', 700);
    timeline.add(['node/n1', 'ns/p'], 'locked', 2_000);
    expect(
      timeline
        .explain(['ns/p'])
        .split('\n')
        .map((line) => line.trim()),
    ).to.deep.equal(['0.50s  apiserver down  [faults]', '1.00s  created  [ns/p]', '2.00s  locked  [ns/p]']);
  });
});
