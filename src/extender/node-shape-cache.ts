/**
 * Values kept per node and pod shape (pod-shape.ts), valid while the node's generation in the state
 * store holds: any change to the node or the pods on it moves the generation and drops them all. A
 * few shapes per node, oldest out first: replicas of a few workloads share a handful of shapes.
 */
export class NodeShapeCache<V> {
  private readonly byNode = new Map<string, { generation: number; values: Map<string, V> }>();

  constructor(private readonly shapesPerNode: number) {}

  get(node: string, generation: number, shape: string): V | undefined {
    const entry = this.byNode.get(node);
    return entry?.generation === generation ? entry.values.get(shape) : undefined;
  }

  set(node: string, generation: number, shape: string, value: V): void {
    let entry = this.byNode.get(node);
    if (entry?.generation !== generation) {
      entry = { generation, values: new Map() };
      this.byNode.set(node, entry);
    }
    if (!entry.values.has(shape) && entry.values.size >= this.shapesPerNode) entry.values.delete(entry.values.keys().next().value ?? '');
    entry.values.set(shape, value);
  }
}
