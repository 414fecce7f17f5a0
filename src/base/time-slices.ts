import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * Work over a caller-sized list in slices of a few milliseconds. The webhook, the extender and the
 * metrics listener share one event loop: a filter over 100,000 node names done in one go would
 * hold an admission review (10 s webhook timeout, failing open) for as long as it runs.
 */

/** How long one slice may run before other callbacks get their turn. */
export const SLICE_MS = 4;
/** The clock is read once per this many items: reading it costs more than most items. */
const CHECK_EVERY = 64;

/** Calls `work` for each item in order, yielding to the event loop between slices of `sliceMs`. */
export async function forEachInSlices<T>(
  items: readonly T[],
  work: (item: T, index: number) => void,
  sliceMs: number = SLICE_MS,
): Promise<void> {
  let sliceStart = performance.now();
  for (let index = 0; index < items.length; index += 1) {
    work(items[index] as T, index);
    if ((index + 1) % CHECK_EVERY === 0 && performance.now() - sliceStart >= sliceMs) {
      await nextTurn();
      sliceStart = performance.now();
    }
  }
}

/** `items` mapped by `work`, in slices like forEachInSlices. */
export async function mapInSlices<T, R>(
  items: readonly T[],
  work: (item: T, index: number) => R,
  sliceMs: number = SLICE_MS,
): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  await forEachInSlices(
    items,
    (item, index) => {
      results[index] = work(item, index);
    },
    sliceMs,
  );
  return results;
}

/** Arrays and maps with more entries than this are encoded a slice at a time. */
const ENTRIES_PER_SLICE = 2000;

function isPlainData(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && typeof (value as { toJSON?: unknown }).toJSON !== 'function';
}

/**
 * The JSON text of plain data (objects, arrays, strings, numbers, booleans, null, and Maps with
 * string keys, which are written as objects), in pieces, with long arrays and maps encoded a slice
 * at a time and the event loop yielded to in between: a filter answer for 100,000 nodes is
 * megabytes of JSON, which JSON.stringify would produce in one block.
 */
export async function* jsonPieces(value: unknown): AsyncGenerator<string> {
  if (value instanceof Map) {
    let separator = '';
    yield '{';
    let slice: [unknown, unknown][] = [];
    const flush = (): string => {
      const encoded = JSON.stringify(Object.fromEntries(slice)).slice(1, -1);
      slice = [];
      if (encoded === '') return '';
      const piece = `${separator}${encoded}`;
      separator = ',';
      return piece;
    };
    for (const entry of value as Map<unknown, unknown>) {
      slice.push(entry);
      if (slice.length === ENTRIES_PER_SLICE) {
        yield flush();
        await nextTurn();
      }
    }
    yield `${flush()}}`;
    return;
  }
  if (Array.isArray(value)) {
    if (value.length <= ENTRIES_PER_SLICE) {
      yield JSON.stringify(value);
      return;
    }
    yield '[';
    for (let start = 0; start < value.length; start += ENTRIES_PER_SLICE) {
      yield `${start === 0 ? '' : ','}${JSON.stringify(value.slice(start, start + ENTRIES_PER_SLICE)).slice(1, -1)}`;
      await nextTurn();
    }
    yield ']';
    return;
  }
  if (!isPlainData(value)) {
    // JSON.stringify gives undefined for undefined, functions and symbols (typed as string).
    const encoded = JSON.stringify(value) as string | undefined;
    yield encoded ?? 'null';
    return;
  }
  let separator = '';
  yield '{';
  for (const [key, field] of Object.entries(value)) {
    // As JSON.stringify: object fields that are undefined or functions are left out.
    if (field === undefined || typeof field === 'function') continue;
    yield `${separator}${JSON.stringify(key)}:`;
    separator = ',';
    yield* jsonPieces(field);
  }
  yield '}';
}

/** The whole JSON text of jsonPieces, as one string. */
export async function stringifyInSlices(value: unknown): Promise<string> {
  const pieces: string[] = [];
  for await (const piece of jsonPieces(value)) pieces.push(piece);
  return pieces.join('');
}
