/**
 * The kube-scheduler extender wire format (k8s.io/kube-scheduler/extender/v1). The Go types have
 * no json tags, so keys are Go field names; Go decodes them case-insensitively, so we read them
 * that way too, and always write the canonical names.
 */
export interface ExtenderFilterResult {
  Nodes: null;
  NodeNames: string[] | null;
  FailedNodes: Record<string, string> | null;
  FailedAndUnresolvableNodes: Record<string, string> | null;
  Error: string;
}

export interface HostPriority {
  Host: string;
  Score: number;
}

export interface ExtenderBindingResult {
  Error: string;
}

export interface FilterArgs {
  pod: Record<string, unknown>;
  nodeNames: string[];
}

export interface BindingArgs {
  podName: string;
  podNamespace: string;
  podUid: string;
  node: string;
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; error: string };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Reads `name` from a Go-encoded object case-insensitively, as encoding/json does. */
export function goField(object: Record<string, unknown>, name: string): unknown {
  if (name in object) return object[name];
  const lowered = name.toLowerCase();
  const key = Object.keys(object).find((candidate) => candidate.toLowerCase() === lowered);
  return key === undefined ? undefined : object[key];
}

function nodeNamesOf(args: Record<string, unknown>): string[] | string {
  const names = goField(args, 'NodeNames');
  if (Array.isArray(names)) {
    if (!names.every((name) => typeof name === 'string' && name !== '')) return 'NodeNames must be a list of node names';
    return names as string[];
  }
  // Without nodeCacheCapable the scheduler sends whole Node objects instead.
  const nodes = goField(args, 'Nodes');
  const items = isRecord(nodes) ? nodes.items : undefined;
  if (Array.isArray(items)) {
    const fromObjects = items.map((item) => (isRecord(item) && isRecord(item.metadata) ? item.metadata.name : undefined));
    if (!fromObjects.every((name) => typeof name === 'string' && name !== '')) return 'Nodes.items must be Node objects with names';
    return fromObjects as string[];
  }
  return 'extender args have neither NodeNames nor Nodes';
}

export function parseFilterArgs(body: unknown): Parsed<FilterArgs> {
  if (!isRecord(body)) return { ok: false, error: 'extender args must be a JSON object' };
  const pod = goField(body, 'Pod');
  if (!isRecord(pod) || !isRecord(pod.metadata) || typeof pod.metadata.name !== 'string') return { ok: false, error: 'extender args missing pod' };
  const nodeNames = nodeNamesOf(body);
  if (typeof nodeNames === 'string') return { ok: false, error: nodeNames };
  return { ok: true, value: { pod, nodeNames } };
}

export function parseBindingArgs(body: unknown): Parsed<BindingArgs> {
  if (!isRecord(body)) return { ok: false, error: 'binding args must be a JSON object' };
  const fields = { podName: 'PodName', podNamespace: 'PodNamespace', podUid: 'PodUID', node: 'Node' } as const;
  const value: Partial<BindingArgs> = {};
  for (const [key, goName] of Object.entries(fields) as [keyof BindingArgs, string][]) {
    const field = goField(body, goName);
    if (typeof field !== 'string' || field === '') return { ok: false, error: `binding args missing ${goName}` };
    value[key] = field;
  }
  return { ok: true, value: value as BindingArgs };
}

export const filterResult = {
  passed(nodeNames: string[], failed: Record<string, string>): ExtenderFilterResult {
    return { Nodes: null, NodeNames: nodeNames, FailedNodes: Object.keys(failed).length > 0 ? failed : null, FailedAndUnresolvableNodes: null, Error: '' };
  },
  error(message: string): ExtenderFilterResult {
    return { Nodes: null, NodeNames: null, FailedNodes: null, FailedAndUnresolvableNodes: null, Error: message };
  },
};
