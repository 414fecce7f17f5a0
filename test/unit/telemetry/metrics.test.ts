import { expect } from 'chai';
import { register as globalRegistry } from 'prom-client';
import { WardenMetrics, type LockSample } from '../../../src/telemetry/metrics.js';

/** The sample lines of one metric family (no HELP/TYPE), e.g. `name{labels} value`. */
function samplesOf(text: string, name: string): string[] {
  return text.split('\n').filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `));
}

describe('WardenMetrics', () => {
  it('exposes every documented family with HELP and TYPE, in its own registry', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    const text = await metrics.text();
    const families: [string, string][] = [
      ['vgpu_warden_node_locks_held', 'gauge'],
      ['vgpu_warden_node_lock_age_seconds', 'gauge'],
      ['vgpu_warden_lock_releases_total', 'counter'],
      ['vgpu_warden_lock_acquisitions_total', 'counter'],
      ['vgpu_warden_lock_contentions_total', 'counter'],
      ['vgpu_warden_stalled_lock_reports_total', 'counter'],
      ['vgpu_warden_bind_duration_seconds', 'histogram'],
      ['vgpu_warden_filter_duration_seconds', 'histogram'],
      ['vgpu_warden_admission_duration_seconds', 'histogram'],
      ['vgpu_warden_sweep_duration_seconds', 'histogram'],
      ['vgpu_warden_sweep_passes_total', 'counter'],
      ['vgpu_warden_unreadable_allocations', 'gauge'],
    ];
    for (const [name, type] of families) {
      expect(text).to.include(`# TYPE ${name} ${type}\n`);
      expect(text).to.match(new RegExp(`^# HELP ${name} \\S`, 'm'));
    }
    expect(await globalRegistry.metrics()).not.to.include('vgpu_warden_');
    expect(metrics.contentType).to.match(/^text\/plain; version=0\.0\.4/);
  });

  it('starts known label values at zero so the series exist before the first event', async () => {
    const text = await new WardenMetrics({ processMetrics: false }).text();
    expect(samplesOf(text, 'vgpu_warden_lock_acquisitions_total')).to.have.members([
      'vgpu_warden_lock_acquisitions_total{outcome="acquired"} 0',
      'vgpu_warden_lock_acquisitions_total{outcome="reentrant"} 0',
      'vgpu_warden_lock_acquisitions_total{outcome="taken-over"} 0',
    ]);
    expect(samplesOf(text, 'vgpu_warden_sweep_passes_total')).to.have.members([
      'vgpu_warden_sweep_passes_total{result="ok"} 0',
      'vgpu_warden_sweep_passes_total{result="error"} 0',
    ]);
  });

  it('counts lock outcomes with their labels', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    metrics.recordRelease('owner-not-found', 'sweeper');
    metrics.recordRelease('owner-not-found', 'sweeper');
    metrics.recordRelease('owner-request', 'bind-failure');
    metrics.recordExternalRelease('gpu-node-1');
    metrics.recordAcquisition('taken-over');
    metrics.recordContention();
    metrics.recordStalledReport();
    metrics.recordStalledReport();
    const text = await metrics.text();
    expect(samplesOf(text, 'vgpu_warden_lock_releases_total')).to.have.members([
      'vgpu_warden_lock_releases_total{reason="owner-not-found",path="sweeper"} 2',
      'vgpu_warden_lock_releases_total{reason="owner-request",path="bind-failure"} 1',
      'vgpu_warden_lock_releases_total{reason="external",path="device-plugin"} 1',
    ]);
    expect(samplesOf(text, 'vgpu_warden_lock_acquisitions_total')).to.include('vgpu_warden_lock_acquisitions_total{outcome="taken-over"} 1');
    expect(samplesOf(text, 'vgpu_warden_lock_contentions_total')).to.deep.equal(['vgpu_warden_lock_contentions_total 1']);
    expect(samplesOf(text, 'vgpu_warden_stalled_lock_reports_total')).to.deep.equal(['vgpu_warden_stalled_lock_reports_total 2']);
  });

  it('observes durations in seconds into histograms with their labels', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    metrics.observeBind(0.02, 'success');
    metrics.observeBind(26, 'error');
    metrics.observeFilter(0.0007);
    metrics.observeAdmission('DELETE', 0.004);
    metrics.observeAdmission('CREATE', 0.001);
    metrics.observeSweep(1.5, 'ok');
    metrics.observeSweep(0.2, 'error');
    const text = await metrics.text();
    expect(text).to.include('vgpu_warden_bind_duration_seconds_bucket{le="0.025",outcome="success"} 1');
    expect(text).to.include('vgpu_warden_bind_duration_seconds_bucket{le="25",outcome="error"} 0');
    expect(text).to.include('vgpu_warden_bind_duration_seconds_bucket{le="30",outcome="error"} 1');
    expect(text).to.include('vgpu_warden_bind_duration_seconds_count{outcome="error"} 1');
    expect(text).to.include('vgpu_warden_filter_duration_seconds_bucket{le="0.001"} 1');
    expect(text).to.include('vgpu_warden_filter_duration_seconds_sum 0.0007');
    expect(text).to.include('vgpu_warden_admission_duration_seconds_count{operation="DELETE"} 1');
    expect(text).to.include('vgpu_warden_admission_duration_seconds_count{operation="CREATE"} 1');
    expect(text).to.include('vgpu_warden_sweep_duration_seconds_count 2');
    expect(text).to.include('vgpu_warden_sweep_duration_seconds_sum 1.7');
    expect(samplesOf(text, 'vgpu_warden_sweep_passes_total')).to.have.members([
      'vgpu_warden_sweep_passes_total{result="ok"} 1',
      'vgpu_warden_sweep_passes_total{result="error"} 1',
    ]);
  });

  describe('node-lock gauges', () => {
    it('are absent while no lock source is set (this replica does not know)', async () => {
      const text = await new WardenMetrics({ processMetrics: false }).text();
      expect(samplesOf(text, 'vgpu_warden_node_locks_held')).to.deep.equal([]);
      expect(samplesOf(text, 'vgpu_warden_node_lock_age_seconds')).to.deep.equal([]);
    });

    it('are computed from the source on every scrape, with one call per scrape', async () => {
      const metrics = new WardenMetrics({ processMetrics: false });
      let samples: LockSample[] = [
        { node: 'gpu-a', ageSeconds: 12.5, state: 'held' },
        { node: 'gpu-b', ageSeconds: 400, state: 'stalled' },
        { node: 'gpu-c', ageSeconds: 90, state: 'releasable' },
        { node: 'gpu-d', ageSeconds: undefined, state: 'releasable' },
      ];
      let calls = 0;
      metrics.setLockSource(() => { calls++; return samples; });

      const first = await metrics.text();
      expect(calls).to.equal(1);
      expect(samplesOf(first, 'vgpu_warden_node_locks_held')).to.have.members([
        'vgpu_warden_node_locks_held{state="held"} 1',
        'vgpu_warden_node_locks_held{state="stalled"} 1',
        'vgpu_warden_node_locks_held{state="releasable"} 2',
      ]);
      expect(samplesOf(first, 'vgpu_warden_node_lock_age_seconds')).to.have.members([
        'vgpu_warden_node_lock_age_seconds{node="gpu-a"} 12.5',
        'vgpu_warden_node_lock_age_seconds{node="gpu-b"} 400',
        'vgpu_warden_node_lock_age_seconds{node="gpu-c"} 90',
      ]);

      samples = [{ node: 'gpu-a', ageSeconds: 20, state: 'held' }];
      const second = await metrics.text();
      expect(calls).to.equal(2);
      expect(samplesOf(second, 'vgpu_warden_node_locks_held')).to.have.members([
        'vgpu_warden_node_locks_held{state="held"} 1',
        'vgpu_warden_node_locks_held{state="stalled"} 0',
        'vgpu_warden_node_locks_held{state="releasable"} 0',
      ]);
      expect(samplesOf(second, 'vgpu_warden_node_lock_age_seconds')).to.deep.equal(['vgpu_warden_node_lock_age_seconds{node="gpu-a"} 20']);
    });

    it('are left out when the source answers undefined (not known on this replica)', async () => {
      const metrics = new WardenMetrics({ processMetrics: false });
      metrics.setLockSource(() => undefined);
      const text = await metrics.text();
      expect(samplesOf(text, 'vgpu_warden_node_locks_held')).to.deep.equal([]);
      expect(samplesOf(text, 'vgpu_warden_lock_source_errors_total')).to.deep.equal(['vgpu_warden_lock_source_errors_total 0']);
    });

    it('accept an async source', async () => {
      const metrics = new WardenMetrics({ processMetrics: false });
      metrics.setLockSource(() => Promise.resolve([{ node: 'gpu-a', ageSeconds: 3, state: 'held' }]));
      expect(await metrics.text()).to.include('vgpu_warden_node_lock_age_seconds{node="gpu-a"} 3');
    });

    it('leave the lock gauges out, count the failure and keep the rest of the scrape when the source fails', async () => {
      const seen: unknown[] = [];
      const metrics = new WardenMetrics({ processMetrics: false, onLockSourceError: (error) => seen.push(error) });
      metrics.setLockSource(() => { throw new Error('cache not synced'); });
      metrics.recordContention();
      const text = await metrics.text();
      expect(samplesOf(text, 'vgpu_warden_node_locks_held')).to.deep.equal([]);
      expect(samplesOf(text, 'vgpu_warden_lock_source_errors_total')).to.deep.equal(['vgpu_warden_lock_source_errors_total 1']);
      expect(samplesOf(text, 'vgpu_warden_lock_contentions_total')).to.deep.equal(['vgpu_warden_lock_contentions_total 1']);
      expect(seen).to.have.length(1);
    });
  });

  it('counts pods with an unreadable allocation by how they are counted, absent without a source', async () => {
    const metrics = new WardenMetrics({ processMetrics: false });
    expect(samplesOf(await metrics.text(), 'vgpu_warden_unreadable_allocations')).to.deep.equal([]);
    metrics.setUnreadableAllocationSource(() => [{ counted: 'whole-node' }, { counted: 'last-readable' }, { counted: 'whole-node' }]);
    expect(samplesOf(await metrics.text(), 'vgpu_warden_unreadable_allocations')).to.have.members([
      'vgpu_warden_unreadable_allocations{counted="last-readable"} 1',
      'vgpu_warden_unreadable_allocations{counted="whole-node"} 2',
    ]);
    metrics.setUnreadableAllocationSource(() => []);
    expect(samplesOf(await metrics.text(), 'vgpu_warden_unreadable_allocations')).to.have.members([
      'vgpu_warden_unreadable_allocations{counted="last-readable"} 0',
      'vgpu_warden_unreadable_allocations{counted="whole-node"} 0',
    ]);
  });

  it('adds the standard process metrics when asked, unprefixed as Prometheus expects', async () => {
    const text = await new WardenMetrics().text();
    expect(text).to.include('# TYPE process_cpu_seconds_total counter');
    expect(text).to.include('# TYPE nodejs_eventloop_lag_seconds gauge');
  });
});
