import { request } from 'node:http';

/** GET /metrics from a local metrics listener, as Prometheus text. */
export function scrapeMetrics(port: number): Promise<string> {
  return new Promise((done, fail) => {
    request({ host: '127.0.0.1', port, path: '/metrics' }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => { text += chunk.toString(); });
      res.on('end', () => { done(text); });
    }).on('error', fail).end();
  });
}
