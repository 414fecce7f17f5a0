import type { ClusterCache } from '../cluster/cluster-cache.js';
import { describeProblems, gpuRequestProblems, namesGpuResource } from '../devices/requests.js';
import { evaluateNode, viewPod, type PlacementDefaults, type PodView } from '../extender/gpu-placement.js';
import type { PodRef } from '../lock/lock-value.js';
import { clip, LABEL_CHARS } from '../base/user-text.js';
import { MESSAGE_CHARS, type ExplainLimits, type PlacementReport, type ReasonGroup } from './explanation.js';

interface Group {
  count: number;
  /** The smallest names seen, with their detail, kept sorted. */
  sample: { node: string; detail: string }[];
}

/** Keeps `sample` the `limit` entries with the smallest keys, sorted: linear in the nodes, whatever their number. */
function keepSmallest<T>(sample: T[], entry: T, key: (item: T) => string, limit: number): void {
  const last = sample[sample.length - 1];
  if (sample.length === limit && last !== undefined && key(entry) >= key(last)) return;
  let index = sample.length;
  while (index > 0 && key(sample[index - 1] as T) > key(entry)) index -= 1;
  sample.splice(index, 0, entry);
  if (sample.length > limit) sample.pop();
}

const itself = (name: string): string => name;
const byNode = (entry: { node: string }): string => entry.node;

/**
 * Filter's verdict for `pod` on every node of the store, from the same functions `/filter` calls
 * (viewPod, evaluateNode against the store's usage, the webhook's request validation), grouped by
 * HAMi's reason names. Pure over the store; bounded output (names capped per reason).
 */
export function placementOf(
  pod: unknown,
  ref: PodRef,
  cache: ClusterCache,
  defaults: PlacementDefaults,
  limits: ExplainLimits,
): PlacementReport {
  const nodes = cache.nodeNames();
  const report: PlacementReport = {
    error: null,
    evaluated: nodes.length,
    fitting: { count: 0, nodes: [] },
    failing: [],
    moreReasons: 0,
    lockedFitting: [],
  };
  if (namesGpuResource(pod)) {
    const unreadable = gpuRequestProblems(pod, defaults.requestDefaults);
    if (unreadable.length > 0)
      return { ...report, error: `unreadable GPU request: ${clip(describeProblems(unreadable), MESSAGE_CHARS)}` };
  }
  const view: PodView = viewPod(pod, defaults, cache);
  const groups = new Map<string, Group>();
  for (const node of nodes) {
    const evaluation = evaluateNode(cache, node, view);
    const shown = clip(node);
    if (evaluation.fits) {
      report.fitting.count += 1;
      keepSmallest(report.fitting.nodes, shown, itself, limits.fittingNames);
      if (lockedByOther(cache, node, ref)) keepSmallest(report.lockedFitting, shown, itself, limits.lockedFitting);
      continue;
    }
    for (const reason of Object.keys(evaluation.reasonCounts)) {
      let group = groups.get(reason);
      if (group === undefined) groups.set(reason, (group = { count: 0, sample: [] }));
      group.count += 1;
      keepSmallest(
        group.sample,
        { node: shown, detail: clip(evaluation.reason, MESSAGE_CHARS) },
        byNode,
        limits.namesPerReason,
      );
    }
  }
  const ranked: ReasonGroup[] = [...groups.entries()]
    .sort(([a, x], [b, y]) => y.count - x.count || (a < b ? -1 : a > b ? 1 : 0))
    .map(([reason, group]) => ({ reason: clip(reason, LABEL_CHARS), count: group.count, nodes: group.sample }));
  report.failing = ranked.slice(0, limits.reasons);
  report.moreReasons = ranked.length - report.failing.length;
  return report;
}

function lockedByOther(cache: ClusterCache, node: string, ref: PodRef): boolean {
  return cache.lockOf(node) !== undefined && !cache.lockHeldBy(node, ref);
}

/** "3 nodes: 2 CardInsufficientMemory, 1 NoGpuInventory" for the verdict line. */
export function reasonSummary(report: PlacementReport, shown = 3): string {
  const parts = report.failing.slice(0, shown).map((group) => `${group.count} ${group.reason}`);
  const more = report.failing.length > shown || report.moreReasons > 0 ? ', …' : '';
  return `${report.evaluated} ${report.evaluated === 1 ? 'node' : 'nodes'}: ${parts.join(', ')}${more}`;
}
