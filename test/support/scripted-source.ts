import type { ListWatchSource, WatchEventType, WatchHandlers } from '../../src/cluster/reflector.js';

/** A source whose LIST answers and watch endings are scripted by the test. */
export class ScriptedSource<T> implements ListWatchSource<T> {
  items: T[] = [];
  listFailures = 0;
  lists = 0;
  private current: { handlers: WatchHandlers<T>; end: (error?: Error) => void } | undefined;

  list(): Promise<{ items: T[]; resourceVersion: string }> {
    this.lists++;
    if (this.listFailures > 0) {
      this.listFailures--;
      return Promise.reject(new Error('HTTP 429 throttled'));
    }
    return Promise.resolve({ items: [...this.items], resourceVersion: '1' });
  }

  watch(_rv: string, handlers: WatchHandlers<T>, signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      this.current = {
        handlers,
        end: (error) => {
          this.current = undefined;
          if (error) reject(error);
          else resolve();
        },
      };
      signal.addEventListener(
        'abort',
        () => {
          resolve();
        },
        { once: true },
      );
    });
  }

  emit(type: WatchEventType, object: T): void {
    this.current?.handlers.onEvent(type, object);
  }

  /** Ends the open watch with `error`. */
  fail(error: Error): void {
    this.current?.end(error);
  }
}
