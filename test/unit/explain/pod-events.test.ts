import { expect } from 'chai';
import { eventTime, lastBindEvent, lockWaitNode, podEvents } from '../../../src/explain/pod-events.js';
import { bindReport } from '../../../src/explain/bind-report.js';
import { ALLOCATED_ANNOTATION, TO_ALLOCATE_ANNOTATION } from '../../../src/hami/wire.js';

describe('pod events and allocation progress', () => {
  it('an event is as recent as its last observation: series, then lastTimestamp, then eventTime, then creation', () => {
    expect(
      eventTime({
        series: { lastObservedTime: '2026-01-01T00:00:09Z' },
        lastTimestamp: '2026-01-01T00:00:01Z',
      })?.toISOString(),
    ).to.equal('2026-01-01T00:00:09.000Z');
    expect(
      eventTime({ lastTimestamp: new Date('2026-01-01T00:00:02Z'), eventTime: '2026-01-01T00:00:05Z' })?.toISOString(),
    ).to.equal('2026-01-01T00:00:02.000Z');
    expect(eventTime({ eventTime: '2026-01-01T00:00:05.123456Z' })?.toISOString()).to.equal('2026-01-01T00:00:05.123Z');
    expect(eventTime({ metadata: { creationTimestamp: '2026-01-01T00:00:07Z' } })?.toISOString()).to.equal(
      '2026-01-01T00:00:07.000Z',
    );
    expect(eventTime({ lastTimestamp: 'not a time' })).to.equal(undefined);
  });

  it('sorts by that time across writers, so two events in one second keep their order by sub-second eventTime', () => {
    const sorted = podEvents(
      [
        { reason: 'B', eventTime: '2026-01-01T00:00:01.600Z' },
        { reason: 'A', eventTime: '2026-01-01T00:00:01.200Z' },
        { reason: 'undated' },
      ],
      'u',
    );
    expect(sorted.map((event) => event.reason)).to.deep.equal(['undated', 'A', 'B']);
  });

  it('the latest bind event decides whether a bind waits, and names the node', () => {
    const sorted = [
      { reason: 'NodeLockWait', message: 'waiting for the lock on node gpu-7: node gpu-7 is locked by a/b' },
      { reason: 'FailedScheduling', message: 'x' },
    ];
    expect(lockWaitNode(lastBindEvent(sorted))).to.equal('gpu-7');
    expect(lockWaitNode(lastBindEvent([...sorted, { reason: 'Scheduled', message: 'bound' }]))).to.equal(undefined);
    // A bind that failed once and then succeeded is not reported as failed.
    const retried = [
      { reason: 'BindingFailed', message: 'x' },
      { reason: 'BindingSucceed', message: 'Successfully binding node [gpu-7] to a/b' },
    ];
    expect(lastBindEvent(retried)?.reason).to.equal('BindingSucceed');
  });

  it('allocation progress: unreadable to-allocate gives no progress, not a guess', () => {
    const report = bindReport({
      metadata: {
        annotations: {
          [ALLOCATED_ANNOTATION]: 'GPU-a,NVIDIA,100,0:;',
          [TO_ALLOCATE_ANNOTATION]: 'garbage,x',
          'hami.io/bind-phase': 'allocating',
        },
      },
      spec: { containers: [{ name: 'main' }] },
    });
    expect(report.progress).to.equal(null);
    expect(report.toAllocate).to.have.property('error');
  });

  it('allocation progress counts containers with GPUs only, init containers first', () => {
    const report = bindReport({
      metadata: {
        annotations: {
          [ALLOCATED_ANNOTATION]: 'GPU-a,NVIDIA,100,0:;;GPU-b,NVIDIA,100,0:;',
          [TO_ALLOCATE_ANNOTATION]: ';;GPU-b,NVIDIA,100,0:;',
          'hami.io/bind-phase': 'allocating',
        },
      },
      spec: { initContainers: [{ name: 'setup' }], containers: [{ name: 'side' }, { name: 'main' }] },
    });
    expect(report.progress).to.deep.equal({ done: 1, total: 2 });
    expect(report.allocated).to.deep.equal({
      containers: [
        { container: 'init setup', gpus: [{ uuid: 'GPU-a', memoryMiB: 100, cores: 0 }] },
        { container: 'side', gpus: [] },
        { container: 'main', gpus: [{ uuid: 'GPU-b', memoryMiB: 100, cores: 0 }] },
      ],
    });
  });
});
