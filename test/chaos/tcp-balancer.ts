import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP balancer, standing in for a Service in front of the replicas: each connection
 * goes to the next backend that accepts it, so kube-scheduler and kube-apiserver reach whichever
 * replica is up. TLS passes through untouched.
 */
export class TcpBalancer {
  private next = 0;
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly backends: () => number[],
  ) {}

  static async start(backends: () => number[]): Promise<TcpBalancer> {
    const server = createServer();
    await new Promise<void>((done, fail) => {
      server.once('error', fail);
      server.listen({ host: '127.0.0.1', port: 0 }, () => {
        done();
      });
    });
    const address = server.address();
    if (address === null || typeof address !== 'object') throw new Error('balancer: no port');
    const balancer = new TcpBalancer(server, address.port, backends);
    server.on('connection', (client) => {
      balancer.route(client);
    });
    return balancer;
  }

  private route(client: Socket): void {
    this.sockets.add(client);
    client.once('close', () => this.sockets.delete(client));
    client.on('error', () => {
      client.destroy();
    });
    client.pause();
    const ports = this.backends();
    const tryBackend = (attempt: number): void => {
      if (attempt >= ports.length) {
        client.destroy();
        return;
      }
      const port = ports[(this.next + attempt) % ports.length] ?? 0;
      const upstream = connect({ host: '127.0.0.1', port });
      upstream.once('connect', () => {
        this.next = (this.next + attempt + 1) % Math.max(1, ports.length);
        this.sockets.add(upstream);
        upstream.once('close', () => {
          this.sockets.delete(upstream);
          client.destroy();
        });
        client.once('close', () => upstream.destroy());
        upstream.on('error', () => {
          upstream.destroy();
        });
        client.pipe(upstream).pipe(client);
        client.resume();
      });
      upstream.once('error', () => {
        upstream.destroy();
        tryBackend(attempt + 1);
      });
    };
    tryBackend(0);
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((done) => {
      this.server.close(() => {
        done();
      });
    });
  }
}
