import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import {
  HAMI_CONTAINER_FAMILIES,
  HAMI_QUOTA_FAMILIES,
  type ContainerAllocationSample,
  type ContainerAllocationSource,
  type HamiFamily,
  type QuotaSample,
  type QuotaSource,
} from './hami-pod-metrics.js';
import { gaugeFamilyLines, inPieces } from './gauge-exposition.js';
import { HAMI_GPU_FAMILIES, type GpuSample, type GpuSource } from './gpu-samples.js';

export type {
  ContainerAllocationSample,
  ContainerAllocationSource,
  QuotaSample,
  QuotaSource,
} from './hami-pod-metrics.js';

/** One locked node as the lock gauges see it at scrape time. */
export interface LockSample {
  node: string;
  /** Undefined when the lock carries no readable time (a malformed value). */
  ageSeconds: number | undefined;
  /** held, stalled or releasable (lock-rules.ts); other values are counted under their own label. */
  state: string;
}

/**
 * Called on every scrape, on the leader only (LeadershipSource); may answer from a cache (cheap) or
 * read the cluster (async). Undefined means "not known here" (e.g. a store not synced yet): the
 * lock gauges are left out rather than reported as zero, so summing over replicas stays right.
 */
export type LockSource = () => readonly LockSample[] | undefined | Promise<readonly LockSample[] | undefined>;

/**
 * Pods whose hami.io/vgpu-devices-allocated cannot be decoded now, each with how it is counted
 * meanwhile (PodUsageIndex); undefined when not known here.
 */
export type UnreadableAllocationSource = () => readonly { counted: string }[] | undefined;

/**
 * Whether this replica leads now (in `serve`, the sweeper's Lease elector; always true without
 * leader election). Asked at every scrape: the cluster-wide families (HAMi's, the node-lock and
 * unreadable-allocation gauges) are exported by the leader only, as HAMi's scheduler does, so that
 * `sum()` and `count()` over every replica count each GPU once. Followers export their own process
 * and request metrics.
 */
export type LeadershipSource = () => boolean;

/**
 * HAMi's per-GPU scheduler metric families (cmd/scheduler/metrics.go), with its names, label names
 * and values: the current `hami_*` names and the legacy ones its older dashboards use. The
 * per-container and quota families are in hami-pod-metrics.ts. HAMi wraps its registry with the
 * constant label zone="vGPU"; so do we, so queries written for HAMi match.
 */
const HAMI_ZONE = 'vGPU';

export type BindOutcome = 'success' | 'error';
export type SweepResult = 'ok' | 'error';
export type AcquisitionOutcome = 'acquired' | 'reentrant' | 'taken-over';

export interface WardenMetricsOptions {
  /**
   * Also expose the standard process_* and nodejs_* metrics (CPU, memory, event-loop lag, GC) on
   * this registry, under their conventional unprefixed names. Default true; tests that build many
   * instances turn it off.
   */
  processMetrics?: boolean;
  /** Told when the lock source fails; that scrape then leaves the lock gauges out. */
  onLockSourceError?: (error: unknown) => void;
  /** LEGACY_METRICS: also write HAMi's legacy family names (default true). */
  legacyNames?: boolean;
  /** The version in vgpu_warden_build_info (package.json's, read once at start); default "unknown". */
  version?: string;
}

const PREFIX = 'vgpu_warden_';
const LOCK_STATES = ['held', 'stalled', 'releasable'] as const;

// A bind may wait up to BIND_LOCK_WAIT (25 s) for a busy node, under the extender's 30 s timeout.
const BIND_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 30];
// Filter is pure computation over the cache; sub-millisecond is the normal case.
const FILTER_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 10];
// A DELETE release is bounded by WEBHOOK_DELETE_TIMEOUT (3 s) and the apiserver's 10 s call timeout.
const ADMISSION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
// A pass touches every locked node, 16 at a time: seconds on a large cluster, never past a minute.
const SWEEP_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * vgpu-warden's Prometheus metrics on a registry of its own (never prom-client's global one, so
 * tests and embedded uses can hold several). Names follow Prometheus conventions: the
 * `vgpu_warden_` prefix, seconds as the unit, `_total` for counters.
 */
export class WardenMetrics {
  readonly registry = new Registry();

  private readonly onLockSourceError: (error: unknown) => void;
  private readonly legacyNames: boolean;
  private lockSource: LockSource | undefined;
  private unreadableAllocationSource: UnreadableAllocationSource | undefined;
  private gpuSource: GpuSource | undefined;
  private containerAllocationSource: ContainerAllocationSource | undefined;
  private quotaSource: QuotaSource | undefined;
  private lockSnapshot: Promise<readonly LockSample[] | undefined> | undefined;
  private leadership: LeadershipSource = () => true;

  private readonly releases: Counter<'reason' | 'path'>;
  private readonly acquisitions: Counter<'outcome'>;
  private readonly contentions: Counter;
  private readonly stalledReports: Counter;
  private readonly lockSourceErrors: Counter;
  private readonly bindDuration: Histogram<'outcome'>;
  private readonly filterDuration: Histogram;
  private readonly extenderPhases: Histogram<'verb' | 'phase'>;
  private readonly admissionDuration: Histogram<'operation'>;
  private readonly sweepDuration: Histogram;
  private readonly sweepPasses: Counter<'result'>;

  constructor(options: WardenMetricsOptions = {}) {
    this.onLockSourceError = options.onLockSourceError ?? (() => undefined);
    this.legacyNames = options.legacyNames ?? true;
    const registers = [this.registry];
    this.registerScrapeGauges(registers, options.version ?? 'unknown');

    this.releases = new Counter({
      name: `${PREFIX}lock_releases_total`,
      help:
        'Node locks released, by lock-rules reason and by path (owner, bind-failure, webhook, watch, sweeper, ' +
        'takeover; device-plugin for locks that vanished without us)',
      labelNames: ['reason', 'path'],
      registers,
    });
    this.acquisitions = new Counter({
      name: `${PREFIX}lock_acquisitions_total`,
      help: 'Node locks taken, by outcome (acquired a free node, reentrant, taken-over from a releasable lock)',
      labelNames: ['outcome'],
      registers,
    });
    this.contentions = new Counter({
      name: `${PREFIX}lock_contentions_total`,
      help: 'Lock attempts refused because another pod holds the node lock (held or stalled)',
      registers,
    });
    this.stalledReports = new Counter({
      name: `${PREFIX}stalled_lock_reports_total`,
      help: 'Times a stalled lock (held past NODELOCK_EXPIRE, kept) was reported',
      registers,
    });
    this.lockSourceErrors = new Counter({
      name: `${PREFIX}lock_source_errors_total`,
      help: 'Scrapes whose node-lock gauges could not be computed (the gauges are left out of that scrape)',
      registers,
      // Waits for this scrape's lock snapshot, so a failure is counted in the scrape that saw it.
      collect: async () => {
        await this.samples();
      },
    });
    this.bindDuration = new Histogram({
      name: `${PREFIX}bind_duration_seconds`,
      help: 'Scheduler extender bind calls, by outcome',
      labelNames: ['outcome'],
      buckets: BIND_BUCKETS,
      registers,
    });
    this.filterDuration = new Histogram({
      name: `${PREFIX}filter_duration_seconds`,
      help: 'Scheduler extender filter calls',
      buckets: FILTER_BUCKETS,
      registers,
    });
    this.extenderPhases = new Histogram({
      name: `${PREFIX}extender_request_seconds`,
      help:
        'Where scheduler extender calls spend their time, by verb (filter, prioritize, bind) and phase: read ' +
        '(the body, after the headers), decode (JSON and validation), handle, answer (encode and write)',
      labelNames: ['verb', 'phase'],
      buckets: FILTER_BUCKETS,
      registers,
    });
    this.admissionDuration = new Histogram({
      name: `${PREFIX}admission_duration_seconds`,
      help: 'Admission webhook reviews, by operation (CREATE, DELETE, ...)',
      labelNames: ['operation'],
      buckets: ADMISSION_BUCKETS,
      registers,
    });
    this.sweepDuration = new Histogram({
      name: `${PREFIX}sweep_duration_seconds`,
      help: 'Lock sweeper passes',
      buckets: SWEEP_BUCKETS,
      registers,
    });
    this.sweepPasses = new Counter({
      name: `${PREFIX}sweep_passes_total`,
      help: 'Lock sweeper passes, by result',
      labelNames: ['result'],
      registers,
    });

    // Known label values start at zero, so rate() and alerts see the series before the first event.
    for (const outcome of ['acquired', 'reentrant', 'taken-over'] as const) this.acquisitions.inc({ outcome }, 0);
    for (const result of ['ok', 'error'] as const) this.sweepPasses.inc({ result }, 0);

    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry });
  }

  /** The gauges computed at scrape time (lock states and ages, unreadable allocations, leadership), and build_info. */
  private registerScrapeGauges(registers: Registry[], version: string): void {
    // prom-client calls collect() on every scrape; arrow functions keep `this` the WardenMetrics.
    const held: Gauge<'state'> = new Gauge({
      name: `${PREFIX}node_locks_held`,
      help: 'Node locks (hami.io/mutex.lock) present now, by lock-rules state',
      labelNames: ['state'],
      registers,
      collect: async () => {
        const samples = await this.samples();
        held.reset();
        if (samples === undefined) return;
        // Every documented state is always present, so "no stalled locks" is a 0 and not a gap.
        const counts = new Map<string, number>(LOCK_STATES.map((state) => [state, 0]));
        for (const sample of samples) counts.set(sample.state, (counts.get(sample.state) ?? 0) + 1);
        for (const [state, count] of counts) held.set({ state }, count);
      },
    });
    const age: Gauge<'node'> = new Gauge({
      name: `${PREFIX}node_lock_age_seconds`,
      help: 'Age of the node lock on each locked node (nodes without a lock, or with an unreadable one, are absent)',
      labelNames: ['node'],
      registers,
      collect: async () => {
        const samples = await this.samples();
        // Reset first: a node whose lock went away must drop out, not keep its last age.
        age.reset();
        for (const sample of samples ?? []) {
          if (sample.ageSeconds !== undefined) age.set({ node: sample.node }, sample.ageSeconds);
        }
      },
    });

    const unreadable: Gauge<'counted'> = new Gauge({
      name: `${PREFIX}unreadable_allocations`,
      help:
        'Pods whose hami.io/vgpu-devices-allocated cannot be decoded, by how they are counted meanwhile ' +
        '(last-readable: their last readable allocation; whole-node: every GPU of their node)',
      labelNames: ['counted'],
      registers,
      collect: () => {
        unreadable.reset();
        if (!this.leading()) return;
        const pods = this.unreadableAllocationSource?.();
        if (pods === undefined) return;
        const counts = new Map<string, number>([
          ['last-readable', 0],
          ['whole-node', 0],
        ]);
        for (const pod of pods) counts.set(pod.counted, (counts.get(pod.counted) ?? 0) + 1);
        for (const [counted, count] of counts) unreadable.set({ counted }, count);
      },
    });

    const leader: Gauge = new Gauge({
      name: `${PREFIX}leader`,
      help:
        'Whether this replica leads (1) or not (0): only the leader sweeps and exports the cluster-wide ' +
        "families (HAMi's, node-lock and unreadable-allocation gauges)",
      registers,
      collect: () => {
        leader.set(this.leading() ? 1 : 0);
      },
    });
    new Gauge({
      name: `${PREFIX}build_info`,
      help: 'Always 1, labelled with the vgpu-warden version this process runs',
      labelNames: ['version'],
      registers,
    }).set({ version: version }, 1);
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /**
   * The Prometheus text exposition in pieces: the registry's metrics first (node-lock gauges
   * computed now; the one part that can fail, so a failure comes before any piece), then HAMi's
   * families written from their sources as the reader asks for them (gauge-exposition.ts: nothing
   * of them outlives the scrape, and no more than a piece is held at a time).
   */
  async *exposition(): AsyncGenerator<string> {
    const registered = await this.registry.metrics();
    yield registered === '' || registered.endsWith('\n') ? registered : `${registered}\n`;
    if (!this.leading()) return;
    // Each source is read once per scrape and shared by the families built from it.
    yield* inPieces(
      this.hamiLines(this.gpuSource?.() ?? [], this.containerAllocationSource?.() ?? [], this.quotaSource?.() ?? []),
    );
  }

  /** The whole exposition as one string (tests, small registries). */
  async text(): Promise<string> {
    const pieces: string[] = [];
    for await (const piece of this.exposition()) pieces.push(piece);
    return pieces.join('');
  }

  private *hamiLines(
    gpus: readonly GpuSample[],
    containers: readonly ContainerAllocationSample[],
    quotas: readonly QuotaSample[],
  ): Generator<string> {
    const zone = [['zone', HAMI_ZONE]] as const;
    const wanted = <S>(family: HamiFamily<S>) => this.legacyNames || family.legacy !== true;
    for (const family of HAMI_GPU_FAMILIES.filter(wanted)) yield* gaugeFamilyLines(family, zone, gpus);
    for (const family of HAMI_CONTAINER_FAMILIES.filter(wanted)) yield* gaugeFamilyLines(family, zone, containers);
    for (const family of HAMI_QUOTA_FAMILIES.filter(wanted)) yield* gaugeFamilyLines(family, zone, quotas);
  }

  /**
   * Who leads: a follower leaves HAMi's families and the node-lock and unreadable-allocation gauges
   * out of its scrapes. Without a source this process counts as the leader (it runs alone).
   */
  setLeadership(source: LeadershipSource): void {
    this.leadership = source;
  }

  /** Where the node-lock gauges come from; without a source they are absent (this replica does not know). */
  setLockSource(source: LockSource | undefined): void {
    this.lockSource = source;
  }

  /** Where the unreadable-allocation gauge comes from; without a source it is absent. */
  setUnreadableAllocationSource(source: UnreadableAllocationSource | undefined): void {
    this.unreadableAllocationSource = source;
  }

  /** Where HAMi's per-GPU families come from; without a source they are absent. */
  setGpuSource(source: GpuSource | undefined): void {
    this.gpuSource = source;
  }

  /** Where HAMi's per-container families (hami_vgpu_*, vGPU*Allocated) come from; without a source they are absent. */
  setContainerAllocationSource(source: ContainerAllocationSource | undefined): void {
    this.containerAllocationSource = source;
  }

  /** Where HAMi's quota families (hami_resource_quota_*, QuotaUsed) come from; without a source they are absent. */
  setQuotaSource(source: QuotaSource | undefined): void {
    this.quotaSource = source;
  }

  recordRelease(reason: string, path: string): void {
    this.releases.inc({ reason, path });
  }

  /**
   * A lock disappeared without any release of ours: normally the device plugin deleting it after
   * Allocate. The node is not a label: releases are counted cluster-wide by reason and path, and
   * the per-node view is node_lock_age_seconds.
   */
  recordExternalRelease(_node: string): void {
    this.releases.inc({ reason: 'external', path: 'device-plugin' });
  }

  recordAcquisition(outcome: AcquisitionOutcome): void {
    this.acquisitions.inc({ outcome });
  }

  recordContention(): void {
    this.contentions.inc();
  }

  recordStalledReport(): void {
    this.stalledReports.inc();
  }

  observeBind(seconds: number, outcome: BindOutcome): void {
    this.bindDuration.observe({ outcome }, seconds);
  }

  observeFilter(seconds: number): void {
    this.filterDuration.observe(seconds);
  }

  /** One extender call's phases, in ms (extender-app.ts's ExtenderPhases). */
  observeExtenderCall(
    verb: 'filter' | 'prioritize' | 'bind',
    phases: Readonly<Record<'read' | 'decode' | 'handle' | 'answer', number>>,
  ): void {
    for (const [phase, ms] of Object.entries(phases)) this.extenderPhases.observe({ verb, phase }, ms / 1000);
  }

  observeAdmission(operation: string, seconds: number): void {
    this.admissionDuration.observe({ operation }, seconds);
  }

  observeSweep(seconds: number, result: SweepResult): void {
    this.sweepDuration.observe(seconds);
    this.sweepPasses.inc({ result });
  }

  private leading(): boolean {
    return this.leadership();
  }

  /**
   * Both lock gauges collect in the same scrape (prom-client starts every collect before awaiting
   * any), so they share one call of the source: one consistent view, and one cluster read when
   * the source is not cached.
   */
  private samples(): Promise<readonly LockSample[] | undefined> {
    const source = this.lockSource;
    if (source === undefined || !this.leading()) return Promise.resolve(undefined);
    this.lockSnapshot ??= Promise.resolve()
      .then(source)
      .catch((error: unknown) => {
        this.lockSourceErrors.inc();
        this.onLockSourceError(error);
        return undefined;
      })
      .finally(() => {
        this.lockSnapshot = undefined;
      });
    return this.lockSnapshot;
  }
}
