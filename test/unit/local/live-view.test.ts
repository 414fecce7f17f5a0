import { expect } from 'chai';
import { renderLiveView } from '../../../src/local/live-view.js';

describe('local live view', () => {
  const now = new Date('2026-11-30T12:00:00Z');
  const inventory = { devices: [{ uuid: 'GPU-n1-0', index: 0, count: 10, memoryMiB: 24576, cores: 100, type: 'NVIDIA-A10', numa: 0, mode: 'hami-core', healthy: true, cordoned: false }], problems: [] };

  it('shows GPU use, the lock holder and age, and recent events', () => {
    const lines = renderLiveView(
      [{ name: 'gpu-node-1', inventory, usage: new Map([['GPU-n1-0', { slots: 2, memoryMiB: 12288, cores: 50 }]]), lock: '2026-11-30T11:59:48Z,default,trainer' }],
      [{ time: now, object: 'pod/trainer', reason: 'BindingSucceeded', message: 'bound' }],
      now,
    );
    const text = lines.join('\n');
    expect(text).to.include('gpu-node-1  locked by default/trainer for 12s');
    expect(text).to.include('mem [#####.....]  12288/24576 MiB').and.include('cores [#####.....]  50%').and.include('tasks 2/10');
    expect(text).to.include('BindingSucceeded');
  });

  it('shows an unlocked node and says when there are no events', () => {
    const text = renderLiveView([{ name: 'n', inventory: undefined, usage: new Map(), lock: undefined }], [], now).join('\n');
    expect(text).to.include('n  unlocked').and.include('(none yet)');
  });
});
