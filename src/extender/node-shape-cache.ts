/**
 * Values kept per pod shape (pod-shape.ts) and node, each valid while the node's generation in the
 * state store holds: any change to the node or the pods on it moves the generation and the node's
 * old values stop answering. A few shapes, the least recently used out first: replicas of a few
 * workloads share a handful of shapes.
 *
 * Keyed by shape first: filter resolves the pod's shape once per call and then does one lookup per
 * node name (kube-scheduler may send thousands), and an entry is rewritten in place when its node
 * moves on, so a burst's binds allocate nothing here.
 */
export class NodeShapeCache<V> {
  private readonly byShape = new Map<string, ShapeValues<V>>();

  constructor(private readonly shapes: number) {}

  /** The values of one shape, made the most recently used (created when new, the oldest shape out). */
  forShape(shape: string): ShapeValues<V> {
    let values = this.byShape.get(shape);
    if (values === undefined) {
      values = new ShapeValues<V>();
      if (this.byShape.size >= this.shapes) this.byShape.delete(this.byShape.keys().next().value ?? '');
    } else {
      this.byShape.delete(shape);
    }
    this.byShape.set(shape, values);
    return values;
  }

  /** The value kept for the node and shape at this generation; a lookup alone keeps no new shape. */
  get(node: string, generation: number, shape: string): V | undefined {
    return this.byShape.has(shape) ? this.forShape(shape).get(node, generation) : undefined;
  }

  set(node: string, generation: number, shape: string, value: V): void {
    this.forShape(shape).set(node, generation, value);
  }
}

/** One shape's values by node, each with the node generation it was computed at. */
export class ShapeValues<V> {
  private readonly byNode = new Map<string, { generation: number; value: V }>();

  get(node: string, generation: number): V | undefined {
    const entry = this.byNode.get(node);
    return entry?.generation === generation ? entry.value : undefined;
  }

  set(node: string, generation: number, value: V): void {
    const entry = this.byNode.get(node);
    if (entry === undefined) {
      this.byNode.set(node, { generation, value });
    } else {
      entry.generation = generation;
      entry.value = value;
    }
  }

  get size(): number {
    return this.byNode.size;
  }

  /** Forgets every node (the owner clears a shape that has collected names of deleted nodes). */
  clear(): void {
    this.byNode.clear();
  }
}
