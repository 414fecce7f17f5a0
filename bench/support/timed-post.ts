import { type Agent, request } from 'node:https';

/** One extender call over the benches' keep-alive connection: the round trip in ms, the status and the answer. */
export function timedPost(
  agent: Agent,
  port: number,
  path: string,
  body: string,
): Promise<{ ms: number; status: number | undefined; text: string }> {
  return new Promise((done, fail) => {
    const started = performance.now();
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          done({ ms: performance.now() - started, status: res.statusCode, text: Buffer.concat(chunks).toString() });
        });
      },
    );
    req.on('error', fail);
    req.end(body);
  });
}
