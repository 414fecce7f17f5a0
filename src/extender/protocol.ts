import { isDnsLabel, isDnsSubdomain } from '../base/k8s-names.js';
import { quoted } from '../base/user-text.js';
import { isRecord } from '../base/json.js';

/**
 * The kube-scheduler extender wire format (k8s.io/kube-scheduler/extender/v1). The Go types have
 * no json tags, so keys are Go field names; Go decodes them case-insensitively, so we read them
 * that way too, and always write the canonical names.
 */
export interface ExtenderFilterResult {
  Nodes: null;
  NodeNames: string[] | null;
  /** node → why it failed; a Map (written as a JSON object) because 100,000 keys are cheap to walk in one. */
  FailedNodes: ReadonlyMap<string, string> | null;
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

/** Reads `name` from a Go-encoded object case-insensitively, as encoding/json does. */
export function goField(object: Record<string, unknown>, name: string): unknown {
  if (name in object) return object[name];
  const lowered = name.toLowerCase();
  const key = Object.keys(object).find((candidate) => candidate.toLowerCase() === lowered);
  return key === undefined ? undefined : object[key];
}

/** Longest name kube-scheduler can send: node names are DNS-1123 subdomains. */
const MAX_NODE_NAME = 253;
/** Pod UIDs are 36-character UUIDs; anything much longer is not one. */
const MAX_UID = 128;

function nodeNameProblem(name: unknown, position: number, list: string): string | undefined {
  if (typeof name !== 'string' || name === '')
    return `${list} must be a list of node names (entry ${position} is ${quoted(name)})`;
  if (name.length > MAX_NODE_NAME)
    return `${list} entry ${position} (${quoted(name)}) is longer than ${MAX_NODE_NAME} characters`;
  return undefined;
}

function nodeNamesOf(args: Record<string, unknown>): string[] | string {
  const names = goField(args, 'NodeNames');
  if (Array.isArray(names)) {
    // An indexed loop: an entries() iterator would allocate a pair per name (100,000 of them).
    for (let position = 0; position < names.length; position += 1) {
      const name: unknown = names[position];
      if (typeof name !== 'string' || name === '' || name.length > MAX_NODE_NAME)
        return nodeNameProblem(name, position, 'NodeNames') ?? '';
    }
    return names as string[];
  }
  // Without nodeCacheCapable the scheduler sends whole Node objects instead.
  const nodes = goField(args, 'Nodes');
  const items = isRecord(nodes) ? nodes.items : undefined;
  if (Array.isArray(items)) {
    const fromObjects = items.map((item) =>
      isRecord(item) && isRecord(item.metadata) ? item.metadata.name : undefined,
    );
    for (const [position, name] of fromObjects.entries()) {
      const problem = nodeNameProblem(name, position, 'Nodes.items[].metadata.name');
      if (problem !== undefined) return problem;
    }
    return fromObjects as string[];
  }
  return 'extender args have neither NodeNames nor Nodes';
}

/**
 * Filter and prioritize arguments. Every name is checked here, so that nothing downstream (Events,
 * messages, the per-node caches) ever holds a name longer than Kubernetes allows.
 */
export function parseFilterArgs(body: unknown): Parsed<FilterArgs> {
  if (!isRecord(body)) return { ok: false, error: 'extender args must be a JSON object' };
  const pod = goField(body, 'Pod');
  if (!isRecord(pod) || !isRecord(pod.metadata) || typeof pod.metadata.name !== 'string')
    return { ok: false, error: 'extender args missing pod' };
  const { name, namespace } = pod.metadata;
  if (!isDnsSubdomain(name))
    return { ok: false, error: `extender args: pod name ${quoted(name)} is not a valid pod name` };
  if (namespace !== undefined && (typeof namespace !== 'string' || !isDnsLabel(namespace))) {
    return { ok: false, error: `extender args: pod namespace ${quoted(namespace)} is not a valid namespace` };
  }
  const nodeNames = nodeNamesOf(body);
  if (typeof nodeNames === 'string') return { ok: false, error: nodeNames };
  return { ok: true, value: { pod, nodeNames } };
}

/** What each binding argument names, for the error about an invalid one. */
const FIELD_KINDS: Record<keyof BindingArgs, string> = {
  podName: 'pod name',
  podNamespace: 'namespace',
  podUid: 'UID',
  node: 'node name',
};

export function parseBindingArgs(body: unknown): Parsed<BindingArgs> {
  if (!isRecord(body)) return { ok: false, error: 'binding args must be a JSON object' };
  const fields = { podName: 'PodName', podNamespace: 'PodNamespace', podUid: 'PodUID', node: 'Node' } as const;
  const valid: Record<keyof BindingArgs, (text: string) => boolean> = {
    podName: isDnsSubdomain,
    podNamespace: isDnsLabel,
    podUid: (text) => text.length <= MAX_UID,
    node: (text) => text.length <= MAX_NODE_NAME,
  };
  const value: Partial<BindingArgs> = {};
  for (const [key, goName] of Object.entries(fields) as [keyof BindingArgs, string][]) {
    const field = goField(body, goName);
    if (typeof field !== 'string' || field === '') return { ok: false, error: `binding args missing ${goName}` };
    if (!valid[key](field))
      return {
        ok: false,
        error: `binding args: ${goName} ${quoted(field)} is not a valid ${FIELD_KINDS[key]}`,
      };
    value[key] = field;
  }
  return { ok: true, value: value as BindingArgs };
}

export const filterResult = {
  passed(nodeNames: string[], failed: ReadonlyMap<string, string> = new Map()): ExtenderFilterResult {
    return {
      Nodes: null,
      NodeNames: nodeNames,
      FailedNodes: failed.size > 0 ? failed : null,
      FailedAndUnresolvableNodes: null,
      Error: '',
    };
  },
  error(message: string): ExtenderFilterResult {
    return { Nodes: null, NodeNames: null, FailedNodes: null, FailedAndUnresolvableNodes: null, Error: message };
  },
};

/**
 * The extender's verbs over validated arguments. `signal` is the request's: it aborts when
 * kube-scheduler closes the request or the request's timeout passes, and nobody waits for the answer.
 */
export interface ExtenderHandlers {
  filter(args: FilterArgs, signal: AbortSignal): Promise<ExtenderFilterResult>;
  prioritize(args: FilterArgs, signal: AbortSignal): Promise<HostPriority[]>;
  bind(args: BindingArgs, signal: AbortSignal): Promise<ExtenderBindingResult>;
}
