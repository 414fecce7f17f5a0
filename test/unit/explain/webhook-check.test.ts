import { expect } from 'chai';
import { webhookReport } from '../../../src/explain/webhook-check.js';
import { boundAnnotations, gpuPod, SETTINGS } from './scenario.js';

describe('webhookReport: did the webhook mutate the pod?', () => {
  it('applied: a pod as the webhook leaves it, even once bound and annotated by bind', () => {
    const report = webhookReport(
      gpuPod('p', { node: 'gpu-1', annotations: boundAnnotations('gpu-1', 'success') }),
      SETTINGS.mutation,
      5,
    );
    expect(report).to.deep.equal({
      state: 'applied',
      detail: 'as the webhook leaves a GPU pod: schedulerName hami-scheduler, nothing left to add',
      missing: [],
    });
  });

  it('not-applied: lists what the webhook would still set', () => {
    const pod = gpuPod('p', { schedulerName: 'default-scheduler' });
    pod.spec!.containers[0]!.resources = { limits: { 'nvidia.com/gpu': '1' } };
    const report = webhookReport(pod, SETTINGS.mutation, 5);
    expect(report.state).to.equal('not-applied');
    expect(report.missing).to.deep.equal([
      'spec/containers/0/resources/limits/nvidia.com/gpucores: "100"',
      'spec/schedulerName: "hami-scheduler"',
    ]);
  });

  it('caps what it lists', () => {
    const pod = gpuPod('p', { schedulerName: 'default-scheduler' });
    pod.spec!.containers = Array.from({ length: 9 }, (_, index) => ({
      name: `c${index}`,
      image: 'x',
      resources: { limits: { 'nvidia.com/gpu': '1' } },
    }));
    const report = webhookReport(pod, SETTINGS.mutation, 3);
    expect(report.missing).to.have.length(4);
    expect(report.missing[3]).to.equal('and 7 more');
  });

  it('would-deny: a privileged GPU container never passed the webhook', () => {
    const pod = gpuPod('p');
    pod.spec!.containers[0]!.securityContext = { privileged: true };
    const report = webhookReport(pod, SETTINGS.mutation, 5);
    expect(report.state).to.equal('would-deny');
    expect(report.detail).to.match(/privileged/);
  });

  it("skipped: another scheduler's pod", () => {
    expect(webhookReport(gpuPod('p', { schedulerName: 'volcano' }), SETTINGS.mutation, 5).state).to.equal('skipped');
  });
});
