import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * The static import graph of a source tree, read from the text of its modules: every relative
 * specifier of an import, export-from or dynamic import, resolved to the .ts file it names. Enough
 * to find cycles and count imports between folders; eslint's layer rule is what enforces them.
 */
export interface ImportGraph {
  /** Module path (relative to the root) → the modules it imports, also relative. */
  edges: ReadonlyMap<string, readonly string[]>;
}

const SPECIFIER = /(?:^|[^\w.$])(?:from\s*|import\s*\(\s*|import\s+)['"](\.{1,2}\/[^'"]+)['"]/g;

function modulesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return modulesUnder(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

export function importGraph(root: string): ImportGraph {
  const edges = new Map<string, string[]>();
  for (const file of modulesUnder(root)) {
    const targets = [...readFileSync(file, 'utf8').matchAll(SPECIFIER)]
      .map((match) => resolve(dirname(file), match[1] ?? '').replace(/\.js$/, '.ts'))
      .map((target) => relative(root, target));
    edges.set(relative(root, file), [...new Set(targets)]);
  }
  return { edges };
}

/** Strongly connected groups of more than one node (Tarjan): each is a cycle. */
export function cycles(edges: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, next);
    low.set(node, next);
    next++;
    stack.push(node);
    onStack.add(node);
    for (const target of edges.get(node) ?? []) {
      if (!index.has(target)) {
        visit(target);
        low.set(node, Math.min(low.get(node) ?? 0, low.get(target) ?? 0));
      } else if (onStack.has(target)) {
        low.set(node, Math.min(low.get(node) ?? 0, index.get(target) ?? 0));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const group: string[] = [];
    for (let member = stack.pop(); member !== undefined; member = stack.pop()) {
      onStack.delete(member);
      group.push(member);
      if (member === node) break;
    }
    if (group.length > 1) found.push(group.sort());
  };
  for (const node of edges.keys()) if (!index.has(node)) visit(node);
  return found;
}

/** The folder graph: the first path segment of each module ('' for files at the root). */
export function folderEdges(graph: ImportGraph): Map<string, string[]> {
  const folder = (path: string) => (path.includes('/') ? path.slice(0, path.indexOf('/')) : '');
  const edges = new Map<string, Set<string>>();
  for (const [from, targets] of graph.edges) {
    for (const target of targets) {
      if (folder(from) === folder(target)) continue;
      const set = edges.get(folder(from)) ?? new Set<string>();
      set.add(folder(target));
      edges.set(folder(from), set);
    }
  }
  return new Map([...edges].map(([key, set]) => [key, [...set]]));
}
