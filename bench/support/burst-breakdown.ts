// Where a burst's time went, from the components' own metrics, read before and after the burst:
// kube-scheduler's scheduling cycle split into its plugins and the rest (the extender calls:
// round trips, JSON of the names, the extender's work), serve's extender calls split by verb and
// phase (vgpu_warden_extender_request_seconds), and serve's event-loop delay over the burst
// (prom-client resets it at each scrape, so the scrape before the burst starts it afresh).
import https from 'node:https';

/** Prometheus exposition text → value per series line (`name{labels}`), histograms' _sum and _count only. */
export function seriesOf(text: string): Map<string, number> {
  const series = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const match = /^([a-zA-Z0-9_:]+(?:_sum|_count|_seconds)(?:\{[^}]*\})?) ([0-9.eE+-]+|NaN)$/.exec(line);
    if (match?.[1] !== undefined) series.set(match[1], Number(match[2]));
  }
  return series;
}

/** GET over TLS without verifying (a local plane's self-signed port), for kube-scheduler's /metrics. */
export function fetchInsecure(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    https
      .get(url, { rejectUnauthorized: false }, (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => {
          resolve(text);
        });
      })
      .on('error', reject);
  });
}

type Series = Map<string, number>;

/** The change of every series whose name and labels contain all of `parts`, summed. */
function delta(before: Series, after: Series, ...parts: string[]): number {
  let total = 0;
  for (const [key, value] of after)
    if (parts.every((part) => key.includes(part))) total += value - (before.get(key) ?? 0);
  return total;
}

const ms = (seconds: number, per: number): string => (per > 0 ? ((seconds * 1000) / per).toFixed(2) : '-');

/**
 * kube-scheduler's cycle per pod: the whole attempt, the algorithm (filter and score with the
 * extender calls), and its plugins' extension points; what the algorithm spends beyond its
 * plugins is the extender calls as kube-scheduler sees them.
 */
export function schedulerLines(before: Series, after: Series, pods: number): string[] {
  const point = (name: string) =>
    delta(before, after, 'scheduler_framework_extension_point_duration_seconds_sum', `extension_point="${name}"`);
  const attempt = delta(before, after, 'scheduler_scheduling_attempt_duration_seconds_sum');
  const algorithm = delta(before, after, 'scheduler_scheduling_algorithm_duration_seconds_sum');
  const plugins = ['PreFilter', 'Filter', 'PreScore', 'Score'].map((name) => [name, point(name)] as const);
  const pluginTotal = plugins.reduce((sum, [, seconds]) => sum + seconds, 0);
  return [
    `kube-scheduler ms per pod: attempt ${ms(attempt, pods)}, algorithm ${ms(algorithm, pods)} = ` +
      `${plugins.map(([name, seconds]) => `${name} ${ms(seconds, pods)}`).join(' + ')} + ` +
      `extender calls and the rest ${ms(algorithm - pluginTotal, pods)}; ` +
      `Bind ${ms(point('Bind'), pods)} (the extender's bind, with its lock wait)`,
  ];
}

/** serve's extender calls: per verb, the calls and the mean ms of each phase. */
export function serveLines(before: Series, after: Series): string[] {
  return ['filter', 'prioritize', 'bind'].map((verb) => {
    const calls = delta(before, after, 'vgpu_warden_extender_request_seconds_count', `verb="${verb}"`, 'phase="read"');
    const phases = ['read', 'decode', 'handle', 'answer'].map(
      (phase) =>
        `${phase} ${ms(delta(before, after, 'vgpu_warden_extender_request_seconds_sum', `verb="${verb}"`, `phase="${phase}"`), calls)}`,
    );
    return `serve ${verb}: ${calls} calls, mean ms ${phases.join(', ')}`;
  });
}

/** serve's event-loop delay over the burst (prom-client's monitorEventLoopDelay, reset by the scrape before). */
export function eventLoopLine(after: Series): string {
  const value = (name: string) => ((after.get(name) ?? Number.NaN) * 1000).toFixed(1);
  return (
    `serve event-loop delay over the burst: mean ${value('nodejs_eventloop_lag_mean_seconds')} ms, ` +
    `p99 ${value('nodejs_eventloop_lag_p99_seconds')} ms, max ${value('nodejs_eventloop_lag_max_seconds')} ms`
  );
}
