import { createServer, type Server } from 'node:net';

function listenOnAnyPort(host: string): Promise<{ server: Server; port: number }> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host, port: 0, exclusive: true }, () => {
      const address = server.address();
      if (address !== null && typeof address === 'object') resolve({ server, port: address.port });
      else server.close(() => { reject(new Error(`could not read the port the kernel gave on ${host}`)); });
    });
  });
}

/**
 * Asks the kernel for `count` distinct free TCP ports on `host`. All of them stay bound until the
 * last is chosen: asked one after another, released in between, the kernel can give the same port
 * twice (it did: a fixture's webhook and metrics ports, 1 start in a few hundred). They are released
 * before they are returned, so a caller that binds one later can still lose a race to another
 * process; the launcher reports that as a start failure with the process's own log.
 */
export async function findFreePorts(count: number, host = '127.0.0.1'): Promise<number[]> {
  const held: Server[] = [];
  try {
    const ports: number[] = [];
    for (let index = 0; index < count; index++) {
      const { server, port } = await listenOnAnyPort(host);
      held.push(server);
      ports.push(port);
    }
    return ports;
  } finally {
    await Promise.all(held.map((server) => new Promise<void>((resolve) => { server.close(() => { resolve(); }); })));
  }
}

/** One free TCP port on `host` (see findFreePorts; ask for several at once when a process needs several). */
export async function findFreePort(host = '127.0.0.1'): Promise<number> {
  const [port] = await findFreePorts(1, host);
  if (port === undefined) throw new Error(`no free port on ${host}`);
  return port;
}
