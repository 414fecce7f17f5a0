import type { ListWatchSource, WatchEventType } from '../../src/cluster/reflector.js';

/**
 * A list-watch source whose watch events reach the store `lagMs` late, in order: a pod watch that
 * lags behind the apiserver (a slow or overloaded informer). LISTs are not delayed. `lagMs` can be
 * changed while the watch runs; events already queued keep their delivery time.
 */
export class LaggingSource<T> implements ListWatchSource<T> {
  constructor(
    private readonly inner: ListWatchSource<T>,
    public lagMs = 0,
  ) {}

  list(signal: AbortSignal) {
    return this.inner.list(signal);
  }

  watch(
    resourceVersion: string,
    handlers: { onEvent(type: WatchEventType, object: T): void; onBookmark(resourceVersion: string): void },
    signal: AbortSignal,
  ): Promise<void> {
    let last = Promise.resolve();
    // Each delivery waits for the one before it and for its own due time, so order is kept.
    const later = (deliver: () => void): void => {
      const due = Date.now() + this.lagMs;
      last = last.then(
        () =>
          new Promise<void>((resolve) => {
            setTimeout(
              () => {
                if (!signal.aborted) deliver();
                resolve();
              },
              Math.max(0, due - Date.now()),
            );
          }),
      );
    };
    return this.inner
      .watch(
        resourceVersion,
        {
          onEvent: (type, object) => {
            later(() => {
              handlers.onEvent(type, object);
            });
          },
          onBookmark: (version) => {
            later(() => {
              handlers.onBookmark(version);
            });
          },
        },
        signal,
      )
      .then(async () => {
        await last;
      });
  }
}
