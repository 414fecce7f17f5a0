import { isNewerVersion } from '../base/resource-version.js';

/**
 * The objects of one resource kind as the last LIST and watch events left them, keyed by
 * namespace/name. Pure: it turns a relist or an event into the add/update/delete changes it implies.
 *
 * A relist is reconciled by UID (client-go's DeltaFIFO Replace does it by key only): an object that
 * reappears under the same name with a new UID was deleted and recreated while the watch was down,
 * so the old incarnation gets its own delete. Usage and lock releases keyed by UID depend on it.
 */
export interface StoredObject {
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string };
}

export type ObjectChange<T> =
  { type: 'add'; object: T } | { type: 'update'; object: T; previous: T } | { type: 'delete'; object: T };

export function objectKey(object: StoredObject): string | undefined {
  const name = object.metadata?.name;
  if (name === undefined || name === '') return undefined;
  const namespace = object.metadata?.namespace;
  return namespace === undefined || namespace === '' ? name : `${namespace}/${name}`;
}

export class ObjectStore<T extends StoredObject> {
  private readonly objects = new Map<string, T>();

  get size(): number {
    return this.objects.size;
  }

  get(key: string): T | undefined {
    return this.objects.get(key);
  }

  values(): IterableIterator<T> {
    return this.objects.values();
  }

  /** Applies one watch event; returns the changes (none for an object without a name). */
  apply(type: 'ADDED' | 'MODIFIED' | 'DELETED', object: T): ObjectChange<T>[] {
    const key = objectKey(object);
    if (key === undefined) return [];
    const previous = this.objects.get(key);
    if (type === 'DELETED') {
      if (previous === undefined) return [];
      this.objects.delete(key);
      // The watch's final state of the object is the better description of what went away.
      return [{ type: 'delete', object: previous.metadata?.uid === object.metadata?.uid ? object : previous }];
    }
    this.objects.set(key, object);
    if (previous === undefined) return [{ type: 'add', object }];
    if (previous.metadata?.uid !== object.metadata?.uid)
      return [
        { type: 'delete', object: previous },
        { type: 'add', object },
      ];
    return [{ type: 'update', object, previous }];
  }

  /** Replaces everything with a fresh LIST; returns the changes it implies, deletes first. */
  replace(items: readonly T[]): ObjectChange<T>[] {
    const fresh = new Map<string, T>();
    for (const item of items) {
      const key = objectKey(item);
      if (key !== undefined) fresh.set(key, item);
    }
    const deletes: ObjectChange<T>[] = [];
    const upserts: ObjectChange<T>[] = [];
    for (const [key, previous] of this.objects) {
      const next = fresh.get(key);
      if (next === undefined || next.metadata?.uid !== previous.metadata?.uid)
        deletes.push({ type: 'delete', object: previous });
    }
    for (const [key, object] of fresh) {
      const previous = this.objects.get(key);
      if (previous === undefined || previous.metadata?.uid !== object.metadata?.uid)
        upserts.push({ type: 'add', object });
      else if (previous.metadata?.resourceVersion !== object.metadata?.resourceVersion)
        upserts.push({ type: 'update', object, previous });
    }
    this.objects.clear();
    for (const [key, object] of fresh) this.objects.set(key, object);
    return [...deletes, ...upserts];
  }

  /**
   * Puts in an object we just wrote ourselves, unless the store already holds a newer version of it
   * (when versions cannot be compared the watch event brings it anyway).
   */
  observeWrite(object: T): ObjectChange<T>[] {
    const key = objectKey(object);
    if (key === undefined) return [];
    const previous = this.objects.get(key);
    if (previous === undefined || previous.metadata?.uid !== object.metadata?.uid) return [];
    if (!isNewerVersion(object.metadata?.resourceVersion, previous.metadata?.resourceVersion)) return [];
    this.objects.set(key, object);
    return [{ type: 'update', object, previous }];
  }
}
