import { createServer } from 'node:net';
import { expect } from 'chai';
import { findFreePorts } from '../../../src/local/free-port.js';

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => { resolve(false); });
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => { server.close(() => { resolve(true); }); });
  });
}

describe('findFreePorts', () => {
  it('gives distinct ports within one call, every one released again', async () => {
    // 200 calls of 3: asked one by one, the kernel gave one fixture the same port twice (soak, 2026-12-02).
    for (let round = 0; round < 200; round++) {
      const ports = await findFreePorts(3);
      expect(new Set(ports).size, `ports ${ports.join(', ')}`).to.equal(3);
      if (round === 0) for (const port of ports) expect(await bindable(port), `port ${port} released`).to.equal(true);
    }
  });

  it('asks for nothing when no port is wanted', async () => {
    expect(await findFreePorts(0)).to.deep.equal([]);
  });
});
