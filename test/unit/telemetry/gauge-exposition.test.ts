import { expect } from 'chai';
import { Gauge, Registry } from 'prom-client';
import { escapeLabelValue, formatSampleValue, writeGaugeFamily } from '../../../src/telemetry/gauge-exposition.js';
import type { HamiFamily } from '../../../src/telemetry/hami-pod-metrics.js';
import { WardenMetrics } from '../../../src/telemetry/metrics.js';

interface Item { id: string; value: number }
const family: HamiFamily<Item> = {
  name: 'GPUDeviceThing', help: 'A thing\nper GPU \\ in MiB', labels: ['deviceuuid'],
  sample: (item) => (item.id === 'skip' ? undefined : { values: [item.id], value: item.value }),
};

describe('gauge exposition (HAMi families written at scrape time)', () => {
  it('writes HELP, TYPE and one line per kept item, constant labels first, as prom-client writes the same gauge', async () => {
    const items = [{ id: 'GPU-a', value: 3 }, { id: 'skip', value: 1 }, { id: 'we"ird\\id\nx', value: 0.5 }];
    const out: string[] = [];
    writeGaugeFamily(out, family, [['zone', 'vGPU']], items);
    const registry = new Registry();
    const gauge = new Gauge({ name: family.name, help: family.help, labelNames: ['zone', 'deviceuuid'], registers: [registry] });
    for (const item of items.filter((each) => each.id !== 'skip')) gauge.set({ zone: 'vGPU', deviceuuid: item.id }, item.value);
    expect(out.join('')).to.equal(await registry.metrics());
  });

  it('writes a family without samples as its HELP and TYPE lines, and special values as Prometheus spells them', () => {
    const out: string[] = [];
    writeGaugeFamily(out, family, [], []);
    expect(out.join('')).to.equal('# HELP GPUDeviceThing A thing\\nper GPU \\\\ in MiB\n# TYPE GPUDeviceThing gauge\n');
    expect([NaN, Infinity, -Infinity, 0, 1.5, 1e21].map(formatSampleValue)).to.deep.equal(['NaN', '+Inf', '-Inf', '0', '1.5', '1e+21']);
    expect(escapeLabelValue('a"b\\c\nd')).to.equal('a\\"b\\\\c\\nd');
  });

  it('WardenMetrics keeps nothing of the HAMi families between scrapes: a GPU gone from the source is gone from the next scrape', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    let gpus = [{ node: 'n1', uuid: 'GPU-a', index: 0, type: 'NVIDIA-A100', memoryMiB: 40_960, cores: 100, usedMemoryMiB: 1000, usedCores: 10, shared: 1 }];
    metrics.setGpuSource(() => gpus);
    expect(await metrics.text()).to.include('GPU-a');
    expect(metrics.registry.getSingleMetric('GPUDeviceMemoryLimit'), 'not a prom-client metric').to.equal(undefined);
    gpus = [];
    const after = await metrics.text();
    expect(after).not.to.include('GPU-a');
    expect(after).to.include('# TYPE GPUDeviceMemoryLimit gauge');
  });
});
