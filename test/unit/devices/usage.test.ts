import { expect } from 'chai';
import type { AllocatedDevice } from '../../../src/devices/allocation-codec.js';
import {
  addUsage,
  copyUsage,
  podDeviceUsage,
  subtractUsage,
  UsageOverlay,
  type GpuUse,
} from '../../../src/devices/usage.js';

const d = (uuid: string, memoryMiB: number, cores: number): AllocatedDevice => ({
  uuid,
  type: 'NVIDIA',
  memoryMiB,
  cores,
});
const use = (slots: number, memoryMiB: number, cores: number): GpuUse => ({ slots, memoryMiB, cores });
const entries = (usage: ReadonlyMap<string, GpuUse>): [string, GpuUse][] =>
  [...usage].sort(([a], [b]) => a.localeCompare(b));

describe('devices: usage accounting (HAMi §3.5 collapse)', () => {
  const cases: { name: string; allocation: AllocatedDevice[][]; init: number; want: [string, GpuUse][] }[] = [
    { name: 'one app container, one GPU', allocation: [[d('a', 1000, 30)]], init: 0, want: [['a', use(1, 1000, 30)]] },
    {
      name: 'app containers sum, one slot each',
      allocation: [[d('a', 1000, 10)], [d('a', 2000, 20), d('b', 500, 0)]],
      init: 0,
      want: [
        ['a', use(2, 3000, 30)],
        ['b', use(1, 500, 0)],
      ],
    },
    {
      name: 'init peak above the app sum wins, with slots from the app containers',
      allocation: [[d('a', 4000, 30)], [d('a', 1000, 10)], [d('a', 2000, 20)]],
      init: 1,
      want: [['a', use(2, 4000, 30)]],
    },
    {
      name: 'app sum above the init peak wins',
      allocation: [[d('a', 1000, 10)], [d('a', 3000, 40)], [d('a', 3000, 40)]],
      init: 1,
      want: [['a', use(2, 6000, 80)]],
    },
    {
      name: 'init containers take the peak, not the sum (they run one after another), one slot',
      allocation: [[d('a', 4000, 10)], [d('a', 6000, 5)], []],
      init: 2,
      want: [['a', use(1, 6000, 10)]],
    },
    {
      name: 'memory and cores are maxed independently',
      allocation: [[d('a', 4000, 10)], [d('a', 1000, 50)]],
      init: 1,
      want: [['a', use(1, 4000, 50)]],
    },
    {
      name: 'a GPU used only by an init container keeps one slot',
      allocation: [[d('i', 800, 0)], [d('a', 1000, 0)]],
      init: 1,
      want: [
        ['a', use(1, 1000, 0)],
        ['i', use(1, 800, 0)],
      ],
    },
    {
      name: 'a UUID repeated within one container is summed but takes one slot',
      allocation: [[d('a', 1000, 10), d('a', 1000, 10)]],
      init: 0,
      want: [['a', use(1, 2000, 20)]],
    },
    { name: 'GPU-less containers contribute nothing', allocation: [[], [], []], init: 1, want: [] },
    {
      name: 'an initContainerCount above the entries treats all as init',
      allocation: [[d('a', 100, 1)], [d('a', 200, 2)]],
      init: 5,
      want: [['a', use(1, 200, 2)]],
    },
  ];
  for (const { name, allocation, init, want } of cases) {
    it(name, () => {
      expect(entries(podDeviceUsage(allocation, init))).to.deep.equal(want);
    });
  }

  it('adds usage per GPU', () => {
    const into = new Map([['a', use(1, 1000, 10)]]);
    addUsage(
      into,
      new Map([
        ['a', use(2, 500, 5)],
        ['b', use(1, 100, 0)],
      ]),
    );
    expect(entries(into)).to.deep.equal([
      ['a', use(3, 1500, 15)],
      ['b', use(1, 100, 0)],
    ]);
  });

  it('subtracts usage, drops GPUs that become idle, floors at zero, ignores unknown GPUs', () => {
    const into = new Map([
      ['a', use(3, 1500, 15)],
      ['b', use(1, 100, 0)],
      ['c', use(1, 100, 10)],
    ]);
    subtractUsage(
      into,
      new Map([
        ['a', use(1, 500, 5)],
        ['b', use(1, 100, 0)],
        ['c', use(2, 500, 5)],
        ['z', use(1, 1, 1)],
      ]),
    );
    expect(entries(into)).to.deep.equal([
      ['a', use(2, 1000, 10)],
      ['c', use(0, 0, 5)],
    ]);
  });

  it('add then subtract restores the original', () => {
    const original = new Map([['a', use(1, 1000, 10)]]);
    const pod = podDeviceUsage([[d('a', 500, 5)], [d('b', 200, 0)]], 0);
    const into = copyUsage(original);
    addUsage(into, pod);
    subtractUsage(into, pod);
    expect(entries(into)).to.deep.equal(entries(original));
  });

  it('copies deeply', () => {
    const original = new Map([['a', use(1, 1000, 10)]]);
    const copy = copyUsage(original);
    addUsage(copy, new Map([['a', use(1, 1, 1)]]));
    copy.get('a')!.slots = 99;
    expect(original.get('a')).to.deep.equal(use(1, 1000, 10));
  });

  it('UsageOverlay reads through to its base and keeps its writes to itself', () => {
    const base = new Map<string, GpuUse>([['a', { slots: 1, memoryMiB: 100, cores: 10 }]]);
    const overlay = new UsageOverlay(base);
    expect(overlay.get('a')).to.deep.equal({ slots: 1, memoryMiB: 100, cores: 10 });
    expect(overlay.get('b')).to.equal(undefined);
    overlay.set('a', { slots: 2, memoryMiB: 300, cores: 20 });
    overlay.set('b', { slots: 1, memoryMiB: 50, cores: 0 });
    expect(overlay.get('a')).to.deep.equal({ slots: 2, memoryMiB: 300, cores: 20 });
    expect(overlay.get('b')).to.deep.equal({ slots: 1, memoryMiB: 50, cores: 0 });
    expect([...base]).to.deep.equal([['a', { slots: 1, memoryMiB: 100, cores: 10 }]]);
  });
});
