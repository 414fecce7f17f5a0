import { httpGet } from './http-get.js';

/** GET /metrics from a local metrics listener, as Prometheus text (whatever the status). */
export async function scrapeMetrics(port: number): Promise<string> {
  return (await httpGet(port, '/metrics')).body;
}

/** One series of a Prometheus text exposition. */
export interface Series {
  labels: Record<string, string>;
  value: number;
}

/** The series of one family in a Prometheus text exposition, labels parsed (escapes undone). */
export function seriesOf(text: string, name: string): Series[] {
  const found: Series[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const labels: Record<string, string> = {};
    const body = /^[^{ ]*\{(.*)\} /.exec(line)?.[1] ?? '';
    for (const match of body.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[match[1] ?? ''] = (match[2] ?? '').replace(/\\(.)/g, (_all, char: string) => (char === 'n' ? '\n' : char));
    }
    found.push({ labels, value: Number(line.slice(line.lastIndexOf(' ') + 1)) });
  }
  return found;
}

/** The value of the one series of `name` whose labels include all of `labels`, if any. */
export function seriesValue(text: string, name: string, labels: Record<string, string>): number | undefined {
  return seriesOf(text, name).find((series) =>
    Object.entries(labels).every(([key, value]) => series.labels[key] === value),
  )?.value;
}
