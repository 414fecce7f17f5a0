/**
 * HAMi's per-GPU, per-container and quota gauge families written straight into Prometheus' text
 * format at scrape time, not through prom-client Gauges. A Gauge keeps every label set it was set
 * with until the next reset, and hashes each one: at 1000 nodes × 8 GPUs with 5000 GPU pods that is
 * 132,000 series, 33 MiB kept between scrapes; at 5000 nodes with 40,000 pods several times that,
 * more than the state store. Written here, a scrape keeps nothing once its answer is sent, and it
 * is written in pieces as the connection takes them: at 5000 nodes × 8 GPUs with 40,000 GPU pods
 * the answer has 720,000 series (19 MB for the 132,000 at 1000 nodes), which joined into one
 * string took serve past a 256 MiB heap (bench:scale). Pure.
 */
import type { HamiFamily } from './hami-pod-metrics.js';

/** Prometheus text format 0.0.4: a label value escapes backslash, double quote and newline. */
export function escapeLabelValue(value: string): string {
  return value.replace(/[\\"\n]/g, (character) => (character === '\\' ? '\\\\' : character === '"' ? '\\"' : '\\n'));
}

/** HELP text escapes backslash and newline. */
function escapeHelp(text: string): string {
  return text.replace(/[\\\n]/g, (character) => (character === '\\' ? '\\\\' : '\\n'));
}

/** A sample value as Prometheus writes it (Go's strconv with +Inf, -Inf and NaN spelled out). */
export function formatSampleValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}

/**
 * One gauge family: HELP and TYPE always (as prom-client writes a family with no samples), then a
 * line per item `family.sample` keeps, constant labels first. Items are read once, lazily.
 */
export function* gaugeFamilyLines<S>(
  family: HamiFamily<S>,
  constantLabels: readonly (readonly [string, string])[],
  items: Iterable<S>,
): Generator<string> {
  yield `# HELP ${family.name} ${escapeHelp(family.help)}\n# TYPE ${family.name} gauge\n`;
  const constant = constantLabels.map(([name, value]) => `${name}="${escapeLabelValue(value)}"`);
  for (const item of items) {
    const sample = family.sample(item);
    if (sample === undefined) continue;
    const labels = [
      ...constant,
      ...family.labels.map((name, index) => `${name}="${escapeLabelValue(sample.values[index] ?? '')}"`),
    ];
    yield `${family.name}${labels.length === 0 ? '' : `{${labels.join(',')}}`} ${formatSampleValue(sample.value)}\n`;
  }
}

/** Lines joined into pieces of about `bytes` characters: a stream writes a piece, not each line. */
export function* inPieces(lines: Iterable<string>, bytes = 64 * 1024): Generator<string> {
  let parts: string[] = [];
  let size = 0;
  for (const line of lines) {
    parts.push(line);
    size += line.length;
    if (size >= bytes) {
      yield parts.join('');
      parts = [];
      size = 0;
    }
  }
  if (parts.length > 0) yield parts.join('');
}
