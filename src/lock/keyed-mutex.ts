/**
 * Serialises async work per key (one queue per node name) without a global lock: work on
 * different keys runs concurrently. Entries are dropped when their queue empties, so node churn
 * does not grow the map.
 */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    let done: () => void = () => undefined;
    const current = new Promise<void>((resolve) => {
      done = resolve;
    });
    const tail = previous.then(() => current);
    this.tails.set(key, tail);
    await previous;
    try {
      return await work();
    } finally {
      done();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }

  /** Keys with work queued or running (for tests and diagnostics). */
  get activeKeys(): number {
    return this.tails.size;
  }
}
