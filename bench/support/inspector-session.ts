// A minimal client of the V8 inspector protocol over its WebSocket, for what a benchmark asks of a
// child process started with --inspect: a full GC and the heap that survives it (RSS and the heap
// figures of prom-client include garbage V8 has not collected yet, so they move with GC timing).
export class InspectorSession {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (result: unknown) => void; reject: (error: Error) => void }>();

  private constructor(private readonly socket: WebSocket) {
    socket.addEventListener('message', (event) => {
      const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown; error?: { message?: string } };
      if (message.id === undefined) return;
      const pending = this.waiting.get(message.id);
      if (pending === undefined) return;
      this.waiting.delete(message.id);
      if (message.error !== undefined) pending.reject(new Error(`inspector: ${message.error.message ?? 'error'}`));
      else pending.resolve(message.result);
    });
  }

  /** `url`: the ws:// address the child printed ("Debugger listening on ws://..."). */
  static async connect(url: string): Promise<InspectorSession> {
    const socket = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener(
        'open',
        () => {
          resolve();
        },
        { once: true },
      );
      socket.addEventListener(
        'error',
        () => {
          reject(new Error(`inspector: cannot connect to ${url}`));
        },
        { once: true },
      );
    });
    return new InspectorSession(socket);
  }

  send<T>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, {
        resolve: (result) => {
          resolve(result as T);
        },
        reject,
      });
      this.socket.send(JSON.stringify({ id, method, params }));
    });
  }

  /**
   * Collects garbage (twice: weak references and finalizers free more on the second) and reads the
   * heap left, in bytes.
   */
  async liveHeapBytes(): Promise<number> {
    await this.send('HeapProfiler.collectGarbage');
    await this.send('HeapProfiler.collectGarbage');
    return (await this.send<{ usedSize: number }>('Runtime.getHeapUsage')).usedSize;
  }

  close(): void {
    this.socket.close();
  }
}

/** The inspector address in a child's stderr, once it printed it. */
export function inspectorUrlIn(output: string): string | undefined {
  return /Debugger listening on (ws:\/\/\S+)/.exec(output)?.[1];
}
