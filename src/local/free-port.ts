import { createServer } from 'node:net';

/**
 * Asks the kernel for a free TCP port on `host`. The port is released before it is returned, so a
 * caller that binds it later can lose a race; the launcher reports that as a start failure with the
 * process's own log.
 */
export function findFreePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host, port: 0, exclusive: true }, () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error(`could not read the port the kernel gave on ${host}`));
      });
    });
  });
}
