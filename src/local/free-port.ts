import { readFileSync } from 'node:fs';
import { randomInt } from 'node:crypto';
import { createServer, type Server } from 'node:net';

export interface PortRange {
  readonly low: number;
  readonly high: number;
}

/** The lowest port we hand out: below it sit the well-known and commonly configured service ports. */
const LOWEST_PORT = 10_000;
/** A range narrower than this would make random picks collide with each other too often. */
const MIN_RANGE_SIZE = 1000;
const ATTEMPTS_PER_PORT = 50;
const EPHEMERAL_RANGE_FILE = '/proc/sys/net/ipv4/ip_local_port_range';

/** Reads `ip_local_port_range` ("32768\t60999"); undefined when it cannot be read or makes no sense. */
export function parseEphemeralRange(text: string): PortRange | undefined {
  const match = /^\s*(\d{1,5})\s+(\d{1,5})\s*$/.exec(text);
  if (match === null) return undefined;
  const low = Number(match[1]);
  const high = Number(match[2]);
  if (low < 1 || high > 65_535 || low > high) return undefined;
  return { low, high };
}

/**
 * Where to pick listening ports so that the kernel never gives the same port to anyone else: outside
 * its ephemeral range, which serves every bind to port 0 and every outgoing connection's source port.
 * A port picked inside it can be taken between our check and the component's bind by any of those
 * (CI: kubelet's healthz port went to a containerd stream server that listens on port 0, and kubelet
 * retried for 60 s). Undefined when no range of useful size is left: then the kernel chooses.
 */
export function listeningPortRange(ephemeral: PortRange | undefined): PortRange | undefined {
  if (ephemeral === undefined) return undefined;
  const below: PortRange = { low: LOWEST_PORT, high: ephemeral.low - 1 };
  const above: PortRange = { low: Math.max(LOWEST_PORT, ephemeral.high + 1), high: 65_535 };
  const size = (range: PortRange) => range.high - range.low + 1;
  if (size(below) >= MIN_RANGE_SIZE) return below;
  if (size(above) >= MIN_RANGE_SIZE) return above;
  return undefined;
}

function readEphemeralRange(): PortRange | undefined {
  try {
    return parseEphemeralRange(readFileSync(EPHEMERAL_RANGE_FILE, 'utf8'));
  } catch {
    return undefined;
  }
}

function listen(host: string, port: number): Promise<{ server: Server; port: number } | undefined> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', (error: NodeJS.ErrnoException) => {
      // Taken (or not ours to take): another pick will do. Anything else is a real failure.
      if (port !== 0 && (error.code === 'EADDRINUSE' || error.code === 'EACCES')) resolve(undefined);
      else reject(error);
    });
    server.listen({ host, port, exclusive: true }, () => {
      const address = server.address();
      if (address !== null && typeof address === 'object') resolve({ server, port: address.port });
      else
        server.close(() => {
          reject(new Error(`could not read the port the kernel gave on ${host}`));
        });
    });
  });
}

async function holdOnePort(host: string, range: PortRange | undefined): Promise<{ server: Server; port: number }> {
  if (range !== undefined) {
    for (let attempt = 0; attempt < ATTEMPTS_PER_PORT; attempt++) {
      const held = await listen(host, randomInt(range.low, range.high + 1));
      if (held !== undefined) return held;
    }
  }
  const held = await listen(host, 0);
  if (held === undefined) throw new Error(`no free port on ${host}`);
  return held;
}

/**
 * Finds `count` distinct free TCP ports on `host`, picked at random outside the kernel's ephemeral
 * range (see listeningPortRange). All of them stay bound until the last is chosen: released in
 * between, the same port could come back twice (it did: a fixture's webhook and metrics ports, 1
 * start in a few hundred). They are released before they are returned, so a caller that binds one
 * later can still lose a race to another process that picks ports the same way; the launchers report
 * that as PortTakenError and start again on fresh ports.
 */
export async function findFreePorts(
  count: number,
  host = '127.0.0.1',
  range: PortRange | undefined = listeningPortRange(readEphemeralRange()),
): Promise<number[]> {
  const held: Server[] = [];
  try {
    const ports: number[] = [];
    while (ports.length < count) {
      const { server, port } = await holdOnePort(host, range);
      held.push(server);
      ports.push(port);
    }
    return ports;
  } finally {
    await Promise.all(
      held.map(
        (server) =>
          new Promise<void>((resolve) => {
            server.close(() => {
              resolve();
            });
          }),
      ),
    );
  }
}

/** One free TCP port on `host` (see findFreePorts; ask for several at once when a process needs several). */
export async function findFreePort(host = '127.0.0.1'): Promise<number> {
  const [port] = await findFreePorts(1, host);
  if (port === undefined) throw new Error(`no free port on ${host}`);
  return port;
}
