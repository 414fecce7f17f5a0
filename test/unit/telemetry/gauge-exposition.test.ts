import { expect } from 'chai';
import { Gauge, Registry } from 'prom-client';
import {
  escapeLabelValue,
  formatSampleValue,
  gaugeFamilyLines,
  inPieces,
} from '../../../src/telemetry/gauge-exposition.js';
import type { HamiFamily } from '../../../src/telemetry/hami-pod-metrics.js';
import { WardenMetrics } from '../../../src/telemetry/metrics.js';

interface Item {
  id: string;
  value: number;
}
const family: HamiFamily<Item> = {
  name: 'GPUDeviceThing',
  help: 'A thing\nper GPU \\ in MiB',
  labels: ['deviceuuid'],
  sample: (item) => (item.id === 'skip' ? undefined : { values: [item.id], value: item.value }),
};

describe('gauge exposition (HAMi families written at scrape time)', () => {
  it('writes HELP, TYPE and one line per kept item, constant labels first, as prom-client writes the same gauge', async () => {
    const items = [
      { id: 'GPU-a', value: 3 },
      { id: 'skip', value: 1 },
      { id: 'we"ird\\id\nx', value: 0.5 },
    ];
    const out = [...gaugeFamilyLines(family, [['zone', 'vGPU']], items)];
    const registry = new Registry();
    const gauge = new Gauge({
      name: family.name,
      help: family.help,
      labelNames: ['zone', 'deviceuuid'],
      registers: [registry],
    });
    for (const item of items.filter((each) => each.id !== 'skip'))
      gauge.set({ zone: 'vGPU', deviceuuid: item.id }, item.value);
    expect(out.join('')).to.equal(await registry.metrics());
  });

  it('writes a family without samples as its HELP and TYPE lines, and special values as Prometheus spells them', () => {
    const out = [...gaugeFamilyLines(family, [], [])];
    expect(out.join('')).to.equal('# HELP GPUDeviceThing A thing\\nper GPU \\\\ in MiB\n# TYPE GPUDeviceThing gauge\n');
    expect([NaN, Infinity, -Infinity, 0, 1.5, 1e21].map(formatSampleValue)).to.deep.equal([
      'NaN',
      '+Inf',
      '-Inf',
      '0',
      '1.5',
      '1e+21',
    ]);
    expect(escapeLabelValue('a"b\\c\nd')).to.equal('a\\"b\\\\c\\nd');
  });

  it('inPieces joins lines into pieces of about the given size, and reads lines only as pieces are asked for', () => {
    let read = 0;
    function* lines() {
      for (let index = 0; index < 10; index++) {
        read++;
        yield `line-${index}\n`;
      }
    }
    const pieces = inPieces(lines(), 14);
    expect(pieces.next().value).to.equal('line-0\nline-1\n');
    expect(read, 'lazily').to.equal(2);
    const rest = [...pieces];
    expect(rest).to.have.length(4);
    expect(rest.join('')).to.equal(Array.from({ length: 8 }, (_, index) => `line-${index + 2}\n`).join(''));
    expect([...inPieces([])]).to.deep.equal([]);
  });

  it("LEGACY_METRICS=false leaves out exactly HAMi's legacy names, and keeps the hami_* families", async () => {
    const gpu = {
      node: 'n1',
      uuid: 'GPU-a',
      index: 0,
      type: 'NVIDIA-A100',
      memoryMiB: 40_960,
      cores: 100,
      usedMemoryMiB: 1000,
      usedCores: 10,
      shared: 1,
    };
    const share = {
      namespace: 'ml',
      node: 'n1',
      pod: 'p',
      containerIndex: 0,
      uuid: 'GPU-a',
      memoryMiB: 1000,
      cores: 10,
      gpuCores: 100,
    };
    const quota = { namespace: 'ml', resource: 'nvidia.com/gpu', limit: 4, used: 1 };
    const families = async (legacyNames: boolean) => {
      const metrics = new WardenMetrics({ processMetrics: false, legacyNames });
      metrics.setGpuSource(() => [gpu]);
      metrics.setContainerAllocationSource(() => [share]);
      metrics.setQuotaSource(() => [quota]);
      return [...(await metrics.text()).matchAll(/^# TYPE (\S+) gauge$/gm)]
        .map((match) => match[1] ?? '')
        .filter((name) => !name.startsWith('vgpu_warden_'));
    };
    const all = await families(true);
    const current = await families(false);
    expect(all.filter((name) => !current.includes(name)).sort()).to.deep.equal([
      'GPUDeviceCoreAllocated',
      'GPUDeviceCoreLimit',
      'GPUDeviceMemoryAllocated',
      'GPUDeviceMemoryLimit',
      'GPUDeviceSharedNum',
      'QuotaUsed',
      'nodeGPUMemoryPercentage',
      'nodeGPUOverview',
      'vGPUCoreAllocated',
      'vGPUMemoryAllocated',
    ]);
    expect(
      current.every((name) => name.startsWith('hami_')),
      current.join(', '),
    ).to.equal(true);
    expect(current).to.have.length(11);
  });

  it('WardenMetrics keeps nothing of the HAMi families between scrapes: a GPU gone from the source is gone from the next scrape', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    let gpus = [
      {
        node: 'n1',
        uuid: 'GPU-a',
        index: 0,
        type: 'NVIDIA-A100',
        memoryMiB: 40_960,
        cores: 100,
        usedMemoryMiB: 1000,
        usedCores: 10,
        shared: 1,
      },
    ];
    metrics.setGpuSource(() => gpus);
    expect(await metrics.text()).to.include('GPU-a');
    expect(metrics.registry.getSingleMetric('GPUDeviceMemoryLimit'), 'not a prom-client metric').to.equal(undefined);
    gpus = [];
    const after = await metrics.text();
    expect(after).not.to.include('GPU-a');
    expect(after).to.include('# TYPE GPUDeviceMemoryLimit gauge');
  });
});
