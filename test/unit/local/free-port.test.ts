import { createServer } from 'node:net';
import { expect } from 'chai';
import { findFreePorts, listeningPortRange, parseEphemeralRange } from '../../../src/local/free-port.js';

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => {
      resolve(false);
    });
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => {
      server.close(() => {
        resolve(true);
      });
    });
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

  it('picks outside the kernel ephemeral range, where no bind to port 0 or outgoing connection can take the port', async () => {
    const range = listeningPortRange({ low: 32768, high: 60999 });
    expect(range).to.deep.equal({ low: 10000, high: 32767 });
    for (let round = 0; round < 50; round++) {
      for (const port of await findFreePorts(3, '127.0.0.1', range)) expect(port).to.be.within(10000, 32767);
    }
  });

  it('skips a port that is taken and keeps looking', async () => {
    // A range of two ports, one held: every pick must land on the other.
    const squatter = createServer();
    const taken = await new Promise<number>((resolve) => {
      squatter.listen({ host: '127.0.0.1', port: 0 }, () => {
        resolve((squatter.address() as { port: number }).port);
      });
    });
    try {
      for (let round = 0; round < 10; round++) {
        const [port] = await findFreePorts(1, '127.0.0.1', { low: taken, high: taken + 1 });
        expect(port).to.not.equal(taken);
      }
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  });

  it('reads ip_local_port_range and chooses the larger side only when the lower one is too small', () => {
    expect(parseEphemeralRange('32768\t60999\n')).to.deep.equal({ low: 32768, high: 60999 });
    expect(parseEphemeralRange('garbage')).to.equal(undefined);
    expect(parseEphemeralRange('61000 1024')).to.equal(undefined);
    expect(listeningPortRange({ low: 10500, high: 50000 })).to.deep.equal({ low: 50001, high: 65535 });
    expect(listeningPortRange({ low: 1024, high: 65000 })).to.equal(undefined);
    expect(listeningPortRange(undefined)).to.equal(undefined);
  });

  it('asks for nothing when no port is wanted', async () => {
    expect(await findFreePorts(0)).to.deep.equal([]);
  });
});
